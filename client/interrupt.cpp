#include "client/interrupt.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

namespace ckprof {

struct InterruptGuard::State {
  std::mutex mu;
  std::function<void(int)> cleanup;
  int pending = 0;  // a signal taken while no cleanup was set
  std::atomic<bool> interrupting{false};
  sigset_t signals{}, old_mask{};
  int signal_fd = -1, stop_fd = -1;
  std::thread thread;

  [[noreturn]] void Finish(int sig) {  // with `mu` held, for good
    interrupting = true;
    cleanup(sig);
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    _exit(128 + sig);
  }

  void Loop() {
    for (;;) {
      pollfd fds[2] = {{signal_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents) return;
      signalfd_siginfo info{};
      if (read(signal_fd, &info, sizeof info) != sizeof info) continue;
      std::lock_guard<std::mutex> lock(mu);
      if (cleanup) Finish(static_cast<int>(info.ssi_signo));
      if (!pending) pending = static_cast<int>(info.ssi_signo);
    }
  }
};

InterruptGuard::InterruptGuard() : state_(std::make_shared<State>()) {
  State& s = *state_;
  sigemptyset(&s.signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&s.signals, sig);
  pthread_sigmask(SIG_BLOCK, &s.signals, &s.old_mask);
  s.signal_fd = signalfd(-1, &s.signals, SFD_CLOEXEC);
  s.stop_fd = eventfd(0, EFD_CLOEXEC);
  if (s.signal_fd < 0 || s.stop_fd < 0) return;  // then signals stay held until the guard goes
  s.thread = std::thread([state = state_] { state->Loop(); });
}

InterruptGuard::~InterruptGuard() {
  State& s = *state_;
  if (s.thread.joinable()) {
    const uint64_t one = 1;
    ssize_t ignored = write(s.stop_fd, &one, sizeof one);
    (void)ignored;
    s.thread.join();
  }
  if (s.signal_fd >= 0) close(s.signal_fd);
  if (s.stop_fd >= 0) close(s.stop_fd);
  pthread_sigmask(SIG_SETMASK, &s.old_mask, nullptr);  // signals still pending arrive now
  if (s.pending) raise(s.pending);                     // and one the guard took, too
}

void InterruptGuard::WaitIfInterrupted() {
  if (!state_->interrupting) return;
  std::lock_guard<std::mutex> lock(state_->mu);  // never taken: Finish holds it until the exit
}

void InterruptGuard::SetCleanup(std::function<void(int)> cleanup) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  s.cleanup = std::move(cleanup);
  if (s.cleanup && s.pending) s.Finish(s.pending);
}

}  // namespace ckprof
