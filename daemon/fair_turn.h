// FairTurn: one piece of heavy work at a time on the pool (a large job's results or log, the
// tuning table's scan, usage's tally), taken in turn by user. A user who opens many connections
// and asks for a million rows on each waits behind every other user who asked once, not the
// other way round: the turn goes next to the waiting user it was given to least recently,
// each user's own requests in the order they came.
#pragma once

#include <sys/types.h>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <cstdint>
#include <list>
#include <map>
#include <memory>

namespace ckprof {

class FairTurn {
 public:
  explicit FairTurn(asio::any_io_executor ex) : ex_(std::move(ex)) {}
  ~FairTurn();
  FairTurn(const FairTurn&) = delete;
  FairTurn& operator=(const FairTurn&) = delete;

  // Waits for the turn, asked for by `uid`, and takes it; false when the FairTurn went
  // meanwhile (nothing is taken then). Called on the executor's thread, as Leave is.
  asio::awaitable<bool> Enter(uid_t uid);
  // Gives the turn up: to the next waiter, at once (no one else takes it meanwhile).
  void Leave();

  bool busy() const { return busy_; }
  size_t waiting() const { return waiters_.size(); }

 private:
  struct Waiter {
    uid_t uid;
    std::shared_ptr<asio::steady_timer> gate;  // (the waiting coroutine holds it too)
  };
  // Gives the turn to `uid` (served_ counts it).
  void GiveTo(uid_t uid);

  asio::any_io_executor ex_;
  bool busy_ = false;
  std::list<Waiter> waiters_;  // in the order they came
  // When each user was last given the turn (a count; 0: never) since the turn was last free:
  // one entry a user, cleared when no one waits.
  std::map<uid_t, uint64_t> last_given_;
  uint64_t given_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ckprof
