// IoBudget: each user's share of the io thread. Every request is handled on the one io thread;
// most take well under a millisecond, some up to tens (a cancel naming 4,096 queued tasks,
// every job's status with a million tasks queued, the results of a job of 2,000 tasks). One
// user's 32 connections each sending such a request had them all run back to back, and another
// user's `status` waited for the whole batch (seconds). With this budget, a user's request
// waits (off the io thread, on a timer) while that user has spent more than their share; the
// others' requests run in between, so that another user waits at most about one request.
//
// A token bucket a user, in seconds of io-thread time: it fills at kRate a second (the share
// one user may hold over time) up to kBurst (what a user may spend at once), and the io time
// of each request is taken from it. It may go down to -kBurst: past that, nothing more is
// counted (one long step, like a large submit's stored steps, does not shut its user out).
// A request waits until its user's bucket is no longer below zero: kBurst / kRate at most.
// Users who do not use it have nothing kept.
//
// Used on the io thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <unordered_map>

namespace ckprof {

class IoBudget {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr double kRate = 0.5;     // of the io thread, over time, for one user
  static constexpr double kBurst = 0.050;  // seconds of io-thread time at once

  // How long a request of `uid` waits before it is handled (zero: at once).
  Clock::duration Wait(uid_t uid, Clock::time_point now);
  // `seconds` of the io thread were spent on a request of `uid`, ending at `now`.
  void Charge(uid_t uid, double seconds, Clock::time_point now);
  // Whether to say in the log that `uid`'s requests wait: once a minute a user at most.
  bool Tell(uid_t uid, Clock::time_point now);
  // The user's bucket now (kBurst when full or unknown): for tests and the debug log.
  double Tokens(uid_t uid, Clock::time_point now) const;
  size_t users() const { return users_.size(); }

  // Measures the io-thread time of its scope and charges it to `uid` when it ends. Only for a
  // scope that does not suspend (the time would include other work).
  class Charged {
   public:
    Charged(IoBudget& budget, uid_t uid) : budget_(budget), uid_(uid), start_(Clock::now()) {}
    ~Charged() {
      const auto end = Clock::now();
      budget_.Charge(uid_, std::chrono::duration<double>(end - start_).count(), end);
    }
    Charged(const Charged&) = delete;
    Charged& operator=(const Charged&) = delete;

   private:
    IoBudget& budget_;
    uid_t uid_;
    Clock::time_point start_;
  };

 private:
  struct Bucket {
    double tokens = kBurst;
    Clock::time_point at{};  // when `tokens` was computed
  };
  static double Filled(const Bucket& b, Clock::time_point now);
  // Forgets users whose bucket is full again, and what was told a minute ago (at most every
  // second).
  void Prune(Clock::time_point now);

  std::unordered_map<uid_t, Bucket> users_;
  std::unordered_map<uid_t, Clock::time_point> told_;  // when the log last said so (Tell)
  Clock::time_point pruned_{};
};

}  // namespace ckprof
