// The job options that submit, edit and run share: declared, checked and applied once.
#include "client/job_options.h"

#include <cstdlib>
#include <regex>

#include "client/client_util.h"
#include "common/time_text.h"

namespace ckprof {
namespace {

// The protocol's bounds on a job's max_gpus and timeout_s.
constexpr int kMaxMaxGpus = 1024;
constexpr double kMaxTimeoutS = 1e7;

// The help of --timeout for submit and run: what leaving it out means, and who may give 0.
std::string TimeoutDefaultHelp(const std::string& zero_for) {
  return " (default: the daemon's timeout, 1800 s unless set; at most its max_timeout; 0 = "
         "none, " +
         zero_for + ")";
}

Result<int> ReadMaxGpus(const std::string& text, bool zero_is_no_limit) {
  static const std::regex integer(R"(-?\d{1,9})");
  const int least = zero_is_no_limit ? 0 : 1;
  if (std::regex_match(text, integer) && std::stoi(text) >= least &&
      std::stoi(text) <= kMaxMaxGpus) {
    return std::stoi(text);
  }
  // 0 means "no limit" on the wire, but where it is not taken it reads as "no GPU": the
  // message says to leave the option out instead.
  return MakeError("--max-gpus must be an integer from " +
                   std::string(zero_is_no_limit ? "0 (no limit)" : "1") + " to " +
                   std::to_string(kMaxMaxGpus) + ", got '" + text + "'" +
                   (zero_is_no_limit ? "" : " (leave it out for no limit)"));
}

}  // namespace

Result<double> ReadTimeout(const std::string& text, bool takes_default) {
  if (takes_default && text == "default") return -1.0;
  char* end = nullptr;
  const double t = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == '\0' && t >= 0 && t <= kMaxTimeoutS) return t;
  return MakeError("--timeout must be a number of seconds from 0 to " +
                   std::to_string(static_cast<int64_t>(kMaxTimeoutS)) +
                   (takes_default ? " or 'default'" : "") + ", got '" + text + "'");
}

const JobOptionRules& SubmitJobOptionRules() {
  static const JobOptionRules rules = {
      .priority = true,
      .max_gpus = true,
      .not_before = true,
      .priority_help = " (default 0)",
      .gpus_help = " (default: any)",
      .max_gpus_help = ", M >= 1 (default: no limit)",
      .not_before_help = " (default: now)",
      .timeout_help = TimeoutDefaultHelp("admins only"),
  };
  return rules;
}

const JobOptionRules& EditJobOptionRules() {
  static const JobOptionRules rules = {
      .priority = true,
      .max_gpus = true,
      .not_before = true,
      .gpus_any = true,
      .max_gpus_zero = true,
      .timeout_default = true,
      .refuse_empty = true,
      .priority_help = "",
      .gpus_help = "; 'any' for all",
      .max_gpus_help = "; 0 for no limit",
      .not_before_help = ", or now",
      .timeout_help =
          " from now on ('default': the daemon's; at most its max_timeout; 0 = none, "
          "admins only)",
  };
  return rules;
}

const JobOptionRules& RunJobOptionRules() {
  static const JobOptionRules rules = {
      .priority_help = "",
      .gpus_help = " (default: all)",
      .max_gpus_help = "",
      .not_before_help = "",
      .timeout_help = TimeoutDefaultHelp("admins and --local only"),
  };
  return rules;
}

void JobSettings::ApplyTo(SubmitOptions* s) const {
  if (priority) s->priority = *priority;
  if (gpus) s->gpus = *gpus;
  if (max_gpus) s->max_gpus = *max_gpus;
  if (not_before) s->not_before = *not_before;
  if (timeout_s) s->timeout_s = *timeout_s;
}

void JobSettings::ApplyTo(EditOptions* e) const {
  if (priority) e->priority = priority;
  if (gpus) e->gpus = gpus;
  if (max_gpus) e->max_gpus = max_gpus;
  if (not_before) e->not_before = not_before;
  if (timeout_s) e->timeout_s = timeout_s;
}

JobOptions::JobOptions(const JobOptionRules& rules, ArgParser* parser)
    : rules_(rules), parser_(*parser) {
  if (rules.priority) {
    parser->Option(
        "--priority", &priority_, "P",
        "order among your own jobs, " + PriorityRange() + ", higher first" + rules.priority_help);
  }
  parser->Option("--gpus", &gpus_, "LIST",
                 "GPUs the job may use, e.g. 0,1 or 0-3" + rules.gpus_help);
  if (rules.max_gpus) {
    parser->Option("--max-gpus", &max_gpus_, "M", "at most M GPUs at once" + rules.max_gpus_help);
  }
  if (rules.not_before) {
    parser->Option("--not-before", &not_before_, "TIME",
                   "start no earlier than TIME: +30m, +1h30m, 09:00 (the next one), tomorrow "
                   "09:00, 2026-12-01T02:00" +
                       rules.not_before_help);
  }
  parser->Option("--timeout", &timeout_, "S",
                 "seconds one profiler run may take" + rules.timeout_help);
}

bool JobOptions::Has(const std::string& name, const std::string& text) const {
  return parser_.Given(name) && (rules_.refuse_empty || !text.empty());
}

Result<JobSettings> JobOptions::Read() const {
  JobSettings s;
  if (Has("--priority", priority_)) {
    auto priority = ReadPriority(priority_, "--priority");
    if (!priority) return Error{priority.error()};
    s.priority = *priority;
  }
  if (Has("--gpus", gpus_)) {
    if (rules_.gpus_any && (gpus_ == "any" || gpus_ == "all")) {
      s.gpus = std::vector<int>{};
    } else {
      auto list = ReadGpuList(gpus_);
      if (!list) return Error{list.error()};
      s.gpus = std::move(*list);
    }
  }
  if (Has("--max-gpus", max_gpus_)) {
    auto max = ReadMaxGpus(max_gpus_, rules_.max_gpus_zero);
    if (!max) return Error{max.error()};
    s.max_gpus = *max;
  }
  if (Has("--not-before", not_before_)) {
    s.not_before = ParseTime(not_before_);
    if (!s.not_before) {
      return MakeError(std::string("--not-before must be ") + kWhenExamples + " or now, got '" +
                       not_before_ + "'");
    }
  }
  if (Has("--timeout", timeout_)) {
    auto timeout = ReadTimeout(timeout_, rules_.timeout_default);
    if (!timeout) return Error{timeout.error()};
    s.timeout_s = *timeout;
  }
  return s;
}

}  // namespace ckprof
