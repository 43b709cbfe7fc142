#include "daemon/daemon_config.h"

#include <dirent.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/json_util.h"

namespace ckprof {
namespace {

using json = nlohmann::json;

// Drops whole-line '//' comments so the example config can explain itself.
std::string StripComments(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 2, "//") == 0) line.clear();
    out += line + "\n";
  }
  return out;
}

}  // namespace

Result<DaemonConfig> LoadDaemonConfigFile(const std::string& path, DaemonConfig c) {
  std::ifstream in(path);
  if (!in) return MakeError("config file " + path + " cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  auto parsed = ParseJson(StripComments(ss.str()));
  if (!parsed) return MakeError("config file " + path + ": " + parsed.error());
  const json& j = *parsed;
  if (!j.is_object()) return MakeError("config file " + path + ": must be a JSON object");
  c.config_file = path;
  std::string err;
  auto bad = [&](const std::string& key, const std::string& what) {
    if (err.empty()) err = "config file " + path + ": key '" + key + "' " + what;
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    auto str = [&](std::string* out) {
      if (v.is_string())
        *out = v.get<std::string>();
      else
        bad(k, "must be a string");
    };
    auto num = [&](double* out, double min, double max = 1e12) {
      if (v.is_number() && v.get<double>() >= min && v.get<double>() <= max) {
        *out = v.get<double>();
      } else {
        bad(k, "must be a number from " + std::to_string(static_cast<int64_t>(min)) + " to " +
                   std::to_string(static_cast<int64_t>(max)));
      }
    };
    auto strlist = [&](std::vector<std::string>* out) {
      if (v.is_string()) {
        *out = {v.get<std::string>()};
      } else if (v.is_array() &&
                 std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); })) {
        *out = v.get<std::vector<std::string>>();
      } else {
        bad(k, "must be a string or a list of strings");
      }
    };
    if (k == "socket")
      str(&c.socket);
    else if (k == "socket_group")
      str(&c.socket_group);
    else if (k == "socket_mode") {
      unsigned mode = 0;
      bool ok = false;
      if (v.is_string()) {
        const std::string m = v.get<std::string>();
        auto [end, ec] = std::from_chars(m.data(), m.data() + m.size(), mode, 8);
        ok = !m.empty() && ec == std::errc() && end == m.data() + m.size();
      } else if (v.is_number_unsigned()) {
        ok = v.get<uint64_t>() <= 07777;
        if (ok) mode = static_cast<unsigned>(v.get<uint64_t>());
      }
      if (ok && mode <= 07777) {
        c.socket_mode = mode;
      } else {
        bad(k,
            "must be a file mode up to 07777: an octal string such as \"0660\", or its value "
            "as a number (432)");
      }
    } else if (k == "state_dir")
      str(&c.state_dir);
    else if (k == "lock_dir")
      str(&c.lock_dir);
    else if (k == "gpus") {
      if (v.is_array()) {
        std::string s;
        for (const auto& e : v) {
          if (!e.is_number_integer()) {
            bad(k, "must be \"auto\", \"0,1\" or a list of integers");
            break;
          }
          s += (s.empty() ? "" : ",") + std::to_string(e.get<int64_t>());
        }
        c.gpus = s;
      } else {
        str(&c.gpus);
      }
    } else if (k == "profiler_path")
      str(&c.profiler_path);
    else if (k == "pin_env")
      strlist(&c.pin_env);
    else if (k == "timeout")
      num(&c.timeout_s, 0);
    else if (k == "kill_grace")
      num(&c.kill_grace_s, 0);
    else if (k == "start_timeout")
      num(&c.start_timeout_s, 0.001);
    else if (k == "pass_env")
      strlist(&c.pass_env);
    else if (k == "log_level")
      str(&c.log_level);
    else if (k == "admin_group")
      str(&c.admin_group);
    else if (k == "allowed_profiler_roots")
      strlist(&c.allowed_profiler_roots);
    else if (k == "fair_share_half_life")
      num(&c.fair_share_half_life_s, 1);
    else if (k == "max_attempts") {
      double d = c.max_attempts;
      num(&d, 1, 1000);
      c.max_attempts = static_cast<int>(d);
    } else if (k == "health_failures") {
      double d = c.health_failures;
      num(&d, 0, 1000);
      c.health_failures = static_cast<int>(d);
    } else if (k == "noise_threshold") {
      num(&c.noise_threshold, 0, 100);
    } else if (k == "keep_finished_days") {
      num(&c.keep_finished_days, 0, 1e6);
    } else if (k == "reuse_max_age_days") {
      num(&c.reuse_max_age_days, 0, 1e6);
    } else if (k == "share_results") {
      if (v.is_boolean())
        c.share_results = v.get<bool>();
      else
        bad(k, "must be true or false");
    } else if (k == "on_job_end") {
      str(&c.on_job_end);
    } else if (k == "sendmail") {
      str(&c.sendmail);
    } else if (k == "on_end_timeout") {
      num(&c.on_end_timeout_s, 0.1, 86400);
    } else if (k == "max_frame_bytes") {
      double d = static_cast<double>(c.max_frame_bytes);
      num(&d, 1024, 16.0 * (1ull << 30));
      c.max_frame_bytes = static_cast<uint64_t>(d);
    } else if (k == "client_timeout")
      num(&c.client_timeout_s, 0.1);
    else if (k == "max_clients") {
      double d = c.max_clients;
      num(&d, 1, 100000);
      c.max_clients = static_cast<int>(d);
    } else if (k == "admin_reserved_clients") {
      double d = c.admin_reserved_clients;
      num(&d, 0, 100000);
      c.admin_reserved_clients = static_cast<int>(d);
    } else if (k == "max_connections_per_user") {
      double d = c.max_connections_per_user;
      num(&d, 1, 100000);
      c.max_connections_per_user = static_cast<int>(d);
    } else if (k == "max_streams_per_user") {
      double d = c.max_streams_per_user;
      num(&d, 1, 100000);
      c.max_streams_per_user = static_cast<int>(d);
    } else if (k == "max_request_bytes") {
      double d = static_cast<double>(c.max_request_bytes);
      num(&d, 1024, 1e15);
      c.max_request_bytes = static_cast<uint64_t>(d);
    } else if (k == "max_request_bytes_per_user") {
      double d = static_cast<double>(c.max_request_bytes_per_user);
      num(&d, 1024, 1e15);
      c.max_request_bytes_per_user = static_cast<uint64_t>(d);
    } else if (k == "full_sync") {
      if (v.is_boolean())
        c.full_sync = v.get<bool>();
      else
        bad(k, "must be true or false");
    } else if (k == "capture_bytes") {
      double d = static_cast<double>(c.capture_bytes);
      num(&d, 256, 1u << 30);
      c.capture_bytes = static_cast<size_t>(d);
    } else if (k == "foreign_gpu_use") {
      str(&c.foreign_gpu_use);
      if (c.foreign_gpu_use != "wait" && c.foreign_gpu_use != "flag" &&
          c.foreign_gpu_use != "ignore") {
        bad(k, "must be \"wait\", \"flag\" or \"ignore\"");
      }
    } else if (k == "foreign_poll_ms") {
      num(&c.foreign_poll_ms, 10, 3600e3);
    } else if (k == "sysfs_root") {
      str(&c.sysfs_root);
    } else if (k == "nvidia_smi") {
      str(&c.nvidia_smi);
    } else if (k == "task_cgroups") {
      if (v.is_boolean())
        c.task_cgroups = v.get<bool>();
      else
        bad(k, "must be true or false");
    } else if (k == "task_memory_max") {
      double d = static_cast<double>(c.task_memory_max);
      num(&d, 0, 1e15);
      c.task_memory_max = static_cast<uint64_t>(d);
    } else if (k == "executor") {
      if (v.is_string() && v.get<std::string>() == "local") {
        c.executor = ExecutorConfig{};
      } else if (v.is_object()) {
        if (std::string e = ParseExecutor(v, &c.executor); !e.empty()) bad(k, e);
      } else {
        bad(k,
            "must be \"local\" or an object such as {\"kind\": \"slurm\", \"partition\": "
            "\"gpu\", \"gres\": \"gpu:1\", \"work_dir\": \"/shared/ckprofd\"}");
      }
    } else if (k == "max_timeout") {  // per-user limits
      num(&c.max_timeout_s, 0, 1e7);
    } else if (k == "max_job_timeout") {
      num(&c.max_job_timeout_s, 0, 1e8);
    } else if (k == "max_queued_runs_per_user") {
      double d = static_cast<double>(c.max_queued_runs_per_user);
      num(&d, 0, 1e12);
      c.max_queued_runs_per_user = static_cast<int64_t>(d);
    } else if (k == "max_jobs_per_user") {
      double d = static_cast<double>(c.max_jobs_per_user);
      num(&d, 0, 1e9);
      c.max_jobs_per_user = static_cast<int64_t>(d);
    } else if (k == "max_gpus_per_user") {
      double d = c.max_gpus_per_user;
      num(&d, 0, 100000);
      c.max_gpus_per_user = static_cast<int>(d);
    } else {
      bad(k, "is not a known setting (see config/ckprofd.json)");
    }
  }
  if (!err.empty()) return MakeError(err);
  if (std::string e = UserLimitsError(c); !e.empty()) {
    return MakeError("config file " + path + ": " + e);
  }
  return c;
}

double MaxUserTimeout(const DaemonConfig& c) {
  return c.max_timeout_s >= 0 ? c.max_timeout_s : c.timeout_s;
}

std::string UserLimitsError(const DaemonConfig& c) {
  const double max = MaxUserTimeout(c);
  if (max <= 0 || (c.timeout_s > 0 && c.timeout_s <= max)) return "";
  auto s = [](double v) { return fmt::format("{:g} s", v); };
  return "timeout (" + (c.timeout_s > 0 ? s(c.timeout_s) : std::string("0, none")) +
         ") is above max_timeout (" + s(max) +
         "): jobs that name no --timeout get the timeout, which must be within what a user may "
         "ask for; set timeout to at most max_timeout";
}

}  // namespace ckprof
