// GpuBoard: what ckprofd knows of each GPU it drives (or each slot of a remote executor)
// besides the task that runs there: whether a GPU may take a task now and why not, what a run's
// end says of its GPU, and what was seen on it. The Scheduler owns the tasks and their runs;
// the board owns the GPUs' own state.
//
// It answers with decisions, as LevelDB's VersionSet answers PickCompaction: MayStart(gpu)
// says whether a task may start there (or when to ask again), NoteEnd(...) says which GPUs are
// drained or resumed and which tasks a drained GPU failed are to run again, WhyNot(gpu) says
// why a GPU takes nothing. The Scheduler applies them (the QueuePolicy's drained GPUs, the
// requeues, its dispatch, its timers): the board never calls back into the Scheduler.
//
// Two boards:
//  - LocalGpuBoard (this host's GPUs): the host locks (daemon/file_lock.h, gpu<N>.lock in
//    lock_dir, shared by every ckprofd of the host), the foreign processes and GPU state that a
//    GpuWatch sees (foreign_gpu_use), and health: a GPU whose runs end with health_failures
//    device errors in a row (DeviceErrorIn, daemon/gpu_health.h) is suspect, and takes no task;
//    once another GPU shows the profiler works it is drained and the tasks it failed run again
//    elsewhere; when every GPU that could show it fails, the suspects are let go again (the
//    profiler or the driver, not a GPU).
//  - SlotBoard (a remote executor's slots, Launcher::Remote): no locks, no watch, no health; a
//    slot always may take a task; an admin's drain is refused with the executor's advice.
//
// Single-threaded: the Scheduler's, on the daemon's io thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/outcome.h"
#include "common/protocol.h"
#include "common/result.h"
#include "daemon/file_lock.h"
#include "daemon/gpu_watch.h"
#include "daemon/run_result.h"
#include "daemon/store.h"

namespace ckprof {

// What a GPU does while a process that is none of ours uses it (DaemonConfig::foreign_gpu_use).
enum class ForeignGpuUse { kWait, kFlag, kIgnore };

// The board's settings that may change while the daemon runs (SIGHUP).
struct BoardOptions {
  ForeignGpuUse foreign_gpu_use = ForeignGpuUse::kWait;
  double foreign_poll_s = 0.5;  // a watch's snapshot older than twice this is renewed
  // Device errors in a row that make a GPU suspect (then drained, see above). 0 = never.
  int health_failures = 3;
};

// What the Scheduler carries out after a change on the board.
struct BoardDecision {
  // GPUs whose drained state changed, and to what: the QueuePolicy is told.
  std::vector<std::pair<int, bool>> drained;
  // Tasks (final, failed on `gpu`) of one job that run again elsewhere: `gpu` was drained for
  // its device errors. The Scheduler requeues them unless their job has ended.
  struct Requeue {
    int gpu = -1;
    int64_t job_id = 0;
    std::vector<int64_t> task_ids;
  };
  std::vector<Requeue> requeue;
  bool dispatch = false;  // a GPU may take work that it could not before
  bool changed = false;   // what `gpus` shows changed
};

// Whether a GPU may take a task now.
struct Admission {
  bool ok = true;
  // Not ok: ask again after this long (another daemon holds its host lock); 0 = the board
  // asks for what it waits for itself (a GPU watch's snapshot, which dispatches) or it waits
  // for a change the Scheduler makes (a drain, a foreign process that leaves).
  std::chrono::milliseconds retry_after{0};
};

// Why a GPU takes no task (besides running one): the first that holds.
enum class GpuWait {
  kNone,     // it may take one
  kDrained,  // by an admin, or for its health (suspect or drained)
  kForeign,  // a foreign process uses it (foreign_gpu_use "wait")
  kLocked,   // another daemon holds its host lock
};

// A run's end as it concerns its GPU.
struct EndOnGpu {
  int64_t job_id = 0, task_id = 0;
  Outcome::Kind outcome = Outcome::Kind::kSucceeded;
  std::string device_error;  // the line naming a device error (DeviceErrorIn); "" = none
};

class GpuBoard {
 public:
  virtual ~GpuBoard() = default;

  // The GPUs (slots) it has, in order.
  const std::vector<int>& gpus() const { return gpus_; }
  bool Has(int gpu) const;
  virtual bool Drained(int gpu) const = 0;

  // Settings changed (SIGHUP); health turned off lets the suspects go.
  virtual BoardDecision UpdateOptions(const BoardOptions& options) = 0;

  // A dispatch pass begins and ends: within one pass a cheap probe is asked once for all GPUs.
  virtual void BeginPass() {}
  virtual void EndPass() {}
  // Whether `gpu` may take a task now: for a local GPU, no foreign process on it under "wait"
  // (a cheap probe asked now, else the watch's snapshot, renewed first when it is stale) and
  // its host lock taken (kept until ReleaseIdle finds it idle).
  virtual Admission MayStart(int gpu) = 0;
  // No task waits for `gpu` now: it waits for no lock either.
  virtual void NothingWaits(int gpu) { (void)gpu; }
  // Lets other daemons have the host locks of the GPUs that run nothing of ours.
  virtual void ReleaseIdle() {}

  // A task starts on `gpu`; its run's process group (or a remote run's handle) once known; what
  // was seen of the GPU while it ran (read at its end; call before NoteEnd); its end.
  virtual void NoteStart(int gpu) = 0;
  virtual void NoteHandle(int gpu, int64_t handle) = 0;
  virtual RunContext EndContext(int gpu) = 0;
  virtual BoardDecision NoteEnd(int gpu, const EndOnGpu& end) = 0;

  // An admin drains or resumes `gpu` (`by`: who; `reason`: why, "" = not said). An error says
  // why not (no such GPU, not drained, a remote executor's slots).
  virtual Result<BoardDecision> SetDrained(int gpu, bool drained, const std::string& by,
                                           const std::string& reason) = 0;
  // The drains that last (an admin's, and those for a GPU's health; not a suspect's), as the
  // Store keeps them across restarts; and one of them put back at a start.
  virtual std::vector<DrainRecord> Drains() const { return {}; }
  virtual Result<BoardDecision> RestoreDrain(const DrainRecord& drain) = 0;
  virtual GpuWait WhyNot(int gpu) const = 0;
  // Fills what the board knows of `gpu` into `info` (drained and why, who holds its lock, the
  // foreign processes, its model and reading).
  virtual void Describe(int gpu, GpuInfo* info) const = 0;
  // Its model's name, "" when unknown.
  virtual std::string ModelOf(int gpu) const = 0;

  // The GPU watch (null: nobody watches). See Scheduler::AttachGpuWatch.
  virtual void AttachWatch(GpuWatch* watch) { (void)watch; }
  virtual void OnSnapshot(GpuSnapshot snapshot) { (void)snapshot; }
  // Looks at the GPUs now when the probe is cheap.
  virtual void Refresh() {}
  // The watch polls while tasks run or a GPU waits for a foreign process.
  virtual void UpdateWatch() {}

  // A slot more (a remote executor's runs adopted at a restart outnumber its slots): its index.
  int AddSlot();

 protected:
  explicit GpuBoard(std::vector<int> gpus) : gpus_(std::move(gpus)) {}
  virtual void OnSlotAdded(int gpu) { (void)gpu; }
  std::vector<int> gpus_;
};

// A remote executor's slots. `drain_refusal`: what an admin's drain is told (the executor's
// own way to drain, Launcher::DrainAdvice).
class SlotBoard final : public GpuBoard {
 public:
  SlotBoard(std::vector<int> slots, std::string drain_refusal)
      : GpuBoard(std::move(slots)), drain_refusal_(std::move(drain_refusal)) {}
  bool Drained(int) const override { return false; }
  BoardDecision UpdateOptions(const BoardOptions&) override { return {}; }
  Admission MayStart(int) override { return {}; }
  void NoteStart(int) override {}
  void NoteHandle(int, int64_t) override {}
  RunContext EndContext(int) override { return {}; }
  BoardDecision NoteEnd(int, const EndOnGpu&) override { return {}; }
  Result<BoardDecision> SetDrained(int, bool, const std::string&, const std::string&) override {
    return MakeError(drain_refusal_);
  }
  Result<BoardDecision> RestoreDrain(const DrainRecord&) override {
    return MakeError(drain_refusal_);
  }
  GpuWait WhyNot(int) const override { return GpuWait::kNone; }
  void Describe(int, GpuInfo*) const override {}
  std::string ModelOf(int) const override { return ""; }

 private:
  std::string drain_refusal_;
};

// This host's GPUs. `lock_dir`: where the host locks are ("" = none); fixed for its life.
class LocalGpuBoard final : public GpuBoard {
 public:
  LocalGpuBoard(std::vector<int> gpus, std::string lock_dir, BoardOptions options);
  ~LocalGpuBoard() override;

  bool Drained(int gpu) const override;
  BoardDecision UpdateOptions(const BoardOptions& options) override;
  void BeginPass() override;
  void EndPass() override;
  Admission MayStart(int gpu) override;
  void NothingWaits(int gpu) override;
  void ReleaseIdle() override;
  void NoteStart(int gpu) override;
  void NoteHandle(int gpu, int64_t handle) override;
  RunContext EndContext(int gpu) override;
  BoardDecision NoteEnd(int gpu, const EndOnGpu& end) override;
  Result<BoardDecision> SetDrained(int gpu, bool drained, const std::string& by,
                                   const std::string& reason) override;
  std::vector<DrainRecord> Drains() const override;
  Result<BoardDecision> RestoreDrain(const DrainRecord& drain) override;
  GpuWait WhyNot(int gpu) const override;
  void Describe(int gpu, GpuInfo* info) const override;
  std::string ModelOf(int gpu) const override;
  void AttachWatch(GpuWatch* watch) override;
  void OnSnapshot(GpuSnapshot snapshot) override;
  void Refresh() override;
  void UpdateWatch() override;

 private:
  struct Gpu {
    int index = 0;
    bool busy = false;         // a task of ours runs on it (NoteStart .. NoteEnd)
    int64_t run_group = 0;     // the running task's process group, once known
    bool drained = false;      // by an admin, or for its health (suspect too)
    std::string drain_reason;  // why, when drained (an admin, its health); "" while suspect
    std::string drained_by;    // who drained it ("ckprofd": its health); "" while suspect
    double drained_at = 0;     // when (unix seconds)
    // The host lock: held while it runs our tasks; who holds it while we wait for it; a user's
    // process holding it that we did not wait for (said once).
    std::optional<FileLock> host_lock;
    std::string lock_holder;
    std::string lock_ignored;
    // The watch's view: foreign processes on it now; those seen during the running task; what
    // it is; the latest reading and the one as the running task started.
    std::vector<GpuUser> foreign;
    std::vector<GpuUser> contended;
    GpuState identity;
    std::optional<GpuReading> reading;
    std::optional<GpuReading> before;
    // Health: device errors in a row, the tasks they ended (job, task), the last one's line,
    // and whether it is suspect (its count reached; drained until another GPU shows that the
    // profiler works).
    int device_errors = 0;
    std::vector<std::pair<int64_t, int64_t>> error_tasks;
    std::string last_device_error;
    bool suspect = false;
  };
  Gpu* Find(int gpu);
  const Gpu* Find(int gpu) const;
  void OnSlotAdded(int gpu) override;
  // The host lock, unless held already; false (the holder noted) when another process holds it.
  bool TakeHostLock(Gpu& gpu);
  // Whether foreign processes let the GPU take a task.
  bool ForeignAllows(Gpu& gpu);
  void ApplyProcesses(const std::map<int, std::vector<ProbedProcess>>& processes);
  std::optional<GpuReading> ReadNow(Gpu& gpu);
  // Lets the suspects go when no GPU could show the profiler working, or health is off; into
  // `d` (true when it did).
  bool ReleaseSuspects(BoardDecision& d);

  std::vector<Gpu> gpu_state_;
  std::string lock_dir_;
  BoardOptions options_;
  GpuWatch* watch_ = nullptr;
  bool in_pass_ = false;
  bool probed_in_pass_ = false;
  std::chrono::steady_clock::time_point snapshot_at_{};  // the latest snapshot's, or a probe's
  std::chrono::steady_clock::time_point end_look_at_{};  // EndContext's latest look
  bool snapshot_asked_ = false;                          // PollNow is under way
  std::string probe_error_;                              // the last one logged
  bool every_gpu_failing_ = false;                       // said in the log, until a run works again
};

}  // namespace ckprof
