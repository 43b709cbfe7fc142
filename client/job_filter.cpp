#include "client/job_filter.h"

#include <fnmatch.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "client/client_util.h"
#include "common/states.h"

namespace ckprof {

bool JobFilter::Keeps(const JobSummary& j) const {
  if (uid && j.owner_uid != *uid) return false;
  if (!user.empty() && j.owner != user && std::to_string(j.owner_uid) != user) return false;
  if (!states.empty() && std::find(states.begin(), states.end(), j.state) == states.end())
    return false;
  if (!name.empty() && fnmatch(name.c_str(), j.name.c_str(), 0) != 0) return false;
  return j.submitted_at >= since;
}

bool JobFilter::any() const {
  return uid || !user.empty() || !states.empty() || !name.empty() || since > 0 || limit > 0;
}

bool JobFilter::wants_ended() const {
  return since > 0 || std::any_of(states.begin(), states.end(), [](JobState s) {
           return s == JobState::kFinished || s == JobState::kCancelled;
         });
}

std::vector<JobSummary> JobFilter::Apply(std::vector<JobSummary> jobs) const {
  std::vector<JobSummary> kept;
  for (auto& j : jobs) {
    if (Keeps(j)) kept.push_back(std::move(j));
  }
  if (limit > 0 && kept.size() > limit) {  // the most recent: highest ids
    std::sort(kept.begin(), kept.end(),
              [](const JobSummary& x, const JobSummary& y) { return x.id < y.id; });
    kept.erase(kept.begin(), kept.end() - static_cast<std::ptrdiff_t>(limit));
  }
  return kept;
}

void AddJobFilterOptions(ArgParser& p, JobFilterArgs* a, bool with_since_limit) {
  p.Flag("--mine", &a->mine, "only your jobs");
  p.Option("--user", &a->user, "U", "only the jobs of user U (a name or uid)");
  p.Option("--state", &a->states, "S",
           "only jobs in these states: queued, waiting, held, running, cancelling, finished, "
           "cancelled (comma-separated)" +
               std::string(with_since_limit ? "; finished or cancelled ones imply --all"
                                            : "; jobs that have ended are left out"));
  p.Option("--name", &a->name, "PATTERN",
           "only jobs whose name matches PATTERN, a shell pattern ('resnet-*'; quote it)");
  if (with_since_limit) {
    p.Option("--since", &a->since, "T",
             "only jobs submitted since T: an age (7d, 12h, 30m) or a time (2026-12-01, "
             "2026-12-01T09:00); implies --all");
    p.Option("--limit", &a->limit, "N", "only the N most recent of those jobs");
  }
}

std::optional<JobFilter> ReadJobFilter(const JobFilterArgs& a, const std::string& cmd,
                                       int* exit_code) {
  *exit_code = 2;
  if (!a.user.empty() && a.user.find_first_not_of("0123456789") != std::string::npos &&
      getpwnam(a.user.c_str()) == nullptr) {
    PrintError(cmd, "--user " + a.user + ": no such user on this machine (a name or a uid)");
    *exit_code = 1;
    return std::nullopt;
  }
  JobFilter f;
  if (a.mine) f.uid = static_cast<uint32_t>(geteuid());
  f.user = a.user;
  f.name = a.name;
  for (size_t at = 0; !a.states.empty() && at <= a.states.size();) {
    const size_t comma = std::min(a.states.find(',', at), a.states.size());
    const std::string name = Lowercase(a.states.substr(at, comma - at));
    JobState st;
    if (!ParseEnum(name, &st)) {
      PrintError(cmd,
                 "--state must be queued, waiting, held, running, cancelling, finished or "
                 "cancelled (comma-separated), got '" +
                     name + "'");
      return std::nullopt;
    }
    f.states.push_back(st);
    at = comma + 1;
  }
  if (!a.since.empty()) {
    auto ago = ParseDurationArg(a.since);
    auto at = ago ? std::optional<double>(static_cast<double>(std::time(nullptr)) - *ago)
                  : ParseTime(a.since);
    if (!at) at = ParseTime(a.since + "T00:00");  // a date alone: its midnight
    if (!at) {
      PrintError(cmd,
                 "--since must be an age such as 7d or 12h, or a time such as 2026-12-01 "
                 "or 2026-12-01T09:00, got '" +
                     a.since + "'");
      return std::nullopt;
    }
    f.since = *at;
  }
  if (!a.limit.empty()) {
    if (a.limit.find_first_not_of("0123456789") != std::string::npos || a.limit.size() > 9 ||
        std::stoul(a.limit) == 0) {
      PrintError(cmd, "--limit must be a number of jobs >= 1, got '" + a.limit + "'");
      return std::nullopt;
    }
    f.limit = std::stoul(a.limit);
  }
  *exit_code = 0;
  return f;
}

}  // namespace ckprof
