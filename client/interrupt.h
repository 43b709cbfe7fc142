// InterruptGuard: what a command does on Ctrl-C (SIGINT), SIGTERM or SIGHUP while it drives
// something that must not outlive it — a private ckprofd, or a job it submitted.
//
// While a guard lives, those signals are blocked in the calling thread (construct it before
// starting other threads: they inherit the mask) and taken on a thread of the guard's. There
// the current cleanup runs, then the process exits with 128 + the signal (130 for Ctrl-C)
// without returning to the interrupted code. Without a cleanup set, a signal is held until one
// is set or the guard goes (then the default action applies). One guard at a time.
#pragma once

#include <functional>
#include <memory>

namespace ckprof {

class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // What runs at a signal (on the guard's thread), given the signal; replaces the last one.
  // Set an empty function to finish the command's own way: a signal then waits (see above).
  void SetCleanup(std::function<void(int)> cleanup);
  // Blocks for good when a signal's cleanup is running (the process is about to exit): for the
  // interrupted code, whose connection or daemon that cleanup just closed, before it reports
  // the failure that caused. Returns at once otherwise.
  void WaitIfInterrupted();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace ckprof
