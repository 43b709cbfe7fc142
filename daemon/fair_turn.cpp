#include "daemon/fair_turn.h"

#include <algorithm>
#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>

namespace ckprof {

FairTurn::~FairTurn() {
  *alive_ = false;
  for (Waiter& w : waiters_) w.gate->cancel();
}

void FairTurn::GiveTo(uid_t uid) {
  busy_ = true;
  last_given_[uid] = ++given_;
}

asio::awaitable<bool> FairTurn::Enter(uid_t uid) {
  if (!busy_) {
    GiveTo(uid);
    co_return true;
  }
  const std::shared_ptr<bool> alive = alive_;
  auto gate = std::make_shared<asio::steady_timer>(ex_, asio::steady_timer::time_point::max());
  waiters_.push_back(Waiter{uid, gate});
  last_given_.try_emplace(uid, 0);
  // Woken by Leave, which gave us the turn and took our entry away (or by the destructor).
  co_await gate->async_wait(asio::experimental::as_tuple(asio::use_awaitable));
  co_return *alive;
}

void FairTurn::Leave() {
  if (waiters_.empty()) {
    busy_ = false;
    last_given_.clear();  // (no one waits: no order to keep)
    return;
  }
  // The waiter whose user had the turn least recently; of one user's, the first that came.
  auto next =
      std::min_element(waiters_.begin(), waiters_.end(), [&](const Waiter& a, const Waiter& b) {
        return last_given_.at(a.uid) < last_given_.at(b.uid);
      });
  const Waiter w = *next;
  waiters_.erase(next);
  GiveTo(w.uid);
  w.gate->cancel();
}

}  // namespace ckprof
