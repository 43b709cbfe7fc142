// ckprof cancel / retry / boost / drain / resume / ping: act on jobs and GPUs.
#include <algorithm>
#include <iostream>
#include <regex>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"

namespace ckprof {
namespace {

// Cancels each job in turn, saying what became of each (with `json_out`, a JSON array of
// {"job_id", "cancelled", "job" or "error"}). The worst end wins, as for wait: unreachable (2)
// over a refusal (1, e.g. a job that already ended) over success (0).
int CancelJobs(const GlobalOptions& global, const std::vector<int64_t>& ids, bool json_out) {
  int worst = 0;
  nlohmann::json out = nlohmann::json::array();
  for (int64_t id : ids) {
    Request r;
    r.type = RequestType::kCancel;
    r.job_id = id;
    JobReply a;
    std::string error;
    const int code = Ask(global, "cancel", r, &a, &error);
    if (json_out) {
      nlohmann::json j = {{"job_id", id}, {"cancelled", code == 0}};
      if (code == 0 && a.job) j["job"] = ToJson(*a.job);
      if (code != 0) j["error"] = error;
      out.push_back(std::move(j));
    } else if (code == 0) {
      std::cout << "job " << id << " cancelled\n";
    }
    worst = std::max(worst, code);
    if (code == kExitUnreachable) break;  // the rest cannot be cancelled either
  }
  if (json_out) std::cout << out.dump(2) << "\n";
  return worst;
}

}  // namespace

int RunJobActionCommand(const GlobalOptions& global, const Args& args, RequestType type) {
  const std::string cmd(RequestTypeName(type));
  std::string job, priority;
  std::vector<std::string> jobs;  // cancel: several
  std::string summary = type == RequestType::kCancel
                            ? "Cancel jobs: their queued tasks are dropped and their running "
                              "profilers stopped. Only the owner or an admin may. A job that "
                              "has ended is left as it is (exit 1); with several jobs the worst "
                              "end wins."
                        : type == RequestType::kRetry
                            ? "Requeue a job's tasks that failed, crashed, timed out, could not "
                              "start, were interrupted or cancelled."
                            : "Set a job's priority (admins only).";
  ArgParser p("ckprof " + cmd, summary,
              "example:\n  ckprof " + cmd + " 12" +
                  (type == RequestType::kBoost    ? " 100"
                   : type == RequestType::kCancel ? " 13"
                                                  : ""));
  if (type == RequestType::kCancel) {
    p.Positionals("JOB", &jobs, true, "the job ids");
  } else {
    p.Positional("JOB", &job, true, "the job id");
  }
  if (type == RequestType::kBoost) p.Positional("PRIORITY", &priority, true, "-1000..1000");
  bool json_out = false;
  p.Flag("--json", &json_out, "print the outcome as JSON");
  if (auto code = p.Parse(args)) return *code;
  if (type == RequestType::kCancel) {
    std::vector<int64_t> ids;
    for (const auto& text : jobs) {
      auto id = ParseJobId(text, cmd);
      if (!id) return 2;
      ids.push_back(*id);
    }
    return CancelJobs(global, ids, json_out);
  }
  auto id = ParseJobId(job, cmd);
  if (!id) return 2;
  Request r;
  r.type = type;
  r.job_id = *id;
  if (type == RequestType::kBoost) {
    static const std::regex num(R"(-?\d{1,4})");
    if (!std::regex_match(priority, num) || std::abs(std::stoi(priority)) > 1000) {
      PrintError(cmd, "PRIORITY must be an integer from -1000 to 1000, got '" + priority + "'");
      return 2;
    }
    r.priority = std::stoi(priority);
  }
  JobReply a;
  if (int code = Ask(global, cmd, r, &a)) return code;
  if (json_out) {
    nlohmann::json j = ReplyJson(a);
    j["job_id"] = *id;
    if (type == RequestType::kBoost) j["priority"] = r.priority;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (type == RequestType::kRetry) {
    std::cout << "job " << *id << ": " << a.requeued.value_or(0) << " task(s) requeued\n";
  }
  if (type == RequestType::kBoost)
    std::cout << "job " << *id << ": priority " << r.priority << "\n";
  return 0;
}

int RunGpuActionCommand(const GlobalOptions& global, const Args& args, bool drain) {
  const std::string cmd = drain ? "drain" : "resume";
  std::string gpu;
  ArgParser p("ckprof " + cmd,
              drain ? "Drain a GPU (admins): it finishes its current task and takes no more."
                    : "Resume a drained GPU (admins).",
              "example:\n  ckprof " + cmd + " 3");
  p.Positional("GPU", &gpu, true, "the GPU index");
  bool json_out = false;
  p.Flag("--json", &json_out, "print the outcome as JSON");
  if (auto code = p.Parse(args)) return *code;
  static const std::regex num(R"(\d{1,4})");
  if (!std::regex_match(gpu, num)) {
    PrintError(cmd, "GPU must be a GPU index such as 0 (see 'ckprof gpus'), got '" + gpu + "'");
    return 2;
  }
  Request r;
  r.type = drain ? RequestType::kDrain : RequestType::kResume;
  r.gpu = std::stoi(gpu);
  EmptyReply a;
  if (int code = Ask(global, cmd, r, &a)) return code;
  if (json_out) {
    std::cout << nlohmann::json{{"gpu", r.gpu}, {"drained", drain}}.dump(2) << "\n";
    return 0;
  }
  std::cout << "GPU " << r.gpu << (drain ? " drained" : " resumed") << "\n";
  return 0;
}

int RunPingCommand(const GlobalOptions& global, const Args& args) {
  ArgParser p("ckprof ping", "Check that ckprofd answers, and who it thinks you are.",
              "example:\n  ckprof --socket /tmp/ckprofd.sock ping");
  bool json_out = false;
  p.Flag("--json", &json_out, "print the daemon's hello (version, protocol, who you are) as JSON");
  if (auto code = p.Parse(args)) return *code;
  Request r;
  r.type = RequestType::kPing;
  HelloReply a;
  if (int code = Ask(global, "ping", r, &a)) return code;
  if (json_out) {
    nlohmann::json j = ReplyJson(a);
    j["socket"] = ResolveSocketPath(global.socket);
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << (a.server.empty() ? "ckprofd" : a.server) << " at "
            << ResolveSocketPath(global.socket) << ": you are " << a.user << " (uid " << a.uid
            << ")" << (a.admin ? ", admin" : "") << "\n";
  return 0;
}

}  // namespace ckprof
