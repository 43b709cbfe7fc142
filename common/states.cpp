#include "common/states.h"

#include <utility>

namespace ckprof {
namespace {

template <typename E, size_t N>
std::string_view NameIn(const std::pair<E, std::string_view> (&table)[N], E e) {
  for (const auto& [value, name] : table) {
    if (value == e) return name;
  }
  return "unknown";
}

template <typename E, size_t N>
bool ParseIn(const std::pair<E, std::string_view> (&table)[N], std::string_view name, E* out) {
  for (const auto& [value, n] : table) {
    if (n == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

constexpr std::pair<TaskState, std::string_view> kTaskStates[] = {
    {TaskState::kQueued, "queued"},           {TaskState::kRunning, "running"},
    {TaskState::kSucceeded, "succeeded"},     {TaskState::kUnsupported, "unsupported"},
    {TaskState::kFailed, "failed"},           {TaskState::kCrashed, "crashed"},
    {TaskState::kTimedOut, "timed_out"},      {TaskState::kCancelled, "cancelled"},
    {TaskState::kInterrupted, "interrupted"}, {TaskState::kSpawnFailed, "spawn_failed"},
};

constexpr std::pair<TaskState, Outcome::Kind> kFinalStates[] = {
    {TaskState::kSucceeded, Outcome::Kind::kSucceeded},
    {TaskState::kUnsupported, Outcome::Kind::kUnsupported},
    {TaskState::kFailed, Outcome::Kind::kFailed},
    {TaskState::kCrashed, Outcome::Kind::kCrashed},
    {TaskState::kTimedOut, Outcome::Kind::kTimedOut},
    {TaskState::kCancelled, Outcome::Kind::kCancelled},
    {TaskState::kInterrupted, Outcome::Kind::kInterrupted},
    {TaskState::kSpawnFailed, Outcome::Kind::kSpawnFailed},
};

constexpr std::pair<JobState, std::string_view> kJobStates[] = {
    {JobState::kQueued, "queued"},     {JobState::kWaiting, "waiting"},
    {JobState::kRunning, "running"},   {JobState::kCancelling, "cancelling"},
    {JobState::kFinished, "finished"}, {JobState::kCancelled, "cancelled"},
};

constexpr std::pair<TaskOrder, std::string_view> kTaskOrders[] = {
    {TaskOrder::kRank, "rank"},
    {TaskOrder::kLongestFirst, "longest-first"},
};

}  // namespace

std::string_view EnumName(TaskState s) { return NameIn(kTaskStates, s); }
bool ParseEnum(std::string_view name, TaskState* out) { return ParseIn(kTaskStates, name, out); }
std::optional<TaskState> ParseTaskState(std::string_view name) {
  TaskState s;
  return ParseEnum(name, &s) ? std::optional<TaskState>(s) : std::nullopt;
}
bool IsFinal(TaskState s) { return s != TaskState::kQueued && s != TaskState::kRunning; }

TaskState StateOf(Outcome::Kind kind) {
  for (const auto& [state, k] : kFinalStates) {
    if (k == kind) return state;
  }
  return TaskState::kFailed;
}

std::optional<Outcome::Kind> OutcomeOf(TaskState s) {
  for (const auto& [state, k] : kFinalStates) {
    if (state == s) return k;
  }
  return std::nullopt;
}

std::string_view EnumName(JobState s) { return NameIn(kJobStates, s); }
bool ParseEnum(std::string_view name, JobState* out) { return ParseIn(kJobStates, name, out); }
bool IsEnded(JobState s) { return s == JobState::kFinished || s == JobState::kCancelled; }

std::string_view EnumName(TaskOrder o) { return NameIn(kTaskOrders, o); }
bool ParseEnum(std::string_view name, TaskOrder* out) { return ParseIn(kTaskOrders, name, out); }

}  // namespace ckprof
