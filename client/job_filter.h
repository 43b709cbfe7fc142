// JobFilter: which jobs `list` shows and `cancel --mine|--user|--state|--name` cancels, as
// squeue/sacct and scancel pick them: by owner, state, name pattern, submit time and count.
// One set of options and messages for both commands. Client only; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/args.h"
#include "common/protocol.h"

namespace ckprof {

struct JobFilter {
  std::optional<uint32_t> uid;  // --mine: the caller's
  std::string user;             // --user: a name or a uid
  std::vector<JobState> states;
  std::string name;  // --name: a shell pattern (fnmatch: * ? [...]) the job's name matches
  double since = 0;  // unix seconds; 0 = any time
  size_t limit = 0;  // the most recent N; 0 = all
  bool Keeps(const JobSummary& j) const;
  bool any() const;
  // Whether it picks jobs that have ended (a finished or cancelled state, --since): then the
  // daemon is asked for every job, not only active ones.
  bool wants_ended() const;
  // The kept jobs of `jobs`, with --limit applied (the most recent: the highest ids).
  std::vector<JobSummary> Apply(std::vector<JobSummary> jobs) const;
};

// The filter's options as a command declares them (`with_since_limit`: list's --since and
// --limit too), read back by ReadJobFilter.
struct JobFilterArgs {
  bool mine = false;
  std::string user, states, name, since, limit;
};
void AddJobFilterOptions(ArgParser& p, JobFilterArgs* a, bool with_since_limit);

// The filter the options give, or nullopt after printing why (as `cmd`) to stderr and setting
// *exit_code (2: a malformed value; 1: --user names nobody on this machine).
std::optional<JobFilter> ReadJobFilter(const JobFilterArgs& a, const std::string& cmd,
                                       int* exit_code);

}  // namespace ckprof
