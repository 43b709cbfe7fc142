#include "common/states.h"

#include <utility>
#include <vector>

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

constexpr std::pair<JobState, std::string_view> kJobStates[] = {
    {JobState::kQueued, "queued"},
    {JobState::kWaiting, "waiting"},
    {JobState::kHeld, "held"},
    {JobState::kRunning, "running"},
    {JobState::kCancelling, "cancelling"},
    {JobState::kFinished, "finished"},
    {JobState::kCancelled, "cancelled"},
};

constexpr std::pair<TaskOrder, std::string_view> kTaskOrders[] = {
    {TaskOrder::kRank, "rank"},
    {TaskOrder::kLongestFirst, "longest-first"},
};

}  // namespace

std::string_view EnumName(TaskState s) {
  if (s == TaskState::kQueued) return "queued";
  if (s == TaskState::kRunning) return "running";
  const std::optional<Outcome::Kind> kind = OutcomeOf(s);
  return kind ? OutcomeKindName(*kind) : "unknown";
}

bool ParseEnum(std::string_view name, TaskState* out) {
  if (name == "queued" || name == "running") {
    *out = name == "queued" ? TaskState::kQueued : TaskState::kRunning;
    return true;
  }
  const std::optional<Outcome::Kind> kind = ParseOutcomeKindName(name);
  if (kind) *out = StateOf(*kind);
  return kind.has_value();
}

std::optional<TaskState> ParseTaskState(std::string_view name) {
  TaskState s;
  return ParseEnum(name, &s) ? std::optional<TaskState>(s) : std::nullopt;
}

bool IsFinal(TaskState s) { return s != TaskState::kQueued && s != TaskState::kRunning; }

TaskState StateOf(Outcome::Kind kind) { return TraitsOf(kind).state; }

std::optional<Outcome::Kind> OutcomeOf(TaskState s) {
  for (Outcome::Kind k : AllOutcomeKinds()) {
    if (TraitsOf(k).state == s) return k;
  }
  return std::nullopt;
}

std::string_view Label(TaskState s) {
  const std::optional<Outcome::Kind> kind = OutcomeOf(s);
  return kind ? TraitsOf(*kind).label : EnumName(s);
}

std::span<const TaskState> FinalColumns() {
  static const std::vector<TaskState> columns = [] {
    std::vector<TaskState> v;
    for (Outcome::Kind k : CountColumns()) v.push_back(StateOf(k));
    return v;
  }();
  return columns;
}

void TaskCounts::Add(TaskState state, int64_t n) {
  const std::optional<Outcome::Kind> kind = OutcomeOf(state);
  at(kind ? StateOf(TraitsOf(*kind).counted_as) : state) += n;
}

int64_t TaskCounts::ended() const {
  int64_t n = 0;
  for (TaskState c : FinalColumns()) n += of(c);
  return n;
}

int64_t TaskCounts::total() const { return ended() + queued() + running(); }

int64_t TaskCounts::ran() const { return ended() - of(TaskState::kCancelled); }

std::string TaskCounts::Describe() const {
  std::string out = std::to_string(succeeded()) + " succeeded, " +
                    std::to_string(of(TaskState::kFailed)) + " failed";
  auto add = [&](TaskState c) {
    if (of(c) > 0) out += ", " + std::to_string(of(c)) + " " + std::string(Label(c));
  };
  for (TaskState c : FinalColumns()) {
    if (c != TaskState::kSucceeded && c != TaskState::kFailed) add(c);
  }
  add(TaskState::kQueued);
  add(TaskState::kRunning);
  return out;
}

std::string_view EnumName(JobState s) { return NameIn(kJobStates, s); }
bool ParseEnum(std::string_view name, JobState* out) { return ParseIn(kJobStates, name, out); }
bool IsEnded(JobState s) { return s == JobState::kFinished || s == JobState::kCancelled; }

std::string_view EnumName(TaskOrder o) { return NameIn(kTaskOrders, o); }
bool ParseEnum(std::string_view name, TaskOrder* out) { return ParseIn(kTaskOrders, name, out); }

}  // namespace ckprof
