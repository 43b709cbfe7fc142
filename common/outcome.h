// An Outcome says how one profiler run ended: the real type of a task's end, never a
// raw waitpid status. Its kinds are the one vocabulary of ends: each kind's name, the task
// state it leaves, whether it is a failure, whether retry takes it and its word in views are
// one row of one table (OutcomeRow in outcome.cpp); every view and count follows that table.
//
// Plain value type; any thread may use its own copies. Produced by ClassifyExit (ck_output.h)
// for processes that ran, and by the runner for timeouts, cancellation and spawn failures.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ckprof {

enum class TaskState : uint8_t;  // common/states.h

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
    // A new kind: its row in OutcomeRow (outcome.cpp), its TaskState (states.h), its case in
    // Summary, and kOutcomeKinds below; the compiler names each switch that must decide.
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

// How many kinds there are (outcome.cpp checks it against its table).
inline constexpr int kOutcomeKinds = 8;

// What the vocabulary says of one kind: one row per kind, in outcome.cpp.
// What a result's returncode is for a kind: the exit code, minus the signal, minus the
// signal else -1 (a run that was stopped, or never waited for), or -1 (no process ran).
enum class ReturnCode : uint8_t { kExitCode, kMinusSignal, kMinusSignalElseMinusOne, kMinusOne };

struct OutcomeTraits {
  // "timed_out": its name in results files, the protocol, the store and the task's state.
  const char* name;
  // "timed out": its word in views (counts, sentences).
  const char* label;
  // The final task state it leaves.
  TaskState state;
  // A failure: `retry --failed` takes it, views show it as one (failed, crashed, timed out,
  // spawn failed, interrupted).
  bool failure;
  // `retry` without tasks named takes it (every end but succeeded and unsupported).
  bool retryable;
  // The column of TaskCounts that counts it: itself, or another kind's (a spawn failure and an
  // interruption are counted as failed).
  Outcome::Kind counted_as;
  ReturnCode returncode;
};
const OutcomeTraits& TraitsOf(Outcome::Kind k);
// A result's returncode (results files, the protocol) for a run that ended as `k` with
// `exit_code` or `signal`; an unknown kind (nullopt) gives the exit code.
int ReturnCodeOf(std::optional<Outcome::Kind> k, int exit_code, int signal);
// Every kind, in the enum's order.
std::span<const Outcome::Kind> AllOutcomeKinds();
// The kinds that are columns of their own (counted_as itself), in the order every view shows
// them: succeeded, failed, unsupported, timed_out, crashed, cancelled.
std::span<const Outcome::Kind> CountColumns();

// "succeeded", "unsupported", "failed", "crashed", "timed_out", "cancelled", "interrupted",
// "spawn_failed": the names used in results files, the protocol and the store.
std::string_view OutcomeKindName(Outcome::Kind k);
std::optional<Outcome::Kind> ParseOutcomeKindName(std::string_view name);
inline bool IsFailure(Outcome::Kind k) { return TraitsOf(k).failure; }
inline bool Retryable(Outcome::Kind k) { return TraitsOf(k).retryable; }

// "SIGSEGV", "SIGKILL", ...; "signal 77" for numbers without a name.
std::string SignalName(int sig);

// "30 s", "0.2 s", "1.25 s": a duration in seconds for reasons such as "timed out after 30 s".
std::string FormatSeconds(double seconds);

}  // namespace ckprof
