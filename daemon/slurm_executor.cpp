#include "daemon/slurm_executor.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <asio/post.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "common/ck_output.h"
#include "common/text_table.h"
#include "daemon/unix_time.h"

namespace ckprof {
namespace {

using Kind = Outcome::Kind;
using SystemClock = std::chrono::system_clock;

// Slurm commands in flight at once: slurmctld takes submissions one at a time, so a few at
// once keep it fed without a crowd of processes.
constexpr int kSubmitsAtOnce = 4;
// Polls in a row that find neither the job in squeue/sacct nor its end file, before the run is
// given up as lost (and requeued).
constexpr int kMissingPolls = 3;
constexpr double kClusterMaxAge_s = 2;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitBar(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t bar = line.find('|', start);
    out.push_back(line.substr(start, bar == std::string_view::npos ? bar : bar - start));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return out;
}

template <typename OnLine>
void ForEachLine(std::string_view text, OnLine on_line) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!Trim(line).empty()) on_line(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

}  // namespace

std::optional<int64_t> ParseSlurmJobId(std::string_view s) {
  s = Trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || v <= 0) return std::nullopt;
  // "123;cluster" (--parsable on a multi-cluster setup) is fine; "123_4" (an array) is not ours.
  if (end != s.data() + s.size() && *end != ';') return std::nullopt;
  return v;
}

namespace {

// "CANCELLED by 0" -> "CANCELLED"; "COMPLETED+" (sacct's truncation) -> "COMPLETED".
std::string StateWord(std::string_view s) {
  s = Trim(s);
  size_t sp = s.find_first_of(" +");
  return std::string(s.substr(0, sp));
}

}  // namespace

std::string LastLine(std::string_view s) {
  s = Trim(s);
  size_t nl = s.find_last_of('\n');
  if (nl != std::string_view::npos) s = Trim(s.substr(nl + 1));
  return std::string(s.substr(0, 300));
}

namespace {

std::string FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream ss(p);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string full = dir + "/" + name;
    if (access(full.c_str(), X_OK) == 0) return full;
  }
  return "";
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

SystemClock::time_point FromUnix(double t) {
  return SystemClock::time_point(
      std::chrono::duration_cast<SystemClock::duration>(std::chrono::duration<double>(t)));
}

}  // namespace

int OpenRunFile(const std::string& path, std::optional<uid_t> owner) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (owner && st.st_uid != *owner && st.st_uid != geteuid())) {
    close(fd);
    errno = EPERM;
    return -1;
  }
  return fd;
}

namespace {

// Reads a run's file in chunks into `sink`; false when it cannot be opened.
template <typename Sink>
bool ReadRunFile(const std::string& path, std::optional<uid_t> owner, Sink sink) {
  int fd = OpenRunFile(path, owner);
  if (fd < 0) return false;
  std::vector<char> buf(64 * 1024);
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    sink(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
  close(fd);
  return true;
}

std::string SmallFile(const std::string& path, std::optional<uid_t> owner) {
  std::string text;
  ReadRunFile(path, owner, [&](std::string_view d) {
    if (text.size() < 4096) text.append(d.substr(0, 4096 - text.size()));
  });
  return text;
}

}  // namespace

Status MakeRunDir(const std::string& root, const std::string& rel, mode_t mode,
                  std::optional<uid_t> uid, std::optional<gid_t> gid) {
  std::string path = root;
  std::stringstream ss(rel);
  std::string part;
  std::vector<std::string> parts;
  while (std::getline(ss, part, '/'))
    if (!part.empty()) parts.push_back(part);
  for (size_t i = 0; i < parts.size(); ++i) {
    path += "/" + parts[i];
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return MakeError("cannot create " + path + ": " + std::strerror(errno));
    }
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return MakeError(path + " is not a directory");
    }
    const bool last = i + 1 == parts.size();
    if (last && uid && geteuid() == 0 && st.st_uid != *uid) {
      if (chown(path.c_str(), *uid, gid.value_or(static_cast<gid_t>(-1))) != 0) {
        return MakeError("cannot give " + path + " to uid " + std::to_string(*uid) + ": " +
                         std::strerror(errno));
      }
      chmod(path.c_str(), mode);
    }
  }
  return Status::Ok();
}

Status WriteFreshFile(const std::string& path, const std::string& text, mode_t mode,
                      std::optional<uid_t> uid, std::optional<gid_t> gid) {
  unlink(path.c_str());
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return MakeError("cannot write " + path + ": " + std::strerror(errno));
  if (uid && geteuid() == 0 && fchown(fd, *uid, gid.value_or(static_cast<gid_t>(-1))) != 0) {
    const int e = errno;
    close(fd);
    unlink(path.c_str());
    return MakeError("cannot give " + path + " to uid " + std::to_string(*uid) + ": " +
                     std::strerror(e));
  }
  fchmod(fd, mode);
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      close(fd);
      return MakeError("cannot write " + path + ": " + std::strerror(e));
    }
    off += static_cast<size_t>(n);
  }
  close(fd);
  return Status::Ok();
}

namespace {

// Rows of "ID|STATE|..." lines; the other columns by position (-1: not in these lines).
std::vector<SlurmJobRow> ParseRows(std::string_view text, int node_col, int reason_col,
                                   int exit_col) {
  std::vector<SlurmJobRow> rows;
  ForEachLine(text, [&](std::string_view line) {
    auto f = SplitBar(line);
    if (f.size() < 2) return;
    auto id = ParseSlurmJobId(f[0]);
    if (!id) return;
    SlurmJobRow r;
    r.id = *id;
    r.state = StateWord(f[1]);
    auto col = [&](int i) {
      return i >= 0 && static_cast<size_t>(i) < f.size() ? std::string(Trim(f[i])) : "";
    };
    r.node = col(node_col);
    r.reason = col(reason_col);
    r.exit_code = col(exit_col);
    if (r.node == "(null)" || r.node == "None assigned") r.node.clear();
    rows.push_back(std::move(r));
  });
  return rows;
}

}  // namespace

int SlurmSettings::GpusPerAllocation() const {
  // "gpu:2", "gpu:mi300x:2", "gpu:2,shard:1" (the first entry counts).
  const std::string_view g = std::string_view(gres).substr(0, gres.find(','));
  const size_t colon = g.rfind(':');
  if (colon == std::string_view::npos) return 1;
  int n = 0;
  const std::string_view tail = g.substr(colon + 1);
  auto [end, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), n);
  return ec == std::errc() && end == tail.data() + tail.size() && n >= 1 ? n : 1;
}

std::optional<double> ParseSlurmTime(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return std::nullopt;
  auto number = [](std::string_view s) -> std::optional<int64_t> {
    int64_t v = 0;
    if (s.empty()) return std::nullopt;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
    return v;
  };
  int64_t days = 0;
  const size_t dash = text.find('-');
  const bool has_days = dash != std::string_view::npos;
  if (has_days) {
    auto d = number(text.substr(0, dash));
    if (!d) return std::nullopt;
    days = *d;
    text.remove_prefix(dash + 1);
  }
  std::vector<int64_t> parts;
  while (true) {
    const size_t colon = text.find(':');
    auto v = number(text.substr(0, colon));
    if (!v) return std::nullopt;
    parts.push_back(*v);
    if (colon == std::string_view::npos) break;
    text.remove_prefix(colon + 1);
  }
  if (parts.size() > 3) return std::nullopt;
  int64_t seconds = 0;
  if (has_days) {
    // D-H, D-H:M, D-H:M:S
    const int64_t scale[] = {3600, 60, 1};
    for (size_t i = 0; i < parts.size(); ++i) seconds += parts[i] * scale[i];
  } else if (parts.size() == 1) {
    seconds = parts[0] * 60;  // minutes
  } else if (parts.size() == 2) {
    seconds = parts[0] * 60 + parts[1];  // M:S
  } else {
    seconds = parts[0] * 3600 + parts[1] * 60 + parts[2];
  }
  return static_cast<double>(days * 86400 + seconds);
}

std::vector<SlurmJobRow> ParseSqueueRows(std::string_view text) {
  return ParseRows(text, 2, 3, -1);
}

std::vector<SlurmJobRow> ParseSacctRows(std::string_view text) { return ParseRows(text, 3, -1, 2); }

bool SlurmStateFinal(std::string_view state) {
  static const std::set<std::string_view> kLive = {
      "PENDING",   "CONFIGURING", "RUNNING",     "COMPLETING",   "SUSPENDED",
      "RESIZING",  "REQUEUED",    "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD",
      "SIGNALING", "STAGE_OUT",   "STOPPED"};
  return !state.empty() && !kLive.count(state);
}

std::optional<Outcome> SlurmEndOutcome(const SlurmJobRow& row) {
  const std::string& s = row.state;
  const std::string where = row.node.empty() ? "" : " on " + row.node;
  if (s == "COMPLETED") return std::nullopt;
  if (s == "TIMEOUT") {
    return Outcome{Kind::kTimedOut, 0, 0,
                   "Slurm ended job " + std::to_string(row.id) + " at its time limit (TIMEOUT)"};
  }
  if (s == "CANCELLED") {
    return Outcome{Kind::kCancelled, 0, 0,
                   "Slurm job " + std::to_string(row.id) + " was cancelled (CANCELLED)"};
  }
  if (s == "FAILED" || s == "OUT_OF_MEMORY" || s == "DEADLINE") {
    Outcome o{Kind::kFailed, 1, 0, ""};
    o.reason = "Slurm job " + std::to_string(row.id) + where + " ended " + s;
    if (!row.exit_code.empty()) o.reason += " (exit " + row.exit_code + ")";
    if (s == "OUT_OF_MEMORY") o.reason += ": it ran out of the memory Slurm allows it";
    return o;
  }
  // NODE_FAIL, PREEMPTED, BOOT_FAIL, REVOKED, ...: not the task's fault; run it again.
  return Outcome{Kind::kInterrupted, 0, 0,
                 "Slurm job " + std::to_string(row.id) + where + " ended " + s};
}

namespace {

// Calls on(key, value) for each "key=value" word of `text`.
template <typename On>
void ForEachKeyValue(std::string_view text, On on) {
  std::stringstream ss{std::string(text)};
  std::string word;
  while (ss >> word) {
    size_t eq = word.find('=');
    if (eq != std::string::npos) on(word.substr(0, eq), word.substr(eq + 1));
  }
}

}  // namespace

void ParseSlurmStartLine(std::string_view text, SlurmRunFiles* f) {
  ForEachKeyValue(text, [&](const std::string& k, const std::string& v) {
    if (k == "node") f->node = v;
    if (k == "gpus") f->gpus = v;
    if (k == "start") f->start = std::atof(v.c_str());
  });
}

void ParseSlurmEndLine(std::string_view text, SlurmRunFiles* f) {
  ForEachKeyValue(text, [&](const std::string& k, const std::string& v) {
    int rc = 0;
    if (k == "rc" && std::from_chars(v.data(), v.data() + v.size(), rc).ec == std::errc()) {
      f->rc = rc;
    }
    if (k == "end") f->end = std::atof(v.c_str());
  });
}

Outcome OutcomeFromScriptStatus(int rc, bool had_timeout, double timeout_s, const CkPerf& perf,
                                std::string_view stderr_text) {
  if (had_timeout && (rc == 124 || rc == 128 + SIGKILL)) {
    Outcome o{Kind::kTimedOut, 0, rc == 124 ? SIGTERM : SIGKILL,
              "timed out after " + FormatSeconds(timeout_s)};
    if (rc != 124) o.reason += " (still running after SIGTERM: killed)";
    return o;
  }
  if (rc == 126 || rc == 127) {
    std::string why = LastLine(stderr_text);
    return Outcome{Kind::kSpawnFailed, rc, 0,
                   "cannot execute the profiler on the node" + (why.empty() ? "" : ": " + why)};
  }
  if (rc > 128 && rc < 128 + 65) return ClassifyExit(true, rc - 128, perf, stderr_text);
  return ClassifyExit(false, rc, perf, stderr_text);
}

std::vector<ClusterNode> ParseSinfoNodes(std::string_view text) {
  std::vector<ClusterNode> nodes;
  ForEachLine(text, [&](std::string_view line) {
    auto f = SplitBar(line);
    if (f.size() < 5) return;
    std::string name(Trim(f[0]));
    if (name.empty()) return;
    auto it = std::find_if(nodes.begin(), nodes.end(),
                           [&](const ClusterNode& n) { return n.name == name; });
    const std::string part(Trim(f[4]));
    if (it != nodes.end()) {
      if (!part.empty()) it->partitions += (it->partitions.empty() ? "" : ",") + part;
      return;
    }
    ClusterNode n;
    n.name = name;
    n.state = std::string(Trim(f[1]));
    n.gres = std::string(Trim(f[2]));
    n.gres_used = std::string(Trim(f[3]));
    n.partitions = part;
    nodes.push_back(std::move(n));
  });
  return nodes;
}

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

int64_t SlurmTimeLimitMinutes(double timeout_s, double grace_s) {
  if (timeout_s <= 0) return 0;
  return static_cast<int64_t>(std::ceil((timeout_s + grace_s) / 60.0)) + 1;
}

std::string SlurmBatchScript(const RunSpec& spec, const std::string& stem,
                             const std::vector<std::string>& pin_env) {
  std::string s = "#!/bin/sh\n";
  s += "# " + spec.comment + "\n";
  s += "# Written by ckprofd; Slurm runs it on a node. The profiler's output goes to the files "
       "beside it.\n";
  s += "b=" + ShellQuote(stem) + "\n";
  // (--export=NONE gives the user's own environment; a PATH for the tools used here at least.)
  s += "PATH=\"${PATH:-/usr/local/bin:/usr/bin:/bin}\"; export PATH\n";
  // Slurm pins the GPUs it grants; SLURM_JOB_GPUS says which they are on the node.
  s += "gpus=\"${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-${ROCR_VISIBLE_DEVICES:-"
       "${GPU_DEVICE_ORDINAL:-}}}}\"\n";
  s += "pin=\"${ROCR_VISIBLE_DEVICES:-${CUDA_VISIBLE_DEVICES:-${GPU_DEVICE_ORDINAL:-}}}\"\n";
  static const std::set<std::string> kSlurmSets = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                                                   "GPU_DEVICE_ORDINAL"};
  for (const auto& var : pin_env) {
    if (kSlurmSets.count(var)) continue;
    // HIP_VISIBLE_DEVICES (Slurm never sets it): the GPUs Slurm pinned, as ROCm numbers them.
    s += "[ -n \"$pin\" ] && export " + var + "=\"$pin\"\n";
  }
  for (const auto& [k, v] : spec.set_env) s += "export " + k + "=" + ShellQuote(v) + "\n";
  s += "printf 'node=%s gpus=%s start=%s\\n' \"${SLURMD_NODENAME:-$(hostname)}\" \"$gpus\" "
       "\"$(date +%s.%N)\" >\"$b.start\"\n";
  std::string cmd;
  const double timeout_s = std::chrono::duration<double>(spec.timeout).count();
  if (timeout_s > 0) {
    const double grace_s = std::chrono::duration<double>(spec.grace).count();
    cmd = "timeout -k " + Num(std::max(grace_s, 0.001)) + " " + Num(timeout_s) + " ";
  }
  for (size_t i = 0; i < spec.argv.size(); ++i) cmd += (i ? " " : "") + ShellQuote(spec.argv[i]);
  s += cmd + " </dev/null >\"$b.out\" 2>\"$b.err\"\n";
  s += "rc=$?\n";
  s += "printf 'rc=%s end=%s\\n' \"$rc\" \"$(date +%s.%N)\" >\"$b.end.tmp\" && "
       "mv -f \"$b.end.tmp\" \"$b.end\"\n";
  s += "exit 0\n";
  return s;
}

struct SlurmLauncher::Run {
  RunId id = 0;
  RunSpec spec;
  std::function<void(RunResult)> on_done;
  std::string stem;  // absolute, without suffix
  int64_t job_id = 0;
  std::string state = "SUBMITTING";
  std::string node;
  mutable std::string gpus;  // read from the .start file when first asked
  bool submitting = false;
  bool cancel_requested = false;
  bool collecting = false;  // its files are being read on the collector thread
  bool done = false;
  uint64_t streamed[2] = {0, 0};  // bytes of .out and .err passed to on_output so far
  int missing = 0;
  double submitted_at = 0;
};

SlurmTools::SlurmTools(asio::any_io_executor ex, const SlurmSettings& settings)
    : settings_(settings), runner_(std::move(ex)) {}

std::string SlurmTools::Bin(const std::string& name) const {
  if (!settings_.bin_dir.empty()) return settings_.bin_dir + "/" + name;
  std::string found = FindInPath(name);
  return found.empty() ? name : found;
}

Status SlurmTools::Check() {
  for (const char* tool : {"sbatch", "squeue", "scancel", "sinfo"}) {
    const std::string path = Bin(tool);
    if (path.find('/') == std::string::npos || access(path.c_str(), X_OK) != 0) {
      return MakeError(std::string("executor slurm: ") + tool + " is not found (" +
                       (settings_.bin_dir.empty() ? "in PATH" : "in " + settings_.bin_dir) +
                       "); install Slurm's client commands or set executor.bin_dir");
    }
  }
  if (settings_.work_dir.empty() || settings_.work_dir[0] != '/') {
    return MakeError(
        "executor slurm: work_dir must be an absolute path on a filesystem the nodes share");
  }
  struct stat st {};
  if (stat(settings_.work_dir.c_str(), &st) != 0 && errno == ENOENT) {
    // Made here (its parent must exist): the scripts and outputs go below it.
    if (mkdir(settings_.work_dir.c_str(), 0755) != 0) {
      return MakeError("executor slurm: work_dir " + settings_.work_dir +
                       " cannot be created: " + std::strerror(errno));
    }
    chmod(settings_.work_dir.c_str(), 0755);
  }
  if (stat(settings_.work_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return MakeError("executor slurm: work_dir " + settings_.work_dir + " is not a directory");
  }
  if (access(settings_.work_dir.c_str(), W_OK | X_OK) != 0) {
    return MakeError("executor slurm: work_dir " + settings_.work_dir +
                     " cannot be written: " + std::strerror(errno));
  }
  RefreshCluster();
  return Status::Ok();
}

void SlurmTools::Run(const std::string& name, std::vector<std::string> args,
                     std::function<void(RunResult)> done) {
  RunSpec spec;
  spec.argv.push_back(Bin(name));
  for (auto& a : args) spec.argv.push_back(std::move(a));
  spec.timeout = std::chrono::seconds(60);
  spec.grace = std::chrono::seconds(2);
  spec.capture_head = 4u << 20;
  spec.capture_tail = 4096;
  runner_.Start(std::move(spec), std::move(done));
}

void SlurmTools::RunAs(std::vector<std::string> argv, std::optional<uid_t> uid,
                       std::optional<gid_t> gid, std::function<void(RunResult)> done) {
  RunSpec spec;
  spec.argv = std::move(argv);
  spec.cwd = "/";  // (ckprofd's own may be closed to the user)
  if (uid && geteuid() == 0 && *uid != 0) {
    spec.uid = uid;
    spec.gid = gid;
    spec.groups = std::vector<gid_t>{};
  }
  spec.timeout = std::chrono::seconds(600);
  spec.grace = std::chrono::seconds(2);
  spec.capture_head = 4096;
  spec.capture_tail = 4096;
  runner_.Start(std::move(spec), std::move(done));
}

std::vector<ClusterNode> SlurmTools::Cluster() {
  if (UnixNow() - cluster_at_ > kClusterMaxAge_s) RefreshCluster();
  return cluster_;
}

void SlurmTools::RefreshCluster() {
  if (cluster_asked_) return;
  cluster_asked_ = true;
  std::vector<std::string> args = {"-h", "-N", "-O",
                                   "NodeList:|,StateLong:|,Gres:|,GresUsed:|,Partition:|"};
  if (!settings_.partition.empty()) args.push_back("--partition=" + settings_.partition);
  Run("sinfo", std::move(args), [this](RunResult r) {
    cluster_asked_ = false;
    cluster_at_ = UnixNow();
    if (r.outcome.kind == Kind::kSucceeded || r.outcome.kind == Kind::kUnsupported) {
      cluster_ = ParseSinfoNodes(r.stdout_capture);
    } else {
      spdlog::warn("Slurm: sinfo failed: {}", LastLine(r.stderr_capture));
    }
  });
}

SlurmLauncher::SlurmLauncher(asio::any_io_executor ex, SlurmSettings settings, std::string tag,
                             std::vector<std::string> pin_env)
    : ex_(ex),
      settings_(std::move(settings)),
      tag_(std::move(tag)),
      pin_env_(std::move(pin_env)),
      tools_(std::make_unique<SlurmTools>(ex, settings_)),
      poll_timer_(ex),
      alive_(std::make_shared<bool>(true)) {}

SlurmLauncher::~SlurmLauncher() {
  *alive_ = false;
  collector_.stop();  // a run being read is finished and dropped: nothing reaches the io thread
  collector_.join();
  poll_timer_.cancel();
  tools_.reset();  // kills a Slurm command still running; its callback is not called
}

Status SlurmLauncher::Check() { return tools_->Check(); }

Launcher::RunId SlurmLauncher::Start(RunSpec spec, std::function<void(RunResult)> on_done) {
  auto run = std::make_shared<Run>();
  run->id = next_id_++;
  run->stem = settings_.work_dir + "/" + spec.stem;
  run->spec = std::move(spec);
  run->on_done = std::move(on_done);
  runs_[run->id] = run;
  to_submit_.push_back(run);
  asio::post(ex_, [this, alive = alive_] {
    if (*alive) PumpSubmits();
  });
  return run->id;
}

void SlurmLauncher::PumpSubmits() {
  while (submitting_ < kSubmitsAtOnce && !to_submit_.empty()) {
    RunPtr run = to_submit_.front();
    to_submit_.pop_front();
    if (run->done) continue;
    Submit(run);
  }
}

void SlurmLauncher::Submit(const RunPtr& run) {
  const RunSpec& spec = run->spec;
  RunResult failed;
  failed.outcome = Outcome{Kind::kSpawnFailed, 0, 0, ""};
  failed.started_at = failed.ended_at = SystemClock::now();
  if (run->cancel_requested) {
    failed.outcome = Outcome{Kind::kCancelled, 0, 0, "cancelled before it reached Slurm"};
    Finish(run, std::move(failed));
    return;
  }
  const std::string rel_dir = spec.stem.substr(0, spec.stem.rfind('/'));
  if (Status s = MakeRunDir(settings_.work_dir, rel_dir, 0700, spec.uid, spec.gid); !s) {
    failed.outcome.reason = "cannot prepare its Slurm job: " + s.error();
    Finish(run, std::move(failed));
    return;
  }
  const std::string script = run->stem + ".sh";
  if (Status s = WriteFreshFile(script, SlurmBatchScript(spec, run->stem, pin_env_), 0644,
                                std::nullopt, std::nullopt);
      !s) {
    failed.outcome.reason = "cannot prepare its Slurm job: " + s.error();
    Finish(run, std::move(failed));
    return;
  }
  std::vector<std::string> args = {"--parsable",
                                   "--no-requeue",
                                   "--job-name=" + spec.name,
                                   "--comment=" + spec.comment,
                                   "--output=" + run->stem + ".slurm",
                                   "--export=NONE"};
  if (!settings_.gres.empty()) args.push_back("--gres=" + settings_.gres);
  if (!settings_.partition.empty()) args.push_back("--partition=" + settings_.partition);
  const int64_t minutes = SlurmTimeLimitMinutes(std::chrono::duration<double>(spec.timeout).count(),
                                                std::chrono::duration<double>(spec.grace).count());
  if (minutes > 0) args.push_back("--time=" + std::to_string(minutes));
  if (!spec.cwd.empty()) args.push_back("--chdir=" + spec.cwd);
  // A root daemon submits for the task's owner: Slurm's accounting, limits and fair share see
  // the real user.
  if (spec.uid && geteuid() == 0) {
    args.push_back("--uid=" + std::to_string(*spec.uid));
    if (spec.gid) args.push_back("--gid=" + std::to_string(*spec.gid));
  }
  for (const auto& a : settings_.sbatch_args) args.push_back(a);
  args.push_back(script);
  run->submitting = true;
  run->submitted_at = UnixNow();
  ++submitting_;
  tools_->Run("sbatch", std::move(args), [this, run](RunResult r) {
    --submitting_;
    run->submitting = false;
    OnSubmitted(run, std::move(r));
    PumpSubmits();
  });
}

void SlurmLauncher::OnSubmitted(const RunPtr& run, RunResult tool) {
  if (run->done) return;
  std::optional<int64_t> id;
  if (tool.outcome.kind == Kind::kSucceeded || tool.outcome.kind == Kind::kUnsupported) {
    ForEachLine(tool.stdout_capture, [&](std::string_view line) {
      if (!id) id = ParseSlurmJobId(line);
    });
  }
  if (!id && (tool.outcome.kind == Kind::kTimedOut || tool.outcome.kind == Kind::kCrashed)) {
    // sbatch hung or died: slurmctld may have the job all the same. Look for it by its comment
    // before anything is concluded (not found: it is requeued, never run twice).
    spdlog::warn("Slurm: sbatch {} ({}); looking for the job by its comment",
                 tool.outcome.Summary(), run->spec.comment);
    Find(run);
    return;
  }
  if (!id) {
    RunResult failed;
    failed.outcome = Outcome{Kind::kSpawnFailed, 0, 0, ""};
    std::string why = LastLine(tool.stderr_capture);
    if (why.empty()) why = tool.outcome.Summary();
    failed.outcome.reason = "sbatch refused it: " + why;
    failed.started_at = failed.ended_at = SystemClock::now();
    spdlog::warn("Slurm: {} ({})", failed.outcome.reason, run->spec.comment);
    Finish(run, std::move(failed));
    return;
  }
  run->job_id = *id;
  run->state = "PENDING";
  if (run->spec.on_started) run->spec.on_started(static_cast<pid_t>(*id));
  spdlog::debug("Slurm job {}: {}", *id, run->spec.comment);
  if (run->cancel_requested) SendCancel(run);
  ArmPoll();
}

Launcher::RunId SlurmLauncher::Adopt(RunSpec spec, int64_t handle,
                                     std::function<void(RunResult)> on_done) {
  auto run = std::make_shared<Run>();
  run->id = next_id_++;
  run->stem = settings_.work_dir + "/" + spec.stem;
  run->spec = std::move(spec);
  run->on_done = std::move(on_done);
  run->job_id = handle;
  run->state = handle > 0 ? "PENDING" : "SUBMITTING";
  runs_[run->id] = run;
  asio::post(ex_, [this, run, alive = alive_] {
    if (!*alive || run->done) return;
    if (run->job_id > 0) {
      spdlog::info("Slurm job {} followed again: {}", run->job_id, run->spec.comment);
      ArmPoll();
    } else {
      Find(run);
    }
  });
  return run->id;
}

void SlurmLauncher::Find(const RunPtr& run) {
  // The previous daemon may have stopped between sbatch and storing the job id: the job's
  // comment names the task and the attempt.
  tools_->Run("squeue", {"-h", "-t", "all", "-o", "%i|%k"}, [this, run](RunResult r) {
    if (run->done) return;
    std::optional<int64_t> found;
    if (r.outcome.kind == Kind::kSucceeded || r.outcome.kind == Kind::kUnsupported) {
      ForEachLine(r.stdout_capture, [&](std::string_view line) {
        size_t bar = line.find('|');
        if (bar == std::string_view::npos || found) return;
        if (line.substr(bar + 1) == run->spec.comment) found = ParseSlurmJobId(line.substr(0, bar));
      });
    } else {
      spdlog::warn("Slurm: squeue failed ({}); looking for {} again later",
                   LastLine(r.stderr_capture), run->spec.comment);
      asio::post(ex_, [this, run, alive = alive_] {
        if (*alive && !run->done) Find(run);
      });
      return;
    }
    if (found) {
      run->job_id = *found;
      run->state = "PENDING";
      spdlog::info("Slurm job {} found again by its comment: {}", *found, run->spec.comment);
      if (run->spec.on_started) run->spec.on_started(static_cast<pid_t>(*found));
      if (run->cancel_requested) SendCancel(run);
      ArmPoll();
      return;
    }
    if (access((run->stem + ".end").c_str(), F_OK) == 0) {
      Collect(run, std::nullopt, "");
      return;
    }
    RunResult lost;
    lost.outcome =
        Outcome{Kind::kInterrupted, 0, 0, "not found in Slurm (its submission never reached it)"};
    lost.started_at = lost.ended_at = SystemClock::now();
    Finish(run, std::move(lost));
  });
}

bool SlurmLauncher::Cancel(RunId id) {
  auto it = runs_.find(id);
  if (it == runs_.end() || it->second->cancel_requested || it->second->done) return false;
  RunPtr run = it->second;
  run->cancel_requested = true;
  if (run->job_id > 0) {
    SendCancel(run);
  } else if (!run->submitting) {
    // Still waiting for its sbatch: it never reaches Slurm.
    asio::post(ex_, [this, run, alive = alive_] {
      if (!*alive || run->done || run->submitting || run->job_id > 0) return;
      RunResult r;
      r.outcome = Outcome{Kind::kCancelled, 0, 0, "cancelled before it reached Slurm"};
      r.started_at = r.ended_at = SystemClock::now();
      Finish(run, std::move(r));
    });
  }
  return true;
}

void SlurmLauncher::SendCancel(const RunPtr& run) {
  const int64_t job = run->job_id;
  tools_->Run("scancel", {std::to_string(job)}, [job](RunResult r) {
    if (r.outcome.kind != Kind::kSucceeded && r.outcome.kind != Kind::kUnsupported) {
      spdlog::warn("Slurm: scancel {} failed: {}", job, LastLine(r.stderr_capture));
    }
  });
  ArmPoll();
}

bool SlurmLauncher::Interrupt(RunId) { return false; }

std::optional<RunOutput> SlurmLauncher::Output(RunId id) const {
  auto it = runs_.find(id);
  if (it == runs_.end()) return std::nullopt;
  const Run& run = *it->second;
  RunOutput out;
  out.stdout_text = SmallFile(run.stem + ".out", run.spec.uid);
  out.stderr_text = SmallFile(run.stem + ".err", run.spec.uid);
  return out;
}

std::optional<Placement> SlurmLauncher::Where(RunId id) const {
  auto it = runs_.find(id);
  if (it == runs_.end()) return std::nullopt;
  const Run& run = *it->second;
  if (run.gpus.empty() && run.state == "RUNNING") {
    SlurmRunFiles f;
    ParseSlurmStartLine(SmallFile(run.stem + ".start", run.spec.uid), &f);
    run.gpus = f.gpus;
  }
  return Placement{std::string(Name()), run.job_id, run.state, run.node, run.gpus};
}

std::string SlurmLauncher::DrainAdvice() const {
  return "the GPUs are Slurm's (executor slurm): drain a node in Slurm (scontrol update "
         "nodename=NODE state=drain reason=...), or lower max_in_flight";
}

std::vector<ClusterNode> SlurmLauncher::Cluster() { return tools_->Cluster(); }

void SlurmLauncher::ArmPoll() {
  if (poll_armed_ || polling_) return;
  poll_armed_ = true;
  poll_timer_.expires_after(
      std::chrono::milliseconds(static_cast<int64_t>(std::max(settings_.poll_ms, 10.0))));
  poll_timer_.async_wait([this, alive = alive_](const asio::error_code& ec) {
    if (ec || !*alive) return;
    poll_armed_ = false;
    Poll();
  });
}

void SlurmLauncher::Poll() {
  for (const auto& [id, run] : std::map<RunId, RunPtr>(runs_)) {
    if (run->state == "RUNNING" || run->state == "SEEN") StreamOutput(run);
  }
  std::string ids;
  for (const auto& [id, run] : runs_) {
    if (run->job_id > 0 && !run->done)
      ids += (ids.empty() ? "" : ",") + std::to_string(run->job_id);
  }
  if (ids.empty()) return;
  polling_ = true;
  tools_->Run(
      "squeue", {"-h", "-t", "all", "-o", "%i|%T|%N|%r", "-j", ids}, [this, ids](RunResult r) {
        // Exit 1 with "Invalid job id specified" when none of them is known any more.
        OnRows(ParseSqueueRows(r.stdout_capture), false);
        std::string missing;
        for (const auto& [id, run] : runs_) {
          if (run->job_id > 0 && !run->done && run->state != "SEEN")
            missing += (missing.empty() ? "" : ",") + std::to_string(run->job_id);
        }
        for (auto& [id, run] : runs_)
          if (run->state == "SEEN") run->state = "RUNNING";
        if (missing.empty() || access(tools_->Bin("sacct").c_str(), X_OK) != 0) {
          OnRows({}, true);
          return;
        }
        tools_->Run("sacct",
                    {"-X", "-n", "-P", "-o", "JobID,State,ExitCode,NodeList", "-j", missing},
                    [this](RunResult a) { OnRows(ParseSacctRows(a.stdout_capture), true); });
      });
}

void SlurmLauncher::OnRows(std::vector<SlurmJobRow> rows, bool from_sacct) {
  std::map<int64_t, RunPtr> by_job;
  for (const auto& [id, run] : runs_) {
    if (run->job_id > 0 && !run->done) by_job[run->job_id] = run;
  }
  std::set<int64_t> seen;
  for (const auto& row : rows) {
    auto it = by_job.find(row.id);
    if (it == by_job.end()) continue;
    seen.insert(row.id);
    RunPtr run = it->second;
    run->missing = 0;
    if (!row.node.empty()) run->node = row.node;
    if (SlurmStateFinal(row.state)) {
      run->state = row.state;
      Collect(run, SlurmEndOutcome(row), row.state);
    } else {
      // squeue's pass marks what it saw so that its sacct pass asks only for the rest.
      run->state = from_sacct ? row.state : (row.state == "RUNNING" ? "SEEN" : row.state);
    }
  }
  if (!from_sacct) return;
  for (auto& [job, run] : by_job) {
    if (seen.count(job) || run->done || run->state == "RUNNING" || run->state == "PENDING" ||
        run->state == "COMPLETING" || run->state == "CONFIGURING") {
      continue;
    }
    // Neither squeue nor sacct knows it (past MinJobAge, no accounting): its end file decides.
    if (access((run->stem + ".end").c_str(), F_OK) == 0) {
      Collect(run, std::nullopt, "");
    } else if (++run->missing >= kMissingPolls) {
      SlurmJobRow gone{job, "LOST", run->node, "", ""};
      Collect(
          run,
          Outcome{Kind::kInterrupted, 0, 0,
                  "Slurm no longer knows job " + std::to_string(job) + " and it left no end file"},
          "LOST");
    }
  }
  polling_ = false;
  ArmPoll();
}

namespace {

// What the collector thread needs of a run: copies, so that the io thread may go on changing
// the run meanwhile.
struct CollectInput {
  RunSpec spec;  // (its callbacks are not called there)
  std::string stem, node;
  int64_t job_id = 0;
  double submitted_at = 0;
  bool cancel_requested = false;
  uint64_t streamed[2] = {0, 0};
};

// A run's output files read and parsed (on the collector thread): its result, and what of its
// output was not yet passed live (`tail`: stdout, stderr), at most kLiveTail bytes each.
constexpr uint64_t kLiveTail = 1 << 20;
RunResult CollectFiles(const CollectInput& in, std::optional<Outcome> slurm_outcome,
                       const std::string& state, std::string tail[2]) {
  const RunSpec& spec = in.spec;
  SlurmRunFiles files;
  ParseSlurmStartLine(SmallFile(in.stem + ".start", spec.uid), &files);
  ParseSlurmEndLine(SmallFile(in.stem + ".end", spec.uid), &files);
  RunResult r;
  CkOutputParser parser(spec.top_k);
  Capture out(spec.capture_head, spec.capture_tail), err(spec.capture_head, spec.capture_tail);
  for (int stream = 0; stream < 2; ++stream) {
    uint64_t at = 0;
    ReadRunFile(in.stem + (stream ? ".err" : ".out"), spec.uid, [&](std::string_view d) {
      if (stream) {
        parser.FeedStderr(d);
        err.Add(d);
      } else {
        parser.Feed(d);
        out.Add(d);
      }
      // What live output has not passed on yet (its last bytes, written after the last poll).
      const uint64_t from = std::max(at, in.streamed[stream]);
      if (from < at + d.size() && tail[stream].size() < kLiveTail) {
        tail[stream].append(d.substr(from - at, kLiveTail - tail[stream].size()));
      }
      at += d.size();
    });
  }
  // What Slurm wrote (slurmstepd's "CANCELLED ... DUE TO TIME LIMIT") goes with stderr.
  std::string slurm_text = SmallFile(in.stem + ".slurm", spec.uid);
  if (!Trim(slurm_text).empty()) err.Add(slurm_text);
  parser.Finish();
  r.perf = parser.perf();
  r.stdout_capture = out.Text();
  r.stderr_capture = err.Text();
  r.stdout_bytes = out.total();
  r.stderr_bytes = err.total();
  const double timeout_s = std::chrono::duration<double>(spec.timeout).count();
  if (slurm_outcome) {
    r.outcome = *slurm_outcome;
    if (r.outcome.kind == Kind::kCancelled && in.cancel_requested) r.outcome.reason = "cancelled";
  } else if (files.rc) {
    r.outcome =
        OutcomeFromScriptStatus(*files.rc, timeout_s > 0, timeout_s, r.perf, r.stderr_capture);
  } else {
    r.outcome = Outcome{Kind::kFailed, -1, 0,
                        "Slurm job " + std::to_string(in.job_id) +
                            " ended without the profiler's exit status (its batch script did "
                            "not finish; see its .slurm file in the work dir)"};
  }
  const double now = UnixNow();
  const double start = files.start > 0 ? files.start : in.submitted_at > 0 ? in.submitted_at : now;
  const double end = files.end > 0 ? files.end : now;
  r.started_at = FromUnix(start);
  r.ended_at = FromUnix(end);
  r.elapsed_s = files.start > 0 && end >= start ? end - start : 0;
  r.pid = -1;
  r.placement = Placement{"slurm", in.job_id, state.empty() ? "COMPLETED" : state,
                          files.node.empty() ? in.node : files.node, files.gpus};
  return r;
}

}  // namespace

void SlurmLauncher::Collect(const RunPtr& run, std::optional<Outcome> slurm_outcome,
                            const std::string& state) {
  if (run->done || run->collecting) return;
  run->collecting = true;
  auto in = std::make_shared<CollectInput>();
  in->spec = run->spec;
  in->spec.on_started = nullptr;
  in->spec.on_output = nullptr;
  in->stem = run->stem;
  in->node = run->node;
  in->job_id = run->job_id;
  in->submitted_at = run->submitted_at;
  in->cancel_requested = run->cancel_requested;
  in->streamed[0] = run->streamed[0];
  in->streamed[1] = run->streamed[1];
  // A profiler may have written gigabytes: they are read and parsed on the collector thread,
  // never on the io thread, and the run ends back on the io thread.
  asio::post(collector_, [this, run, in, slurm_outcome, state, ex = ex_, alive = alive_] {
    auto tail = std::make_shared<std::array<std::string, 2>>();
    auto r = std::make_shared<RunResult>(CollectFiles(*in, slurm_outcome, state, tail->data()));
    asio::post(ex, [this, run, r, tail, alive] {
      if (!*alive || run->done) return;
      for (int stream = 0; stream < 2; ++stream) {
        if (!(*tail)[stream].empty() && run->spec.on_output) {
          run->spec.on_output(stream == 1, (*tail)[stream]);
        }
      }
      Finish(run, std::move(*r));
    });
  });
}

void SlurmLauncher::StreamOutput(const RunPtr& run) {
  if (!run->spec.on_output || run->collecting || run->done) return;
  // What the profiler wrote since the last poll, at most 1 MiB a stream a poll: `log -f` of a
  // task in Slurm follows it live.
  constexpr size_t kChunk = 64 << 10, kPerPoll = 1 << 20;
  std::string buf(kChunk, '\0');
  for (int stream = 0; stream < 2; ++stream) {
    int fd = OpenRunFile(run->stem + (stream ? ".err" : ".out"), run->spec.uid);
    if (fd < 0) continue;
    for (size_t taken = 0; taken < kPerPoll;) {
      ssize_t n = pread(fd, buf.data(), buf.size(), static_cast<off_t>(run->streamed[stream]));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      run->streamed[stream] += static_cast<uint64_t>(n);
      taken += static_cast<size_t>(n);
      run->spec.on_output(stream == 1, std::string_view(buf.data(), static_cast<size_t>(n)));
      if (run->done) break;  // (a callback may end it)
    }
    close(fd);
  }
}

void SlurmLauncher::ForgetJob(int64_t job_id, const std::string& owner, uint32_t uid,
                              uint32_t gid) {
  if (owner.empty() || owner.find('/') != std::string::npos || owner == "." || owner == "..") {
    return;
  }
  const std::string dir = settings_.work_dir + "/" + owner + "/job-" + std::to_string(job_id);
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  // What is in it is removed as its owner (the directory is hers, and so is what her runs
  // wrote in it): a root daemon never walks a tree its user may change under it. The directory
  // itself is then removed here (its parent is ckprofd's: she cannot replace it).
  tools_->RunAs({"/usr/bin/find", dir, "-mindepth", "1", "-delete"}, uid, gid, [dir](RunResult r) {
    // (Exit 0 is kSucceeded or, without a profiler's output, kUnsupported.)
    const bool exit0 = r.outcome.kind == Kind::kSucceeded || r.outcome.kind == Kind::kUnsupported;
    if (exit0 && rmdir(dir.c_str()) == 0) return;
    const std::string why = exit0 ? std::string(std::strerror(errno))
                                  : LastLine(r.stderr_capture) + " (" + r.outcome.Summary() + ")";
    spdlog::warn("Slurm: the files of a removed job stay in {}: {}", dir, why);
  });
}

void SlurmLauncher::Finish(const RunPtr& run, RunResult r) {
  if (run->done) return;
  run->done = true;
  runs_.erase(run->id);
  auto done = std::move(run->on_done);
  if (done) done(std::move(r));
}

}  // namespace ckprof
