// QueuePolicy: the pick, as tables of scenarios (no Store, no Asio, no processes).
#include "daemon/queue_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace ckprof {
namespace {

using Params = QueuePolicy::JobParams;
using Key = QueuePolicy::TaskKey;

struct JobSpec {
  int64_t id;
  Params params;
  std::vector<Key> tasks;  // queued
};
struct RunningSpec {
  int gpu;
  int64_t job;
  double since;
};
struct UsageSpec {
  uint32_t uid;
  double usage;  // as of t = 0
};
struct PickCase {
  std::string name;
  std::vector<int> gpus;
  std::vector<JobSpec> jobs;
  std::vector<RunningSpec> running;
  std::vector<UsageSpec> usage;
  std::vector<int> drained;
  int gpu;  // the free GPU asked about
  double now;
  std::optional<int64_t> expected;  // the task it runs; nullopt = none
  bool after_end = false;           // PickAfterEnd(gpu): its running task ended
  int user_gpu_cap = 0;             // SetUserGpuCap
};

Params User(uint32_t uid, int priority = 0) {
  Params p;
  p.uid = uid;
  p.priority = priority;
  return p;
}
Params With(Params p, void (*edit)(Params&)) {
  edit(p);
  return p;
}
// Tasks of equal size: id, rank, position.
std::vector<Key> Tasks(std::vector<int64_t> ids) {
  std::vector<Key> out;
  for (int64_t id : ids) out.push_back({id, id % 100, id % 100, 1.0});
  return out;
}

QueuePolicy Build(const PickCase& c) {
  QueuePolicy p(c.gpus, /*half_life_s=*/3600);
  for (const auto& u : c.usage) p.SetUsage(u.uid, {u.usage, 0});
  for (const auto& j : c.jobs) {
    p.AddJob(j.id, j.params);
    for (const auto& t : j.tasks) p.Enqueue(j.id, t);
  }
  for (const auto& r : c.running) p.Started(r.gpu, r.job, r.since);
  for (int g : c.drained) p.SetDrained(g, true);
  p.SetUserGpuCap(c.user_gpu_cap);
  return p;
}

TEST(QueuePolicy, PicksAsThePolicySays) {
  const std::vector<PickCase> cases = {
      {"nothing queued", {0}, {{1, User(1), {}}}, {}, {}, {}, 0, 10, std::nullopt},
      {"one job: rank order",
       {0},
       {{1, User(1), {{13, 3, 3, 1}, {11, 1, 1, 1}, {12, 2, 2, 1}}}},
       {},
       {},
       {},
       0,
       10,
       11},
      {"fair share: the user with less GPU time first",
       {0},
       {{1, User(1), Tasks({101})}, {2, User(2), Tasks({201})}},
       {},
       {{1, 500}, {2, 100}},
       {},
       0,
       10,
       201},
      {"fair share counts running tasks' time so far",
       {0, 1},
       {{1, User(1), Tasks({101})}, {2, User(2), Tasks({201, 202})}},
       {{1, 2, 0}},  // user 2 has run on GPU 1 since t = 0
       {{1, 300}, {2, 0}},
       {},
       0,
       400,  // user 2: 400 s so far > user 1's ~277 s decayed
       101},
      {"equal usage: fewer running tasks first",
       {0, 1},
       {{1, User(1), Tasks({101, 102})}, {2, User(2), Tasks({201})}},
       {{1, 1, 10}},
       {},
       {},
       0,
       10,  // user 1's running task has 0 s so far: a tie on usage
       201},
      {"a full tie: the lower uid",
       {0},
       {{1, User(7), Tasks({701})}, {2, User(3), Tasks({301})}},
       {},
       {},
       {},
       0,
       10,
       301},
      {"within a user: priority, then submit order",
       {0},
       {{1, User(1, 0), Tasks({101})},
        {2, User(1, 5), Tasks({201})},
        {3, User(1, 5), Tasks({301})}},
       {},
       {},
       {},
       0,
       10,
       201},
      {"a cancelled job takes nothing",
       {0},
       {{1, With(User(1), [](Params& p) { p.paused = true; }), Tasks({101})},
        {2, User(2), Tasks({201})}},
       {},
       {{2, 1e6}},
       {},
       0,
       10,
       201},
      {"not before its time",
       {0},
       {{1, With(User(1), [](Params& p) { p.not_before = 100; }), Tasks({101})}},
       {},
       {},
       {},
       0,
       99,
       std::nullopt},
      {"its time has come",
       {0},
       {{1, With(User(1), [](Params& p) { p.not_before = 100; }), Tasks({101})}},
       {},
       {},
       {},
       0,
       100,
       101},
      {"a GPU the job may not use",
       {0, 1},
       {{1, With(User(1), [](Params& p) { p.gpus = {1}; }), Tasks({101})}},
       {},
       {},
       {},
       0,
       10,
       std::nullopt},
      {"max_gpus reached: the next job",
       {0, 1},
       {{1, With(User(1), [](Params& p) { p.max_gpus = 1; }), Tasks({101, 102})},
        {2, User(1), Tasks({201})}},
       {{1, 1, 10}},
       {},
       {},
       0,
       10,
       201},
      {"max_gpus: free again once its task ended",
       {0},
       {{1, With(User(1), [](Params& p) { p.max_gpus = 1; }), Tasks({101, 102})}},
       {{0, 1, 10}},
       {},
       {},
       0,
       20,
       101,
       /*after_end=*/true},
      {"a drained GPU takes nothing",
       {0},
       {{1, User(1), Tasks({101})}},
       {},
       {},
       {0},
       0,
       10,
       std::nullopt},
      {"longest-first: the most work first",
       {0},
       {{1,
         With(User(1), [](Params& p) { p.longest_first = true; }),
         {{11, 1, 1, 10}, {12, 2, 2, 30}, {13, 3, 3, 20}}}},
       {},
       {},
       {},
       0,
       10,
       12},
      {"rank order: a task too long to start last starts now (2 GPUs)",
       {0, 1},
       {{1, User(1), {{11, 1, 1, 1}, {12, 2, 2, 1}, {13, 3, 3, 10}}}},
       {},
       {},
       {},
       0,
       10,
       13},  // the rest (2) over 2 GPUs is less than 10
      {"rank order: on one GPU order cannot shorten the job",
       {0},
       {{1, User(1), {{11, 1, 1, 1}, {12, 2, 2, 1}, {13, 3, 3, 10}}}},
       {},
       {},
       {},
       0,
       10,
       11},
      {"rank order: a long task that may still start last waits its turn",
       {0, 1},
       {{1, User(1), {{11, 1, 1, 5}, {12, 2, 2, 5}, {13, 3, 3, 5}, {14, 4, 4, 6}}}},
       {},
       {},
       {},
       0,
       10,
       11},  // the rest (15) over 2 GPUs is not less than 6
      // Per-user GPU cap: user 1 (ahead in fair share: user 2 used 1e6 s) runs one task.
      {"user cap: a user at it is passed over, another's work runs",
       {0, 1},
       {{1, User(1), Tasks({101, 102})}, {2, User(2), Tasks({201})}},
       {{0, 1, 10}},
       {{2, 1e6}},
       {},
       1,
       20,
       201,
       false,
       /*user_gpu_cap=*/1},
      {"user cap: over all of the user's jobs",
       {0, 1},
       {{1, User(1), Tasks({101})}, {3, User(1), Tasks({301})}, {2, User(2), Tasks({201})}},
       {{0, 1, 10}},
       {{2, 1e6}},
       {},
       1,
       20,
       201,
       false,
       /*user_gpu_cap=*/1},
      {"user cap: nobody else waiting, the GPU stays free",
       {0, 1},
       {{1, User(1), Tasks({101, 102})}},
       {{0, 1, 10}},
       {},
       {},
       1,
       20,
       std::nullopt,
       false,
       /*user_gpu_cap=*/1},
      {"user cap: below it the user runs",
       {0, 1},
       {{1, User(1), Tasks({101, 102})}, {2, User(2), Tasks({201})}},
       {{0, 1, 10}},
       {{2, 1e6}},
       {},
       1,
       20,
       101,
       false,
       /*user_gpu_cap=*/2},
      {"user cap: once her task ended she runs again",
       {0, 1},
       {{1, User(1), Tasks({101, 102})}},
       {{0, 1, 10}},
       {},
       {},
       0,
       20,
       101,
       /*after_end=*/true,
       /*user_gpu_cap=*/1},
  };
  for (const auto& c : cases) {
    QueuePolicy p = Build(c);
    const auto got = c.after_end ? p.PickAfterEnd(c.gpu, c.now) : p.Pick(c.gpu, c.now);
    EXPECT_EQ(got, c.expected) << c.name;
  }
}

// Who is ahead of a user in fair share, and why: the users Pick serves first whose work may
// start now, in Pick's order. (The reason `status` gives a waiting job: job_reason.cpp.)
TEST(QueuePolicy, SaysWhoIsAheadAndWhy) {
  using Ahead = std::vector<std::pair<uint32_t, std::string>>;
  struct Case {
    std::string name;
    PickCase setup;  // its gpus, jobs, running, usage, user_gpu_cap, now
    uint32_t uid;    // who asks
    Ahead expected;
  };
  const std::string less = "less GPU time lately";
  const std::string fewer = "as much GPU time lately and fewer tasks running";
  const std::string lower = "as much GPU time lately and as many tasks running: a lower uid";
  const std::vector<Case> cases = {
      {"less usage is ahead, more is not",
       {"",
        {0},
        {{1, User(1), Tasks({101})}, {2, User(2), Tasks({201})}, {3, User(3), Tasks({301})}},
        {},
        {{1, 100}, {2, 50}, {3, 200}},
        {},
        0,
        10,
        std::nullopt},
       1,
       {{2, less}}},
      {"in Pick's order: the least usage first",
       {"",
        {0},
        {{1, User(1), Tasks({101})}, {2, User(2), Tasks({201})}, {3, User(3), Tasks({301})}},
        {},
        {{1, 100}, {2, 50}, {3, 10}},
        {},
        0,
        10,
        std::nullopt},
       1,
       {{3, less}, {2, less}}},
      {"a tie in usage: fewer running tasks first",
       {"",
        {0, 1},
        {{1, User(1), Tasks({101})}, {2, User(2), Tasks({201})}, {3, User(3), Tasks({301, 302})}},
        {{1, 3, 10}},
        {},
        {},
        1,
        10,
        std::nullopt},
       3,
       {{1, fewer}, {2, fewer}}},
      {"then the lower uid",
       {"",
        {0},
        {{1, User(1), Tasks({101})}, {2, User(2), Tasks({201})}},
        {},
        {},
        {},
        0,
        10,
        std::nullopt},
       2,
       {{1, lower}}},
      {"a user whose running task has taken GPU time is behind",
       {"",
        {0, 1},
        {{1, User(1), Tasks({101})}, {2, User(2), Tasks({201, 202})}},
        {{1, 2, 10}},
        {},
        {},
        1,
        100,
        std::nullopt},
       2,
       {{1, less}}},
      {"work that may not start now is not ahead (cancelled, not yet, at its max)",
       {"",
        {0, 1},
        {{1, With(User(1), [](Params& p) { p.paused = true; }), Tasks({101})},
         {2, With(User(2), [](Params& p) { p.not_before = 1000; }), Tasks({201})},
         {3, With(User(3), [](Params& p) { p.max_gpus = 1; }), Tasks({301, 302})},
         {4, User(4), Tasks({401})}},
        {{1, 3, 10}},
        {{1, 0}, {2, 0}, {3, 0}, {4, 1000}},
        {},
        1,
        10,
        std::nullopt},
       4,
       {}},
      {"a user at the per-user cap is not ahead",
       {"",
        {0, 1},
        {{1, User(1), Tasks({101, 102})}, {2, User(2), Tasks({201})}},
        {{1, 1, 10}},
        {{1, 0}, {2, 1000}},
        {},
        1,
        10,
        std::nullopt,
        false,
        1},
       2,
       {}},
  };
  for (const auto& c : cases) {
    QueuePolicy p = Build(c.setup);
    Ahead got;
    for (const auto& a : p.UsersAhead(c.uid, c.setup.now)) got.emplace_back(a.uid, a.why);
    EXPECT_EQ(got, c.expected) << c.name;
    // The first ahead is whom a free GPU goes to (when one is free).
    for (int g : c.setup.gpus) {
      auto picked = p.Pick(g, c.setup.now);
      if (!picked || c.expected.empty()) continue;
      EXPECT_EQ(static_cast<uint32_t>(*picked / 100), c.expected.front().first) << c.name;
    }
  }
}

TEST(QueuePolicy, UsageDecaysWithTheHalfLife) {
  QueuePolicy p({0}, /*half_life_s=*/100);
  p.Charge(1, 80, /*now=*/1000);
  EXPECT_DOUBLE_EQ(p.EffectiveUsage(1, 1000), 80);
  EXPECT_DOUBLE_EQ(p.EffectiveUsage(1, 1100), 40);
  p.Charge(1, 10, 1100);  // 40 decayed + 10
  EXPECT_DOUBLE_EQ(p.UsageOf(1).usage, 50);
  EXPECT_DOUBLE_EQ(p.UsageOf(1).updated_at, 1100);
  EXPECT_DOUBLE_EQ(p.EffectiveUsage(1, 1300), 12.5);
  EXPECT_DOUBLE_EQ(p.EffectiveUsage(2, 1300), 0);  // no account
}

TEST(QueuePolicy, CountsQueuedAndRunningAndKnowsTheNextStartTime) {
  QueuePolicy p({0, 1, 2}, 3600);
  Params late = User(1);
  late.not_before = 500;
  p.AddJob(1, User(1));
  p.AddJob(2, late);
  for (const auto& t : Tasks({101, 102, 103})) p.Enqueue(1, t);
  p.Enqueue(1, Tasks({101})[0]);  // again: no change
  p.Enqueue(2, Tasks({201})[0]);
  EXPECT_EQ(p.queued_total(), 4u);
  EXPECT_EQ(p.Queued(1), 3u);
  EXPECT_EQ(p.QueuedTasks(1), (std::vector<int64_t>{101, 102, 103}));
  EXPECT_DOUBLE_EQ(p.NextNotBefore(100), 500);
  EXPECT_DOUBLE_EQ(p.NextNotBefore(500), 0);

  p.Dequeue(1, Tasks({101})[0]);
  p.Started(0, 1, 10);
  EXPECT_EQ(p.Running(1), 1);
  EXPECT_FALSE(p.RemoveJob(1));  // still has work
  p.Dequeue(1, Tasks({102})[0]);
  p.Dequeue(1, Tasks({103})[0]);
  p.Dequeue(1, Tasks({103})[0]);  // again: no change
  EXPECT_EQ(p.queued_total(), 1u);
  p.Stopped(0);
  EXPECT_EQ(p.Running(1), 0);
  EXPECT_TRUE(p.RemoveJob(1));
  EXPECT_EQ(p.Params(1), nullptr);

  // GpusOf: not drained, allowed, capped.
  Params some = User(2);
  some.gpus = {1, 2};
  some.max_gpus = 5;
  p.AddJob(3, some);
  EXPECT_EQ(p.GpusOf(3), 2);
  p.SetDrained(2, true);
  EXPECT_EQ(p.GpusOf(3), 1);
  EXPECT_EQ(p.GpusOf(2), 2);
}

TEST(QueuePolicy, UpdateJobMovesItBetweenPrioritiesAndHolds) {
  QueuePolicy p({0}, 3600);
  p.AddJob(1, User(1, 0));
  p.AddJob(2, User(1, 0));
  p.Enqueue(1, Tasks({101})[0]);
  p.Enqueue(2, Tasks({201})[0]);
  EXPECT_EQ(p.Pick(0, 10), 101);
  p.UpdateJob(2, User(1, 9));  // boosted
  EXPECT_EQ(p.Pick(0, 10), 201);
  Params cancelled = User(1, 9);
  cancelled.paused = true;
  p.UpdateJob(2, cancelled);
  EXPECT_EQ(p.Pick(0, 10), 101);
  p.UpdateJob(2, User(1, 9));  // revived (a retry)
  EXPECT_EQ(p.Pick(0, 10), 201);
  EXPECT_EQ(p.NextNotBefore(0), 0);
}

}  // namespace
}  // namespace ckprof
