#include "common/outcome.h"

#include <string.h>

#include <cstdio>

namespace ckprof {
namespace {

constexpr Outcome::Kind kAllKinds[] = {Outcome::Kind::kSucceeded,   Outcome::Kind::kUnsupported,
                                       Outcome::Kind::kFailed,      Outcome::Kind::kCrashed,
                                       Outcome::Kind::kTimedOut,    Outcome::Kind::kCancelled,
                                       Outcome::Kind::kInterrupted, Outcome::Kind::kSpawnFailed};

}  // namespace

std::string_view OutcomeKindName(Outcome::Kind k) {
  switch (k) {
    case Outcome::Kind::kSucceeded:
      return "succeeded";
    case Outcome::Kind::kUnsupported:
      return "unsupported";
    case Outcome::Kind::kFailed:
      return "failed";
    case Outcome::Kind::kCrashed:
      return "crashed";
    case Outcome::Kind::kTimedOut:
      return "timed_out";
    case Outcome::Kind::kCancelled:
      return "cancelled";
    case Outcome::Kind::kInterrupted:
      return "interrupted";
    case Outcome::Kind::kSpawnFailed:
      return "spawn_failed";
  }
  return "unknown";
}

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
    case Kind::kSucceeded:
      return "succeeded";
    case Kind::kUnsupported:
      return reason.empty() ? "unsupported" : "unsupported: " + reason;
    case Kind::kFailed: {
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
    case Kind::kCrashed: {
      std::string s = "crashed (" + SignalName(signal) + ")";
      if (!reason.empty() && reason != SignalName(signal)) s += ": " + reason;
      return s;
    }
    case Kind::kTimedOut:
      return reason.empty() ? "timed out" : reason;
    case Kind::kCancelled:
      return reason.empty() ? "cancelled" : reason;
    case Kind::kInterrupted:
      return reason.empty() ? "interrupted" : reason;
    case Kind::kSpawnFailed:
      return reason.empty() ? "spawn failed" : "spawn failed: " + reason;
  }
  return std::string(OutcomeKindName(kind));
}

}  // namespace ckprof
