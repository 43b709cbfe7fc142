#include "common/outcome.h"

#include <string.h>

#include <array>
#include <cstdio>

#include "common/states.h"

namespace ckprof {
namespace {

using OutcomeKind = Outcome::Kind;

// The table of kinds: one row each, and a switch without `default:` so that a new kind does
// not compile until its row says what it is.
constexpr OutcomeTraits OutcomeRow(OutcomeKind k) {
  using S = TaskState;
  using R = ReturnCode;
  switch (k) {
    case OutcomeKind::kSucceeded:
      return {"succeeded", "succeeded", S::kSucceeded, false, false, k, R::kExitCode};
    case OutcomeKind::kUnsupported:
      return {"unsupported", "unsupported", S::kUnsupported, false, false, k, R::kExitCode};
    case OutcomeKind::kFailed:
      return {"failed", "failed", S::kFailed, true, true, k, R::kExitCode};
    case OutcomeKind::kCrashed:
      return {"crashed", "crashed", S::kCrashed, true, true, k, R::kMinusSignal};
    case OutcomeKind::kTimedOut:
      return {"timed_out", "timed out", S::kTimedOut, true, true, k, R::kMinusSignalElseMinusOne};
    case OutcomeKind::kCancelled:
      return {"cancelled", "cancelled", S::kCancelled, false, true, k, R::kMinusSignalElseMinusOne};
    case OutcomeKind::kInterrupted:
      return {"interrupted",
              "interrupted",
              S::kInterrupted,
              true,
              true,
              OutcomeKind::kFailed,
              R::kMinusSignalElseMinusOne};
    case OutcomeKind::kSpawnFailed:
      return {"spawn_failed", "spawn failed",       S::kSpawnFailed, true,
              true,           OutcomeKind::kFailed, R::kMinusOne};
  }
  return {nullptr, nullptr, S::kQueued, false, false, k, R::kExitCode};  // not a kind
}

constexpr std::array<OutcomeKind, kOutcomeKinds> MakeKinds() {
  std::array<OutcomeKind, kOutcomeKinds> kinds{};
  for (int i = 0; i < kOutcomeKinds; ++i) kinds[i] = static_cast<OutcomeKind>(i);
  return kinds;
}
constexpr std::array<OutcomeKind, kOutcomeKinds> kAllKinds = MakeKinds();

constexpr std::array<OutcomeTraits, kOutcomeKinds> MakeRows() {
  std::array<OutcomeTraits, kOutcomeKinds> rows{};
  for (int i = 0; i < kOutcomeKinds; ++i) rows[i] = OutcomeRow(static_cast<OutcomeKind>(i));
  return rows;
}
constexpr std::array<OutcomeTraits, kOutcomeKinds> kRows = MakeRows();

// The columns of TaskCounts, in the order views show them.
constexpr OutcomeKind kColumns[] = {OutcomeKind::kSucceeded,   OutcomeKind::kFailed,
                                    OutcomeKind::kUnsupported, OutcomeKind::kTimedOut,
                                    OutcomeKind::kCrashed,     OutcomeKind::kCancelled};

// kOutcomeKinds is the number of kinds; each leaves a final state of its own; a kind is
// counted in a column that counts itself and is listed in kColumns.
constexpr bool TableHolds() {
  if (OutcomeRow(static_cast<OutcomeKind>(kOutcomeKinds)).name != nullptr) return false;
  for (int i = 0; i < kOutcomeKinds; ++i) {
    const OutcomeTraits& r = kRows[i];
    if (r.name == nullptr || r.state == TaskState::kQueued || r.state == TaskState::kRunning) {
      return false;
    }
    if (kRows[static_cast<int>(r.counted_as)].counted_as != r.counted_as) return false;
    bool listed = false;
    for (OutcomeKind c : kColumns) listed = listed || c == r.counted_as;
    if (!listed) return false;
    for (int j = 0; j < i; ++j) {
      if (kRows[j].state == r.state) return false;
    }
  }
  return true;
}
static_assert(TableHolds(), "kOutcomeKinds, OutcomeRow, kColumns and TaskState disagree");

}  // namespace

const OutcomeTraits& TraitsOf(Outcome::Kind k) { return kRows.at(static_cast<size_t>(k)); }

std::span<const Outcome::Kind> AllOutcomeKinds() { return kAllKinds; }

int ReturnCodeOf(std::optional<Outcome::Kind> k, int exit_code, int signal) {
  if (!k) return exit_code;
  switch (TraitsOf(*k).returncode) {
    case ReturnCode::kExitCode:
      return exit_code;
    case ReturnCode::kMinusSignal:
      return -signal;
    case ReturnCode::kMinusSignalElseMinusOne:
      return signal ? -signal : -1;
    case ReturnCode::kMinusOne:
      return -1;
  }
  return exit_code;
}

std::span<const Outcome::Kind> CountColumns() { return kColumns; }

std::string_view OutcomeKindName(Outcome::Kind k) { return TraitsOf(k).name; }

std::optional<Outcome::Kind> ParseOutcomeKindName(std::string_view name) {
  for (Outcome::Kind k : kAllKinds) {
    if (OutcomeKindName(k) == name) return k;
  }
  return std::nullopt;
}

std::string SignalName(int sig) {
  const char* abbrev = sig > 0 ? sigabbrev_np(sig) : nullptr;
  if (abbrev != nullptr) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

std::string FormatSeconds(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", seconds);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s + " s";
}

std::string Outcome::Summary() const {
  switch (kind) {
    case OutcomeKind::kSucceeded:
      return "succeeded";
    case OutcomeKind::kUnsupported:
      return reason.empty() ? "unsupported" : "unsupported: " + reason;
    case OutcomeKind::kFailed: {
      // reason usually starts "exit code N: "; do not say the code twice.
      std::string detail = reason;
      const std::string prefix = "exit code " + std::to_string(exit_code);
      if (detail.rfind(prefix, 0) == 0) {
        detail.erase(0, prefix.size());
        if (detail.rfind(": ", 0) == 0) detail.erase(0, 2);
      }
      std::string s = "failed (exit " + std::to_string(exit_code) + ")";
      return detail.empty() ? s : s + ": " + detail;
    }
    case OutcomeKind::kCrashed: {
      std::string s = "crashed (" + SignalName(signal) + ")";
      if (!reason.empty() && reason != SignalName(signal)) s += ": " + reason;
      return s;
    }
    case OutcomeKind::kTimedOut:
      return reason.empty() ? "timed out" : reason;
    case OutcomeKind::kCancelled:
      return reason.empty() ? "cancelled" : reason;
    case OutcomeKind::kInterrupted:
      return reason.empty() ? "interrupted" : reason;
    case OutcomeKind::kSpawnFailed:
      return reason.empty() ? "spawn failed" : "spawn failed: " + reason;
  }
  return std::string(OutcomeKindName(kind));  // not a kind
}

}  // namespace ckprof
