// GpuBoard's decisions (daemon/gpu_board.h), without a Scheduler: host locks, foreign processes
// under each foreign_gpu_use, health (device errors in a row -> suspect -> drained, with the
// failed tasks to run again), an admin's drain, and a remote executor's slots.
#include "daemon/gpu_board.h"

#include <gtest/gtest.h>

#include <asio.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/file_lock.h"
#include "util/files.h"

using ckprof::testing::TempDir;

namespace ckprof {
namespace {

using Kind = Outcome::Kind;

// A cheap probe whose processes the test sets (the board asks it at once, on this thread).
class BoardProbe final : public GpuProbe {
 public:
  bool cheap() const override { return true; }
  std::string Describe() const override { return "fake"; }
  Result<std::map<int, std::vector<ProbedProcess>>> Processes() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::this_thread::get_id() == board_thread_) ++looks_;  // not the watch's own polls
    return procs_;
  }
  // How often the board looked (on the test's thread).
  int looks() {
    std::lock_guard<std::mutex> lock(mu_);
    return looks_;
  }
  std::map<int, GpuState> Identities() override {
    return {{0, GpuState{"Fake GPU", "uuid-0", "gfx942", "fake 1.0", {}, {}}},
            {1, GpuState{"Fake GPU", "uuid-1", "gfx942", "fake 1.0", {}, {}}}};
  }
  std::map<int, GpuReading> Readings() override { return {}; }
  void Use(int gpu, int64_t pid, int64_t pgid, bool ours) {
    std::lock_guard<std::mutex> lock(mu_);
    ProbedProcess p;
    p.user = GpuUser{pid, 1001, "alice", "python3 train.py"};
    p.pgid = pgid;
    p.ours = ours;
    procs_[gpu].push_back(p);
  }

 private:
  std::mutex mu_;
  std::map<int, std::vector<ProbedProcess>> procs_;
  const std::thread::id board_thread_ = std::this_thread::get_id();  // the test's
  int looks_ = 0;  // the board's, on the test's thread
};

BoardOptions Options(ForeignGpuUse use, int health_failures = 3) {
  BoardOptions o;
  o.foreign_gpu_use = use;
  o.health_failures = health_failures;
  return o;
}

// A process on GPU 0 under each foreign_gpu_use: whether GPU 0 may take a task, why not, and
// whether the run it then joins is marked contended.
TEST(GpuBoard, ForeignProcessesUnderEachMode) {
  struct Case {
    const char* name;
    ForeignGpuUse use;
    bool ours;  // the process is in one of our runs' cgroups
    bool may_start;
    GpuWait why;
    size_t contended;
  } cases[] = {
      {"wait: a foreign process holds the GPU", ForeignGpuUse::kWait, false, false,
       GpuWait::kForeign, 0},
      {"flag: the task runs, marked contended", ForeignGpuUse::kFlag, false, true,
       GpuWait::kForeign, 1},
      {"ignore: nobody looks", ForeignGpuUse::kIgnore, false, true, GpuWait::kNone, 0},
      {"wait: our own process is not foreign", ForeignGpuUse::kWait, true, true, GpuWait::kNone, 0},
  };
  for (const auto& c : cases) {
    asio::io_context io;
    auto probe = std::make_unique<BoardProbe>();
    probe->Use(0, 4242, 4242, c.ours);
    GpuWatch watch(io.get_executor(), std::move(probe), std::chrono::milliseconds(1000),
                   [](GpuSnapshot) {});
    LocalGpuBoard board({0, 1}, "", Options(c.use));
    board.AttachWatch(&watch);
    EXPECT_EQ(board.MayStart(0).ok, c.may_start) << c.name;
    EXPECT_EQ(board.WhyNot(0), c.why) << c.name;
    EXPECT_TRUE(board.MayStart(1).ok) << c.name;  // nobody on GPU 1
    EXPECT_EQ(board.ModelOf(1), "Fake GPU") << c.name;
    if (c.may_start) {
      board.NoteStart(0);
      EXPECT_EQ(board.EndContext(0).contended.size(), c.contended) << c.name;
    }
    GpuInfo info;
    board.Describe(0, &info);
    EXPECT_EQ(info.foreign.size(), c.why == GpuWait::kForeign ? 1u : 0u) << c.name;
  }
}

// The running task's own process group on its GPU is not foreign to it (nor to the next
// start's check): its handle is known.
TEST(GpuBoard, TheRunningTasksGroupIsNotForeign) {
  asio::io_context io;
  auto probe = std::make_unique<BoardProbe>();
  BoardProbe* p = probe.get();
  GpuWatch watch(io.get_executor(), std::move(probe), std::chrono::milliseconds(1000),
                 [](GpuSnapshot) {});
  LocalGpuBoard board({0}, "", Options(ForeignGpuUse::kWait));
  board.AttachWatch(&watch);
  ASSERT_TRUE(board.MayStart(0).ok);
  board.NoteStart(0);
  board.NoteHandle(0, 777);
  p->Use(0, 778, 777, false);  // a child of the run, in no cgroup of ours
  EXPECT_TRUE(board.MayStart(0).ok);
  EXPECT_TRUE(board.EndContext(0).contended.empty());
}

// A task's end looks at the GPUs' processes (its last look); the next start on that GPU, right
// after it in the same handler, is checked against that look instead of a second one. A start
// after no end looks again.
TEST(GpuBoard, ATasksEndLookServesTheNextStartRightAfterIt) {
  asio::io_context io;
  auto probe = std::make_unique<BoardProbe>();
  BoardProbe* p = probe.get();
  GpuWatch watch(io.get_executor(), std::move(probe), std::chrono::milliseconds(1000),
                 [](GpuSnapshot) {});
  LocalGpuBoard board({0, 1}, "", Options(ForeignGpuUse::kWait));
  board.AttachWatch(&watch);
  const int first = p->looks();
  ASSERT_TRUE(board.MayStart(0).ok);
  EXPECT_EQ(p->looks(), first + 1) << "a start with no end before it looks";
  board.NoteStart(0);
  const auto ended = std::chrono::steady_clock::now();
  board.EndContext(0);
  EXPECT_EQ(p->looks(), first + 2) << "a task's end looks";
  EXPECT_TRUE(board.MayStart(0).ok);
  if (std::chrono::steady_clock::now() - ended < std::chrono::milliseconds(1)) {
    EXPECT_EQ(p->looks(), first + 2) << "the next start right after the end looked again";
  }
}

// Another daemon's host lock: the GPU waits (ask again shortly), then takes it once it is
// free; an idle GPU lets its lock go.
TEST(GpuBoard, HostLocksWaitForTheirHolder) {
  TempDir dir;
  LocalGpuBoard board({0, 1}, dir.path(), Options(ForeignGpuUse::kWait));
  LockAttempt other = FileLock::TryAcquire(dir.File("gpu0.lock"), 0644);
  ASSERT_TRUE(other.lock.has_value()) << other.error;
  const Admission a = board.MayStart(0);
  EXPECT_FALSE(a.ok);
  EXPECT_GT(a.retry_after.count(), 0);
  EXPECT_EQ(board.WhyNot(0), GpuWait::kLocked);
  GpuInfo info;
  board.Describe(0, &info);
  EXPECT_NE(info.held_by, "");
  EXPECT_TRUE(board.MayStart(1).ok);  // its own lock taken
  EXPECT_TRUE(FileLock::TryAcquire(dir.File("gpu1.lock"), 0644).busy);
  other.lock.reset();
  EXPECT_TRUE(board.MayStart(0).ok);
  EXPECT_EQ(board.WhyNot(0), GpuWait::kNone);
  board.NoteStart(0);
  board.ReleaseIdle();  // GPU 1 runs nothing: its lock goes; GPU 0's stays
  EXPECT_FALSE(FileLock::TryAcquire(dir.File("gpu1.lock"), 0644).busy);
  EXPECT_TRUE(FileLock::TryAcquire(dir.File("gpu0.lock"), 0644).busy);
}

// Health: runs' ends in order on GPUs 0..2 (health_failures 2), and what the board decides
// after the last one.
TEST(GpuBoard, HealthFailuresDrainAndRequeue) {
  struct End {
    int gpu;
    int64_t job, task;
    bool device_error;
    Kind outcome = Kind::kFailed;
  };
  struct Case {
    const char* name;
    int health_failures;
    std::vector<End> ends;
    // After the last end:
    std::vector<std::pair<int, bool>> drained;  // the decision's drained changes
    std::vector<BoardDecision::Requeue> requeue;
    std::vector<int> drained_now;  // GPUs drained (for the policy) after all ends
  };
  const Case cases[] = {
      {"one device error: nothing yet", 2, {{0, 1, 10, true}}, {}, {}, {}},
      {"two in a row: GPU 0 is suspect (taken out)",
       2,
       {{0, 1, 10, true}, {0, 1, 11, true}},
       {{0, true}},
       {},
       {0}},
      {"then a success on GPU 1: GPU 0 drained, its failed tasks requeued",
       2,
       {{0, 1, 10, true}, {0, 2, 20, true}, {1, 1, 12, false, Kind::kSucceeded}},
       {},
       {{0, 1, {10}}, {0, 2, {20}}},
       {0}},
      {"a success between errors starts the count again",
       2,
       {{0, 1, 10, true}, {0, 1, 11, false, Kind::kSucceeded}, {0, 1, 12, true}},
       {},
       {},
       {}},
      {"a plain failure (no device error) is not counted nor clears",
       2,
       {{0, 1, 10, true}, {0, 1, 11, false, Kind::kFailed}, {0, 1, 12, true}},
       {{0, true}},
       {},
       {0}},
      {"every GPU failing: the profiler, not a GPU; the suspects are let go",
       2,
       {{0, 1, 10, true}, {0, 1, 11, true}, {1, 1, 12, true}, {1, 1, 13, true}, {2, 1, 14, true}},
       {{0, false}, {1, false}},
       {},
       {}},
      {"health off: nothing is counted", 0, {{0, 1, 10, true}, {0, 1, 11, true}}, {}, {}, {}},
  };
  for (const auto& c : cases) {
    LocalGpuBoard board({0, 1, 2}, "", Options(ForeignGpuUse::kIgnore, c.health_failures));
    BoardDecision last;
    for (const End& e : c.ends) {
      board.NoteStart(e.gpu);
      last = board.NoteEnd(
          e.gpu, EndOnGpu{e.job, e.task, e.outcome, e.device_error ? "HIP runtime error" : ""});
    }
    EXPECT_EQ(last.drained, c.drained) << c.name;
    ASSERT_EQ(last.requeue.size(), c.requeue.size()) << c.name;
    for (size_t i = 0; i < c.requeue.size(); ++i) {
      EXPECT_EQ(last.requeue[i].gpu, c.requeue[i].gpu) << c.name;
      EXPECT_EQ(last.requeue[i].job_id, c.requeue[i].job_id) << c.name;
      EXPECT_EQ(last.requeue[i].task_ids, c.requeue[i].task_ids) << c.name;
    }
    std::vector<int> drained_now;
    for (int g : board.gpus()) {
      if (board.Drained(g)) drained_now.push_back(g);
    }
    EXPECT_EQ(drained_now, c.drained_now) << c.name;
    for (int g : drained_now) {
      EXPECT_EQ(board.WhyNot(g), GpuWait::kDrained) << c.name;
      EXPECT_FALSE(board.MayStart(g).ok) << c.name;
      GpuInfo info;
      board.Describe(g, &info);
      EXPECT_NE(info.drain_reason, "") << c.name;
    }
    // Its health's drains last (a suspect's does not), in ckprofd's name.
    for (const DrainRecord& r : board.Drains()) {
      EXPECT_EQ(r.by, "ckprofd") << c.name;
      EXPECT_NE(std::find(drained_now.begin(), drained_now.end(), r.gpu), drained_now.end());
    }
  }
}

// An admin's drain and resume; a suspect left with no GPU that could clear it is let go.
TEST(GpuBoard, AdminDrainAndResume) {
  LocalGpuBoard board({0, 1}, "", Options(ForeignGpuUse::kIgnore, 1));
  EXPECT_FALSE(board.SetDrained(1, false, "root", "").ok());  // not drained
  EXPECT_FALSE(board.SetDrained(7, true, "root", "").ok());   // no such GPU
  auto d = board.SetDrained(1, true, "root", "fan noise");
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->drained, (std::vector<std::pair<int, bool>>{{1, true}}));
  EXPECT_FALSE(d->dispatch);
  GpuInfo info;
  board.Describe(1, &info);
  EXPECT_EQ(info.drain_reason, "drained by root: fan noise");
  EXPECT_EQ(info.drained_by, "root");
  EXPECT_GT(info.drained_at, 0);
  // The drain that lasts: what the Store keeps; put back on a board of a new daemon.
  const std::vector<DrainRecord> drains = board.Drains();
  ASSERT_EQ(drains.size(), 1u);
  EXPECT_EQ(drains[0].gpu, 1);
  EXPECT_EQ(drains[0].by, "root");
  EXPECT_EQ(drains[0].reason, "drained by root: fan noise");
  {
    LocalGpuBoard again({0, 1}, "", Options(ForeignGpuUse::kIgnore, 1));
    auto r = again.RestoreDrain(drains[0]);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->drained, (std::vector<std::pair<int, bool>>{{1, true}}));
    EXPECT_TRUE(again.Drained(1));
    EXPECT_EQ(again.Drains(), drains);
    EXPECT_FALSE(again.RestoreDrain(DrainRecord{5, "root", 1, "x"}).ok());  // no such GPU
  }
  // GPU 0 fails once (health_failures 1): suspect, and no GPU is left that could clear it.
  board.NoteStart(0);
  BoardDecision e = board.NoteEnd(0, EndOnGpu{1, 10, Kind::kCrashed, "HIP runtime error"});
  EXPECT_EQ(e.drained, (std::vector<std::pair<int, bool>>{{0, true}, {0, false}}));
  EXPECT_TRUE(e.dispatch);
  EXPECT_FALSE(board.Drained(0));
  EXPECT_EQ(board.Drains(), drains);  // a suspect's drain does not last
  d = board.SetDrained(1, false, "root", "");
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_TRUE(d->dispatch);
  EXPECT_FALSE(board.Drained(1));
}

// A remote executor's slots: always free to take a task, never drained here (the refusal is
// the executor's advice), a slot more when adopted runs outnumber them.
TEST(GpuBoard, SlotBoard) {
  SlotBoard board({0, 1}, "drain a node in the cluster");
  EXPECT_TRUE(board.MayStart(0).ok);
  board.NoteStart(0);
  EXPECT_TRUE(
      board.NoteEnd(0, EndOnGpu{1, 10, Kind::kCrashed, "HIP runtime error"}).drained.empty());
  auto d = board.SetDrained(0, true, "root", "");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error(), "drain a node in the cluster");
  EXPECT_EQ(board.WhyNot(1), GpuWait::kNone);
  EXPECT_EQ(board.AddSlot(), 2);
  EXPECT_TRUE(board.Has(2));
}

}  // namespace
}  // namespace ckprof
