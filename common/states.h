// The states of tasks and jobs, and the order of a job's tasks: enums with one name table each.
// The names are the ones on the wire, in the Store, in results files and in every view; a
// state is never spelled out as a string literal anywhere else (a typo must not compile).
//
// Plain functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "common/outcome.h"

namespace ckprof {

// A task is queued, running, or final with the outcome of its last run.
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
// The final state a run's outcome leaves a task in, and back (nullopt for queued, running).
TaskState StateOf(Outcome::Kind kind);
std::optional<Outcome::Kind> OutcomeOf(TaskState s);

// A job as status reports it: waiting (for its not-before time), queued, running (some task
// ran or runs), cancelling (cancelled, tasks still stopping), finished or cancelled (ended).
enum class JobState : uint8_t { kQueued, kWaiting, kRunning, kCancelling, kFinished, kCancelled };
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
