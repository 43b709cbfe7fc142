// Service: ckprofd's request handlers — one per request kind, reached through one dispatch
// switch. It checks what the caller may do, converts submitted inputs (on a worker pool, so
// the io thread keeps serving), asks the Scheduler to act and answers with the request's typed
// reply (common/protocol.h). A `watch` is a subscription (Watch): the Server streams what it
// is told.
//
// Call Handle() and Watch() on the daemon's io thread; Handle resumes there.
#pragma once

#include <asio.hpp>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <variant>

#include "common/convert.h"
#include "common/protocol.h"
#include "daemon/daemon_config.h"
#include "daemon/fair_turn.h"
#include "daemon/io_budget.h"
#include "daemon/scheduler.h"

namespace ckprof {

class Service {
 public:
  // What a handler answers: its reply, or the refusal.
  using Refusal = ErrorReply;
  template <typename T>
  using Answer = std::variant<T, Refusal>;

  // `pool` runs conversions; `config` is read for policy (allowed roots, default profiler).
  Service(asio::any_io_executor io, asio::thread_pool& pool, Scheduler& scheduler,
          const DaemonConfig& config);

  ~Service();

  // The response frame (its JSON text and newline) to one request answered by one reply (not
  // a stream: Stream). One switch over the kinds, one handler each. A submit's payload is
  // left to the caller to free (ReleasePayload). A request of a user who has spent more than
  // their share of the io thread waits first (IoBudget), and its io-thread time is counted.
  // `client_gone`, when given, says whether the asking client has gone (its connection hung
  // up): a submit it left before its job was stored keeps nothing.
  asio::awaitable<std::string> Handle(const Request& request, const Identity& who,
                                      const std::function<bool()>& client_gone = {});

  // A stream's subscription (watch, log --follow): its watcher is told events until it is
  // destroyed (also after the Service is gone).
  class Subscription {
   public:
    ~Subscription() {
      if (*alive_) undo_();
    }
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

   private:
    friend class Service;
    Subscription(std::function<void()> undo, std::shared_ptr<bool> alive)
        : undo_(std::move(undo)), alive_(std::move(alive)) {}
    std::function<void()> undo_;  // unsubscribes; called only while the Service lives
    std::shared_ptr<bool> alive_;
  };
  struct Watching {
    nlohmann::json first;  // the stream's first frame: the job and its running tasks
    bool ended = false;    // the job had ended already: nothing will follow
    int64_t job_id = 0;    // the job followed (the stream's end frame names it)
    std::unique_ptr<Subscription> subscription;
  };
  // A request answered by a stream (StreamOf): subscribes `watcher` to what follows. The
  // first frame and `ended` are decided at the moment of subscribing, so that no event falls
  // between them (job_finished included).
  Result<Watching> Stream(const Request& request, JobWatcher* watcher);
  // `log J -f` of a large job that has ended: the stream's one frame, its whole log, made as
  // `log J`'s answer is (on the pool: made on the io thread, it held every other client for
  // seconds); nullopt for any other stream (Stream's). `refused`: the frame is a refusal.
  asio::awaitable<std::optional<std::string>> EndedLargeLog(const Request& request,
                                                            const Identity& who, bool* refused);
  // Resume the calling coroutine on the conversion pool, and back on the io thread: for work
  // that would stall every other client (a large frame's parse, a conversion).
  asio::awaitable<void> ToPool();
  asio::awaitable<void> ToIo();
  void set_config(const DaemonConfig& c) { config_ = c; }
  // Asked right before a submit is stored and again before it is acknowledged (after the
  // commit): an error refuses the submit with its text. The daemon's says whether the state
  // dir's files are still its own (StateGuard), and stops the daemon when not. Empty = none.
  std::function<Status()> check_state;

  // After a restart: hashes on the pool the profilers of the jobs not ended yet, with each
  // owner's rights, so that their runs are recorded for reuse and `best` (the cache of builds
  // lives in memory).
  void IdentifyRecoveredProfilers();

 private:
  // Watch: the job's events (error: no such job). FollowLog: a `log` with follow, the task's
  // output so far first, then (unless it has ended) its TaskLogEvent frames, the last marked
  // job_finished; with no task named, every task's (Scheduler::FollowJobLog), ended by the
  // job's job_finished event.
  Result<Watching> Watch(const Request& envelope, const WatchRequest& r, JobWatcher* watcher);
  Result<Watching> FollowLog(const Request& envelope, const LogRequest& r, JobWatcher* watcher);
  HelloReply HandleHello(const Identity& who) const;
  asio::awaitable<Answer<SubmitReply>> HandleSubmit(const SubmitRequest& r, const Identity& who,
                                                    const std::function<bool()>& client_gone);
  // status and list (`all`: finished jobs too).
  Answer<StatusReply> HandleStatus(const StatusRequest& r, const Identity& who, bool all) const;
  // The answer's frame: a large job's results are read and encoded on the pool, one request
  // at a time (results_turn_).
  asio::awaitable<std::string> HandleResults(const Request& envelope, const ResultsRequest& r,
                                             const Identity& who);
  // A cancel naming many tasks goes in parts (Scheduler::CancelTasks), each one's io-thread
  // time counted and the user's share waited for between them.
  asio::awaitable<Answer<JobReply>> HandleCancel(const CancelRequest& r, const Identity& who);
  Answer<JobReply> HandleRetry(const RetryRequest& r, const Identity& who);
  Answer<JobReply> HandleBoost(const BoostRequest& r, const Identity& who);
  // hold (`hold`) and release (ReleaseRequest is a HoldRequest).
  Answer<JobReply> HandleHold(const HoldRequest& r, const Identity& who, bool hold);
  Answer<JobReply> HandleEdit(const EditRequest& r, const Identity& who);
  // The answer's frame: a large job's whole log is made on the pool, as its results are.
  asio::awaitable<std::string> HandleLog(const Request& envelope, const LogRequest& r,
                                         const Identity& who, bool* refused = nullptr);
  // A large job's answer (results, whole log), made on the pool from its rows, read there
  // through a read-only connection (Store::ReadJobTasks), one such request at a time
  // (results_turn_): `on_turn` runs on the io thread once the turn is ours, then `make` turns
  // the job's summary (taken then) and its rows into the frame, on the pool (either failing:
  // a refusal saying why, and `refused` set). `what` names the request in the log and a
  // refusal.
  asio::awaitable<std::string> LargeJobAnswer(
      const Request& envelope, const Identity& who, int64_t job_id, const char* what,
      std::function<void()> on_turn,
      std::function<std::string(JobSummary, std::vector<TaskRecord>&)> make,
      bool* refused = nullptr);
  Answer<CleanReply> HandleClean(const CleanRequest& r, const Identity& who);
  // The tuning table: every problem's best measurement per profiler build and GPU model (only
  // `who`'s own when results are not shared and `who` is no admin), read on the pool through a
  // read-only connection (Store::ReadBest: a pass over every measurement), one such scan at a
  // time (usage_turn_).
  asio::awaitable<Answer<BestReply>> HandleBest(const BestRequest& r, const Identity& who);
  // usage (daemon/usage.cpp): everyone's, or one user's (`user`: a name or uid); the Store
  // is read on the pool.
  asio::awaitable<Answer<UsageReply>> HandleUsage(const UsageRequest& r, const Identity& who);
  GpusReply HandleGpus();
  // drain and resume.
  Answer<EmptyReply> HandleDrain(const DrainRequest& r, const Identity& who, bool drain);
  // HandleSubmit's parts, in its order: the options checked (conv and profiler filled in),
  // the input converted and its first task records made (on the pool), the profiler's builds
  // hashed for reuse and `best` (IdentifyProfiler, on the pool, with `who`'s rights), a dry
  // run's answer, the job's record, and the job stored in steps (StoreJob, yielding to other
  // requests between them).
  struct SubmitWork;
  std::optional<Refusal> CheckSubmit(const SubmitOptions& o, const Identity& who,
                                     ConvertOptions* conv, std::string* profiler) const;
  void ConvertSubmit(const SubmitOptions& o, const ConvertOptions& conv, const UserUse& use,
                     SubmitWork* w);
  void IdentifyProfiler(const std::string& profiler, const Identity& who);
  SubmitReply DryRunReply(const std::string& profiler, const std::vector<CkConfig>& configs) const;
  Result<JobRecord> MakeJob(const SubmitOptions& o, const Identity& who,
                            const std::string& profiler, InputFormat format) const;
  // The job and its tasks stored in steps: `first_records` are the first configs' task records
  // (MakeTaskRecords), the others are made on the pool a chunk ahead of the steps. A client
  // gone between steps (`client_gone`) ends it, nothing kept: kClientLeft. Each step takes
  // `who`'s step turn (TakeStepTurn), as a cancel's steps do.
  static constexpr std::string_view kClientLeft = "the client left before its job was stored";
  asio::awaitable<Result<int64_t>> StoreJob(JobRecord job, std::vector<CkConfig> configs,
                                            std::vector<TaskRecord> first_records,
                                            const Identity& who,
                                            const std::function<bool()>& client_gone);
  std::optional<JobSummary> SummaryOf(int64_t job_id) const;
  // Whether `who` may run the profiler at `path` through this daemon; the error says why not.
  // The daemon's own profiler_path (its config's, set by root), looked at as the daemon;
  // any other path a user names is looked at with her rights (daemon/acting_as.h).
  bool AdminsProfiler(const std::string& path) const;
  Status CheckProfilerPolicy(const std::string& path, const Identity& who) const;
  // A profiler path a user asks for (submit, retry), checked by policy and found: the path to
  // store (resolved where this daemon runs another user's profiler as itself).
  Result<std::string> AcceptProfiler(const std::string& profiler, const Identity& who) const;
  // The per-user limits (DaemonConfig's max_timeout and max_*_per_user), one rule for submit,
  // run, edit and retry. A per-task timeout `who` asks for (-1: the daemon's default, always
  // allowed): a plain user's is at most max_timeout, and never none (0) under one.
  Status CheckTimeout(double timeout_s, const Identity& who) const;
  // A whole-job time limit (submit --job-timeout; -1: the daemon's max_job_timeout): a plain
  // user's is at most max_job_timeout, and never none (0) under one.
  Status CheckJobTimeout(double job_timeout_s, const Identity& who) const;
  // `who`'s use (Scheduler::UseOf) and the limits that apply to them.
  UserUse UseAndLimits(const Identity& who) const;

  asio::any_io_executor io_;
  asio::thread_pool& pool_;
  Scheduler& scheduler_;
  DaemonConfig config_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Work on the pool that runs one request at a time, so that a user asking again and again
  // never takes every conversion thread: usage's scans of the Store and the tuning table's,
  // large jobs' results and logs. A request waits for its turn there, users taking turns
  // (FairTurn): one user's many requests do not queue ahead of another's one.
  FairTurn usage_turn_{io_}, results_turn_{io_};
  // Each user's share of the io thread (IoBudget): requests that do not go to the pool are
  // timed, and a user past their share waits on a timer before the next one is handled.
  IoBudget io_budget_;
  asio::awaitable<void> WaitForIoShare(const Identity& who);
  // Large work's next step waits (on a timer) while the database's log is behind its
  // checkpoints (Scheduler::LargeWorkWaits); how long it waited.
  asio::awaitable<std::chrono::steady_clock::duration> WaitForLog();
  // A user's turn for a step of a request handled in steps (a large submit's, a cancel naming
  // thousands of tasks): one step of each user at a time, whatever the number of their requests.
  // Without it, one user's 32 such cancels put 32 steps in every round of the io thread's queue,
  // and another user's request waited behind all of them at each of its turns (read, answer). Each
  // user's FairTurn lives while the user has a step under way or waiting.
  std::map<uid_t, std::unique_ptr<FairTurn>> step_turns_;
  class StepTurn {  // held: the user's turn, given to the next of their steps when it goes
   public:
    StepTurn(Service* service, uid_t uid) : service_(service), alive_(service->alive_), uid_(uid) {}
    StepTurn(StepTurn&& o) noexcept
        : service_(std::exchange(o.service_, nullptr)), alive_(o.alive_), uid_(o.uid_) {}
    StepTurn& operator=(StepTurn&&) = delete;
    ~StepTurn() {
      if (service_ && *alive_) service_->LeaveStepTurn(uid_);
    }

   private:
    Service* service_;
    std::shared_ptr<bool> alive_;
    uid_t uid_;
  };
  // Waits for the user's turn; `yield`: behind whatever the io thread has queued meanwhile, even
  // when the turn was free. Empty when the daemon is going away.
  asio::awaitable<std::optional<StepTurn>> TakeStepTurn(const Identity& who, bool yield);
  void LeaveStepTurn(uid_t uid);
  // The requests handled on the io thread at once, start to end (nullopt: not one of them).
  std::optional<std::string> HandleAtOnce(const Request& r, const Identity& who);
};

}  // namespace ckprof
