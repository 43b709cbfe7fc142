// IoBudget: each user's share of the io thread, a token bucket in seconds.
#include "daemon/io_budget.h"

#include <gtest/gtest.h>

#include <chrono>

namespace ckprof {
namespace {

using Clock = IoBudget::Clock;
using std::chrono::milliseconds;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

TEST(IoBudgetTest, AUserWithinTheBurstNeverWaits) {
  IoBudget b;
  const Clock::time_point t0{};
  EXPECT_EQ(b.Wait(1000, t0), Clock::duration::zero());  // never seen
  // Requests of 1 ms every 2 ms: half of the io thread, the rate given back as fast as taken.
  Clock::time_point now = t0;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(b.Wait(1000, now), Clock::duration::zero()) << i;
    now += milliseconds(1);
    b.Charge(1000, 0.001, now);
    now += milliseconds(1);
  }
  EXPECT_GT(b.Tokens(1000, now), IoBudget::kBurst - 0.0011);
}

TEST(IoBudgetTest, AUserPastTheirShareWaitsWhileAnotherDoesNot) {
  IoBudget b;
  Clock::time_point now{};
  // 77 ms at once (a cancel naming 4,096 queued tasks on a slow machine), from a full bucket:
  // 50 ms of burst, 27 ms short: 54 ms to wait at half the io thread.
  b.Charge(1000, 0.077, now += milliseconds(77));
  EXPECT_NEAR(b.Tokens(1000, now), IoBudget::kBurst - 0.077, 1e-9);
  const Clock::duration wait = b.Wait(1000, now);
  EXPECT_NEAR(Ms(wait), (0.077 - IoBudget::kBurst) / IoBudget::kRate * 1e3, 1e-3);
  EXPECT_EQ(b.Wait(2000, now), Clock::duration::zero());  // the other user
  // Half the wait later: still waiting, for half as long; after the whole wait, at once.
  EXPECT_NEAR(Ms(b.Wait(1000, now + wait / 2)), Ms(wait) / 2, 1e-3);
  EXPECT_EQ(b.Wait(1000, now + wait), Clock::duration::zero());
}

TEST(IoBudgetTest, ManyHeavyRequestsGetHalfTheIoThreadAndOneLongStepDoesNotShutTheUserOut) {
  IoBudget b;
  Clock::time_point now{};
  // One user's requests of 77 ms, each as soon as it may: the io thread's time over 10 s is
  // about kRate theirs.
  Clock::duration busy{};
  const Clock::time_point end = now + std::chrono::seconds(10);
  while (now < end) {
    now += b.Wait(1000, now);
    now += milliseconds(77);
    busy += milliseconds(77);
    b.Charge(1000, 0.077, now);
  }
  EXPECT_NEAR(Ms(busy) / 10000, IoBudget::kRate, 0.02);
  // Eight seconds at once (a large submit's stored steps): counted down to -kBurst only, so the
  // user's next request waits kBurst / kRate at most.
  b.Charge(3000, 8.0, now);
  EXPECT_NEAR(Ms(b.Wait(3000, now)), IoBudget::kBurst / IoBudget::kRate * 1e3, 1e-3);
}

TEST(IoBudgetTest, TheLogSaysOnceAMinuteThatAUsersRequestsWait) {
  IoBudget b;
  Clock::time_point now{};
  EXPECT_FALSE(b.Tell(1000, now));  // never charged: nothing to say
  b.Charge(1000, 0.2, now);
  EXPECT_TRUE(b.Tell(1000, now));
  EXPECT_FALSE(b.Tell(1000, now + std::chrono::seconds(30)));
  b.Charge(1000, 0.2, now + std::chrono::seconds(30));
  EXPECT_FALSE(b.Tell(1000, now + std::chrono::seconds(59)));
  EXPECT_TRUE(b.Tell(1000, now + std::chrono::seconds(61)));
}

TEST(IoBudgetTest, UsersWhoseBucketIsFullAgainAreForgotten) {
  IoBudget b;
  Clock::time_point now{};
  for (uid_t uid = 1; uid <= 100; ++uid) b.Charge(uid, 0.010, now);
  EXPECT_EQ(b.users(), 100u);
  now += std::chrono::seconds(2);  // all full again
  b.Charge(500, 0.001, now);
  EXPECT_EQ(b.users(), 1u);
}

}  // namespace
}  // namespace ckprof
