// An Outcome says how one profiler run ended: the real type of a task's end, never a
// raw waitpid status.
//
// Plain value type; any thread may use its own copies. Produced by ClassifyExit (ck_output.h)
// for processes that ran, and by the runner for timeouts, cancellation and spawn failures.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ckprof {

struct Outcome {
  enum class Kind {
    kSucceeded,    // exit 0 with at least one valid instance
    kUnsupported,  // exit 0 but no instance supports the problem (valids: 0)
    kFailed,       // non-zero exit: verification failure, not implemented, bad argc, ...
    kCrashed,      // killed by a signal nobody sent on purpose (SIGSEGV, SIGABRT, GPU fault)
    kTimedOut,     // ran past its time limit and was killed
    kCancelled,    // a user cancelled it and it was killed
    kInterrupted,  // the daemon shut down and killed it
    kSpawnFailed,  // could not be started (exec, chdir, setuid failed)
  };
  Kind kind = Kind::kSucceeded;
  int exit_code = 0;  // for kFailed
  int signal = 0;     // for kCrashed (and the signal that ended a timed-out/cancelled run, if any)
  // Human text: "exit code 1: verification failed (Error: Incorrect results!)", "SIGSEGV",
  // "timed out after 30 s", "cannot execute /x/ckProfiler: No such file or directory".
  std::string reason;

  bool ok() const { return kind == Kind::kSucceeded; }
  // One line for consoles and logs, e.g. "failed (exit 1): verification failed",
  // "crashed (SIGSEGV)", "timed out after 30 s".
  std::string Summary() const;
};

// "succeeded", "unsupported", "failed", "crashed", "timed_out", "cancelled", "interrupted",
// "spawn_failed": the names used in results files, the protocol and the store.
std::string_view OutcomeKindName(Outcome::Kind k);
std::optional<Outcome::Kind> ParseOutcomeKindName(std::string_view name);

// "SIGSEGV", "SIGKILL", ...; "signal 77" for numbers without a name.
std::string SignalName(int sig);

// "30 s", "0.2 s", "1.25 s": a duration in seconds for reasons such as "timed out after 30 s".
std::string FormatSeconds(double seconds);

}  // namespace ckprof
