// The states of tasks and jobs, the order of a job's tasks, and a job's tasks counted by state:
// enums with one name table each (a task's final states are the outcomes' table, outcome.cpp).
// The names are the ones on the wire, in the Store, in results files and in every view; a
// state is never spelled out as a string literal anywhere else (a typo must not compile).
//
// Plain functions; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "common/outcome.h"

namespace ckprof {

// A task is queued, running, or final with the outcome of its last run (one final state per
// Outcome::Kind, named by it: OutcomeTraits::state).
enum class TaskState : uint8_t {
  kQueued,
  kRunning,
  kSucceeded,
  kUnsupported,
  kFailed,
  kCrashed,
  kTimedOut,
  kCancelled,
  kInterrupted,
  kSpawnFailed,
};
// "queued", "running", then the outcome kinds' names ("succeeded", "timed_out", ...).
std::string_view EnumName(TaskState s);
// False (and *out unchanged) for a name that is none of them.
bool ParseEnum(std::string_view name, TaskState* out);
std::optional<TaskState> ParseTaskState(std::string_view name);
bool IsFinal(TaskState s);
inline constexpr int kTaskStates = 2 + kOutcomeKinds;
// The final state a run's outcome leaves a task in, and back (nullopt for queued, running).
TaskState StateOf(Outcome::Kind kind);
std::optional<Outcome::Kind> OutcomeOf(TaskState s);
// "timed out": a state's word in views (queued and running: their names).
std::string_view Label(TaskState s);

// A job's tasks counted by state, in the one vocabulary every view uses (list, status, watch,
// wait, results, run, report, --on-end): a column per kind that counts itself (CountColumns in
// outcome.h: succeeded, failed, unsupported, timed out, crashed, cancelled), then queued and
// running. Each task is counted once; "failed" holds the other ends (a spawn failure, an
// interruption with its attempts used up). Views iterate the columns (FinalColumns).
class TaskCounts {
 public:
  // Counts `n` tasks (negative: uncounts) in the column of `state`.
  void Add(TaskState state, int64_t n = 1);
  // A column's count (a state that is not a column of its own: 0).
  int64_t of(TaskState column) const { return n_[static_cast<size_t>(column)]; }
  int64_t& at(TaskState column) { return n_[static_cast<size_t>(column)]; }
  const int64_t& at(TaskState column) const { return n_[static_cast<size_t>(column)]; }
  int64_t succeeded() const { return of(TaskState::kSucceeded); }
  int64_t queued() const { return of(TaskState::kQueued); }
  int64_t running() const { return of(TaskState::kRunning); }
  // All tasks; those that ended; those that ran to an end (neither cancelled, nor queued, nor
  // running); those that ended without success (cancelled ones included).
  int64_t total() const;
  int64_t ended() const;
  int64_t ran() const;
  int64_t unsuccessful() const { return ended() - succeeded(); }
  // "3 succeeded, 1 failed, 2 timed out, 4 queued": succeeded and failed always, the others
  // when there are any, in the columns' order.
  std::string Describe() const;
  bool operator==(const TaskCounts&) const = default;

 private:
  std::array<int64_t, kTaskStates> n_{};
};
// The final columns, in the order views show them (CountColumns' states).
std::span<const TaskState> FinalColumns();

// A job as status reports it: waiting (for its not-before time), queued, held (ckprof hold: its
// queued tasks do not start; those running finish), running (some task ran or runs), cancelling
// (cancelled, tasks still stopping), finished or cancelled (ended).
enum class JobState : uint8_t {
  kQueued,
  kWaiting,
  kHeld,
  kRunning,
  kCancelling,
  kFinished,
  kCancelled
};
std::string_view EnumName(JobState s);
bool ParseEnum(std::string_view name, JobState* out);
bool IsEnded(JobState s);

// The order of a job's own tasks (submit --order): "rank" (priority_rank, then file order; a
// task too long to start last starts at once) or "longest-first" (most estimated FLOPs first).
enum class TaskOrder : uint8_t { kRank, kLongestFirst };
std::string_view EnumName(TaskOrder o);
bool ParseEnum(std::string_view name, TaskOrder* out);

// nlohmann::json writes these by name, never as the number an enum would silently become.
template <typename BasicJson>
void to_json(BasicJson& j, TaskState s) {
  j = std::string(EnumName(s));
}
template <typename BasicJson>
void to_json(BasicJson& j, JobState s) {
  j = std::string(EnumName(s));
}
template <typename BasicJson>
void to_json(BasicJson& j, TaskOrder o) {
  j = std::string(EnumName(o));
}

// The names, for streams (logs, test messages).
inline std::ostream& operator<<(std::ostream& os, TaskState s) { return os << EnumName(s); }
inline std::ostream& operator<<(std::ostream& os, JobState s) { return os << EnumName(s); }
inline std::ostream& operator<<(std::ostream& os, TaskOrder o) { return os << EnumName(o); }

}  // namespace ckprof
