// FairTurn: the pool's one-at-a-time turn, taken by users in turn.
#include "daemon/fair_turn.h"

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <memory>
#include <string>
#include <vector>

namespace ckprof {
namespace {

class FairTurnTest : public ::testing::Test {
 protected:
  // A request of user `uid` named `name`: it takes the turn (`taken` says so in order) and
  // holds it until the test leaves it.
  void Ask(FairTurn& turn, uid_t uid, std::string name) {
    asio::co_spawn(
        io_,
        [&turn, uid, name = std::move(name), this]() -> asio::awaitable<void> {
          const bool got = co_await turn.Enter(uid);
          (got ? taken_ : refused_).push_back(name);
        },
        asio::detached);
    Poll();
  }
  // The holder leaves; the next takes the turn.
  void Leave(FairTurn& turn) {
    turn.Leave();
    Poll();
  }
  // Runs what is ready (an io_context out of work stops: restarted first).
  void Poll() {
    io_.restart();
    io_.poll();
  }

  asio::io_context io_;
  std::vector<std::string> taken_, refused_;
};

TEST_F(FairTurnTest, OneUsersManyRequestsDoNotQueueAheadOfAnothersOne) {
  FairTurn turn(io_.get_executor());
  Ask(turn, 1000, "a1");
  Ask(turn, 1000, "a2");
  Ask(turn, 1000, "a3");
  Ask(turn, 1000, "a4");
  Ask(turn, 1001, "b1");
  Ask(turn, 1002, "c1");
  EXPECT_EQ(taken_, std::vector<std::string>{"a1"});  // one at a time
  EXPECT_EQ(turn.waiting(), 5u);
  Leave(turn);
  Leave(turn);
  // b1 and c1 came after a2-a4 but take the turn first: their users have not had it.
  EXPECT_EQ(taken_, (std::vector<std::string>{"a1", "b1", "c1"}));
  Ask(turn, 1001, "b2");  // b's user had it before a's second: after a2
  Leave(turn);
  Leave(turn);
  Leave(turn);
  Leave(turn);
  EXPECT_EQ(taken_, (std::vector<std::string>{"a1", "b1", "c1", "a2", "b2", "a3", "a4"}));
  EXPECT_EQ(turn.waiting(), 0u);
  // Free again: the next request takes it at once, and one user alone keeps its order.
  Leave(turn);
  Ask(turn, 1000, "a5");
  Ask(turn, 1000, "a6");
  EXPECT_EQ(taken_.back(), "a5");
  Leave(turn);
  EXPECT_EQ(taken_.back(), "a6");
  EXPECT_TRUE(refused_.empty());
}

TEST_F(FairTurnTest, ItsEndWakesTheWaitingWithoutTheTurn) {
  auto turn = std::make_unique<FairTurn>(io_.get_executor());
  Ask(*turn, 1000, "a1");
  Ask(*turn, 1001, "b1");
  Ask(*turn, 1001, "b2");
  turn.reset();
  Poll();
  EXPECT_EQ(taken_, std::vector<std::string>{"a1"});
  EXPECT_EQ(refused_, (std::vector<std::string>{"b1", "b2"}));
}

}  // namespace
}  // namespace ckprof
