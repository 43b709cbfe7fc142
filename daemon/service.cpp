#include "daemon/service.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <asio/experimental/as_tuple.hpp>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include "common/command_plan.h"
#include "common/convert.h"
#include "common/repeats.h"
#include "common/text_table.h"
#include "common/version.h"
#include "daemon/acting_as.h"
#include "daemon/heap_trim.h"
#include "daemon/task_result_codec.h"

namespace ckprof {
namespace {

// submit --env: "K=V" lines, each a valid name that ckprofd does not set itself (the pin
// variables, CKPROFD_*). A daemon that runs profilers as its own user (not root) takes them
// from that user alone: another's LD_PRELOAD would run in its processes.
Result<std::vector<std::string>> JobEnvironment(const std::string& text, const Identity& who) {
  std::vector<std::string> env;
  if (text.empty()) return env;
  if (getuid() != 0 && who.uid != getuid()) {
    return MakeError("--env sets variables of profilers that this ckprofd (not root, uid " +
                     std::to_string(getuid()) +
                     ") runs as itself, not as you: only its own user may; ask its admin "
                     "(pass_env)");
  }
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const std::string entry = text.substr(start, nl - start);
    start = nl + 1;
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    const bool valid =
        eq != std::string::npos && eq > 0 && !std::isdigit(static_cast<unsigned char>(name[0])) &&
        std::all_of(
            name.begin(), name.end(),
            [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }) &&
        entry.find('\0') == std::string::npos;
    if (!valid) return MakeError("--env '" + entry + "' is not KEY=VALUE with a valid name");
    for (const char* ours : {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                             "GPU_DEVICE_ORDINAL", "CUDA_DEVICE_ORDER"}) {
      if (name == ours) {
        return MakeError("--env " + name + ": ckprofd sets it to the task's GPU (use --gpus)");
      }
    }
    if (name.rfind("CKPROFD_", 0) == 0 || name.rfind("CKPROF_", 0) == 0) {
      return MakeError("--env " + name + ": ckprofd's own variables cannot be set");
    }
    env.push_back(entry);
  }
  if (env.size() > 256) return MakeError("--env: at most 256 variables");
  return env;
}

using json = nlohmann::json;

// Canonical form of a path for policy checks ("" when it does not exist).
std::string RealPath(const std::string& path) {
  char* p = realpath(path.c_str(), nullptr);
  if (!p) return "";
  std::string out = p;
  free(p);
  return out;
}

bool IsUnder(const std::string& path, const std::string& root) {
  if (root.empty()) return false;
  if (path == root) return true;
  std::string r = root.back() == '/' ? root : root + "/";
  return path.rfind(r, 0) == 0;
}

// The conversion, as the submit answer shows it: `configs` made, `kept` as tasks.
ConversionSummary ConversionOf(const Conversion& c, size_t configs, size_t kept) {
  ConversionSummary out;
  out.format = InputFormatName(c.format);
  out.records = static_cast<int64_t>(c.records.size());
  out.configs = static_cast<int64_t>(configs);
  out.kept = static_cast<int64_t>(kept);
  for (const auto& r : c.records) out.skipped += r.produced.empty() ? 1 : 0;
  constexpr size_t kMaxWarnings = 50;
  for (const auto& w : c.warnings) {
    if (out.warnings.size() >= kMaxWarnings) break;
    out.warnings.push_back(w);
  }
  for (const auto& r : c.records) {
    if (out.warnings.size() >= kMaxWarnings) break;
    if (r.produced.empty()) {
      out.warnings.push_back("record " + std::to_string(r.position) + " (" + r.op_name +
                             ") skipped: " + r.skip_reason);
    }
  }
  return out;
}

Service::Refusal Refuse(std::string why) { return Service::Refusal{std::move(why), std::nullopt}; }

// "3600", "0.5": seconds as a user wrote them.
std::string SecondsText(double s) { return fmt::format("{:.10g}", s); }

// Whether a user whose use and limits are `u` may add `jobs` jobs (0 or 1) and `runs` runs;
// the refusal names the limit. Admins always may. (Pure: the submit asks it on its pool.)
Status CheckQueueRoom(const UserUse& u, int64_t jobs, int64_t runs) {
  if (u.admin) return Status::Ok();
  if (u.max_jobs > 0 && jobs > 0 && u.jobs + jobs > u.max_jobs) {
    return MakeError(u.user + " has " + GroupThousands(u.jobs) +
                     " jobs that have not ended; this daemon allows " + GroupThousands(u.max_jobs) +
                     " per user (max_jobs_per_user): wait for some to end, or cancel some "
                     "('ckprof list --mine')");
  }
  if (u.max_queued_runs > 0 && u.queued_runs + runs > u.max_queued_runs) {
    return MakeError(u.user + " would have " + GroupThousands(u.queued_runs + runs) +
                     " queued runs (" + GroupThousands(u.queued_runs) + " now, " +
                     GroupThousands(runs) + " more asked); this daemon allows " +
                     GroupThousands(u.max_queued_runs) +
                     " per user (max_queued_runs_per_user): ask for fewer (--max-ops, "
                     "--repeat), or wait for your runs to end ('ckprof list --mine')");
  }
  return Status::Ok();
}

// The bytes of output a log answer carries: well inside a frame (the other tasks are counted
// as omitted).
size_t LogBudget(const DaemonConfig& config) {
  return std::min<size_t>(config.max_frame_bytes / 4, size_t{64} << 20);
}

// The response frame of an answer: the reply, or the refusal.
template <typename T>
std::string Respond(const Request& r, const Service::Answer<T>& a) {
  if (const T* reply = std::get_if<T>(&a)) {
    if constexpr (std::is_same_v<T, BestReply>) return MakeReplyFrame(r, *reply);
    return Frame(MakeReply(r, *reply));
  }
  return Frame(MakeErrorReply(r.id, std::get<Service::Refusal>(a)));
}

}  // namespace

Service::Service(asio::any_io_executor io, asio::thread_pool& pool, Scheduler& scheduler,
                 const DaemonConfig& config)
    : io_(std::move(io)), pool_(pool), scheduler_(scheduler), config_(config) {}

Service::~Service() { *alive_ = false; }

Result<Service::Watching> Service::Stream(const Request& r, JobWatcher* watcher) {
  if (const WatchRequest* w = r.get_if<WatchRequest>()) return Watch(r, *w, watcher);
  if (const LogRequest* l = r.get_if<LogRequest>()) return FollowLog(r, *l, watcher);
  return MakeError(std::string(RequestTypeName(r.type())) + " is not answered by a stream");
}

Result<Service::Watching> Service::Watch(const Request& envelope, const WatchRequest& r,
                                         JobWatcher* watcher) {
  if (!scheduler_.JobExists(r.job_id)) return MakeError("no job " + std::to_string(r.job_id));
  Watching w;
  w.job_id = r.job_id;
  scheduler_.AddWatcher(r.job_id, watcher);
  w.subscription.reset(new Subscription(
      [this, job = r.job_id, watcher] { scheduler_.RemoveWatcher(job, watcher); }, alive_));
  WatchReply reply;
  reply.job = SummaryOf(r.job_id);
  for (const auto& g : scheduler_.Gpus()) {
    if (g.job_id == r.job_id) reply.running.push_back(g);
  }
  w.first = MakeReply(envelope, reply);
  // Decided with the summary: events of a job that ends while the first frame is being
  // written are queued, and must be sent, job_finished included.
  w.ended = scheduler_.JobEnded(r.job_id);
  return w;
}

Result<Service::Watching> Service::FollowLog(const Request& envelope, const LogRequest& r,
                                             JobWatcher* watcher) {
  if (r.tasks.size() > 1) {
    return MakeError("log --follow follows one task or the whole job: name one, e.g. 'ckprof log " +
                     std::to_string(r.job_id) + "#3 -f', or none");
  }
  // No task named: every task of the job (its first frame sized as HandleLog's answer).
  auto f = r.tasks.empty() ? scheduler_.FollowJobLog(r.job_id, r.lines, LogBudget(config_), watcher)
                           : scheduler_.FollowLog(r.job_id, r.tasks[0], r.lines, watcher);
  if (!f) return Error{f.error()};
  Watching w;
  w.job_id = r.job_id;
  w.ended = f->ended;
  if (!f->ended && r.tasks.empty()) {
    w.subscription.reset(new Subscription(
        [this, job = r.job_id, watcher] { scheduler_.StopFollowingJob(job, watcher); }, alive_));
  } else if (!f->ended) {
    w.subscription.reset(new Subscription(
        [this, task = f->task_id, watcher] { scheduler_.StopFollowing(task, watcher); }, alive_));
  }
  w.first = MakeReply(envelope, f->first);
  return w;
}

std::optional<JobSummary> Service::SummaryOf(int64_t job_id) const {
  auto s = scheduler_.Summary(job_id);
  return s ? std::optional<JobSummary>(std::move(*s)) : std::nullopt;
}

// (A plain post(pool_, use_awaitable) would resume on the coroutine's own executor: the
// handler must be bound to the executor it is to run on.)
asio::awaitable<void> Service::ToPool() {
  co_await asio::post(asio::bind_executor(pool_.get_executor(), asio::use_awaitable));
}

asio::awaitable<void> Service::ToIo() {
  co_await asio::post(asio::bind_executor(io_, asio::use_awaitable));
}

asio::awaitable<std::string> Service::Handle(const Request& r, const Identity& who,
                                             const std::function<bool()>& client_gone) {
  if (r.type() == RequestType::kHello || r.type() == RequestType::kPing) {
    co_return Frame(MakeReply(r, HandleHello(who)));
  }
  co_await WaitForIoShare(who);
  if (auto answered = HandleAtOnce(r, who)) co_return std::move(*answered);
  // What may go to the pool: its io-thread parts are counted where they run.
  switch (r.type()) {
    case RequestType::kSubmit:
      co_return Respond(r, co_await HandleSubmit(r.as<SubmitRequest>(), who, client_gone));
    case RequestType::kResults:
      co_return co_await HandleResults(r, r.as<ResultsRequest>(), who);
    case RequestType::kLog:
      co_return co_await HandleLog(r, r.as<LogRequest>(), who);
    case RequestType::kCancel:
      co_return Respond(r, co_await HandleCancel(r.as<CancelRequest>(), who));
    case RequestType::kBest:
      co_return Respond(r, co_await HandleBest(r.as<BestRequest>(), who));
    case RequestType::kUsage:
      co_return Respond(r, co_await HandleUsage(r.as<UsageRequest>(), who));
    default:
      break;  // a stream (watch): Stream
  }
  co_return Frame(ErrorResponse(r.id, "request type not handled here"));
}

std::optional<std::string> Service::HandleAtOnce(const Request& r, const Identity& who) {
  IoBudget::Charged charged(io_budget_, who.uid);
  switch (r.type()) {
    case RequestType::kStatus:
      return Respond(r, HandleStatus(r.as<StatusRequest>(), who, true));
    case RequestType::kList: {
      const ListRequest& list = r.as<ListRequest>();
      return Respond(r, HandleStatus(list, who, list.all));
    }
    case RequestType::kRetry:
      return Respond(r, HandleRetry(r.as<RetryRequest>(), who));
    case RequestType::kBoost:
      return Respond(r, HandleBoost(r.as<BoostRequest>(), who));
    case RequestType::kGpus:
      return Frame(MakeReply(r, HandleGpus()));
    case RequestType::kDrain:
      return Respond(r, HandleDrain(r.as<DrainRequest>(), who, true));
    case RequestType::kResume:
      return Respond(r, HandleDrain(r.as<ResumeRequest>(), who, false));
    case RequestType::kEdit:
      return Respond(r, HandleEdit(r.as<EditRequest>(), who));
    case RequestType::kClean:
      return Respond(r, HandleClean(r.as<CleanRequest>(), who));
    case RequestType::kHold:
      return Respond(r, HandleHold(r.as<HoldRequest>(), who, true));
    case RequestType::kRelease:
      return Respond(r, HandleHold(r.as<ReleaseRequest>(), who, false));
    // (Every kind named, so that a new one is a compiler warning until it is placed.)
    case RequestType::kHello:
    case RequestType::kPing:
    case RequestType::kSubmit:
    case RequestType::kCancel:
    case RequestType::kResults:
    case RequestType::kLog:
    case RequestType::kBest:
    case RequestType::kUsage:
    case RequestType::kWatch:
      break;  // handled beside it (Handle), or a stream
  }
  return std::nullopt;
}

asio::awaitable<void> Service::WaitForIoShare(const Identity& who) {
  // (Woken together, a user's waiting requests each look again: the first one handled takes
  // the share, and the others wait on.)
  for (;;) {
    const auto wait = io_budget_.Wait(who.uid, IoBudget::Clock::now());
    if (wait <= IoBudget::Clock::duration::zero()) co_return;
    const double ms = std::chrono::duration<double, std::milli>(wait).count();
    if (io_budget_.Tell(who.uid, IoBudget::Clock::now())) {
      spdlog::info(
          "uid {} ({}) is past its share of ckprofd's io thread: its requests wait (this one "
          "{:.1f} ms) while other users' are served (said once a minute)",
          who.uid, who.user, ms);
    }
    spdlog::trace("uid {} ({}): a request waits {:.1f} ms for its share of the io thread", who.uid,
                  who.user, ms);
    asio::steady_timer pause(io_, wait);
    auto [ec] = co_await pause.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    if (ec) co_return;
  }
}

asio::awaitable<std::chrono::steady_clock::duration> Service::WaitForLog() {
  if (!scheduler_.LargeWorkWaits()) co_return std::chrono::steady_clock::duration::zero();
  const auto wait_start = std::chrono::steady_clock::now();
  asio::steady_timer pause(io_);
  do {
    pause.expires_after(Scheduler::kLogWaitPoll);
    co_await pause.async_wait(asio::use_awaitable);
  } while (scheduler_.LargeWorkWaits());
  co_return std::chrono::steady_clock::now() - wait_start;
}

asio::awaitable<std::optional<Service::StepTurn>> Service::TakeStepTurn(const Identity& who,
                                                                        bool yield) {
  auto& slot = step_turns_[who.uid];
  if (!slot) slot = std::make_unique<FairTurn>(io_);
  FairTurn& turn = *slot;
  const bool free = !turn.busy();
  const std::shared_ptr<bool> alive = alive_;
  if (!co_await turn.Enter(who.uid) || !*alive) co_return std::nullopt;
  StepTurn held(this, who.uid);
  // (Given by Leave, the turn came through the io thread's queue already.)
  if (free && yield) co_await ToIo();
  co_return std::optional<StepTurn>(std::move(held));
}

void Service::LeaveStepTurn(uid_t uid) {
  auto it = step_turns_.find(uid);
  if (it == step_turns_.end()) return;
  it->second->Leave();
  if (!it->second->busy()) step_turns_.erase(it);
}

HelloReply Service::HandleHello(const Identity& who) const {
  HelloReply h;
  h.server = std::string("ckprofd ") + kVersion;
  h.protocol = kProtocolVersion;
  h.uid = who.uid;
  h.user = who.user;
  h.admin = who.admin;
  h.features = kFeatures;
  return h;
}

Result<std::string> Service::AcceptProfiler(const std::string& profiler,
                                            const Identity& who) const {
  if (Status s = CheckProfilerPolicy(profiler, who); !s) return Error{s.error()};
  // Found now, not hours later when the job's first task would fail to start; and looked
  // for with the user's rights, as her own shell would (a root daemon tells her nothing of
  // what she may not see).
  ActingAs as(AdminsProfiler(profiler) ? 0 : who.uid, who.gid, who.groups);
  if (!as.ok()) return Error{"cannot look at the profiler path with your rights"};
  if (auto target = ResolveProfiler(profiler); !target) return Error{target.error()};
  // This daemon will run another user's profiler as itself: keep the path that was checked,
  // resolved, so that a symlink the user controls cannot be re-pointed before the task runs.
  if (getuid() != 0 && who.uid != getuid()) return RealPath(profiler);
  return profiler;
}

bool Service::AdminsProfiler(const std::string& path) const {
  return !config_.profiler_path.empty() && path == config_.profiler_path;
}

Status Service::CheckProfilerPolicy(const std::string& path, const Identity& who) const {
  if (getuid() == 0 || who.uid == getuid()) return Status::Ok();
  // A non-root daemon runs every task as itself: another user's job may only run profilers
  // from the roots the operator allowed.
  const std::string real = RealPath(path);
  for (const auto& root : config_.allowed_profiler_roots) {
    const std::string real_root = RealPath(root);
    if (!real.empty() && IsUnder(real, real_root)) return Status::Ok();
  }
  std::string roots;
  for (const auto& root : config_.allowed_profiler_roots)
    roots += (roots.empty() ? "" : ", ") + root;
  return MakeError("profiler path " + path + " is not under allowed_profiler_roots (" +
                   (roots.empty() ? "none configured" : roots) + "); this ckprofd runs as uid " +
                   std::to_string(getuid()) +
                   " and runs other users' jobs only with profilers from those directories");
}

// A time limit `value` a plain user asks for (-1: the daemon's default, always allowed) against
// the config key `key`'s ceiling `max` (0: none): at most that, and never none (0) under one.
// One rule and one wording for --timeout and --job-timeout.
namespace {
Status CheckTimeLimit(const std::string& flag, const std::string& key, double value, double max,
                      bool admin) {
  if (admin || value < 0 || max <= 0) return Status::Ok();
  if (value == 0) {
    return MakeError(flag + " 0 (no limit) is for admins only; this daemon's " + key + " is " +
                     SecondsText(max) + " s: ask for at most that");
  }
  if (value > max) {
    return MakeError(flag + " " + SecondsText(value) + " is above this daemon's " + key + " of " +
                     SecondsText(max) + " s: ask for at most that, or ask an admin");
  }
  return Status::Ok();
}
}  // namespace

Status Service::CheckTimeout(double timeout_s, const Identity& who) const {
  return CheckTimeLimit("--timeout", "max_timeout", timeout_s, MaxUserTimeout(config_), who.admin);
}

Status Service::CheckJobTimeout(double job_timeout_s, const Identity& who) const {
  return CheckTimeLimit("--job-timeout", "max_job_timeout", job_timeout_s,
                        config_.max_job_timeout_s, who.admin);
}

UserUse Service::UseAndLimits(const Identity& who) const {
  UserUse u = scheduler_.UseOf(who.uid);
  u.user = who.user;
  u.admin = who.admin;
  u.max_jobs = config_.max_jobs_per_user;
  u.max_queued_runs = config_.max_queued_runs_per_user;
  u.max_gpus = config_.max_gpus_per_user;
  u.max_timeout_s = MaxUserTimeout(config_);
  u.max_job_timeout_s = config_.max_job_timeout_s;
  return u;
}

// The most tasks one job may hold (configs x --repeat): a typo in --repeat must not fill the
// database.
constexpr size_t kMaxJobTasks = 10'000'000;

// A submit's task records are made this many configs at a time: the first chunk's with the
// conversion, the others on the pool while the io thread stores the chunk before (a million
// records made at once took 2-3 s before the first step, and 700 MB).
constexpr size_t kRecordChunk = 16384;

namespace {
// A value made on the pool for a coroutine of the io thread, which co_awaits Ready. Only the io
// thread touches it: the pool's work posts the value back (dropped if the waiter is gone).
template <typename T>
struct FromPool {
  explicit FromPool(const asio::any_io_executor& io)
      : ready(io, asio::steady_timer::time_point::max()) {}
  asio::awaitable<void> Ready() {
    while (!value) {
      asio::error_code ec;
      co_await ready.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }
  std::optional<T> value;
  asio::steady_timer ready;
};

template <typename F>
auto MakeOnPool(asio::thread_pool& pool, const asio::any_io_executor& io, F make) {
  using T = decltype(make());
  auto out = std::make_shared<FromPool<T>>(io);
  asio::post(pool,
             [io, make = std::move(make), wanted = std::weak_ptr<FromPool<T>>(out)]() mutable {
               T value = make();
               asio::post(io, [wanted, value = std::move(value)]() mutable {
                 if (auto out = wanted.lock()) {
                   out->value = std::move(value);
                   out->ready.cancel();
                 }
               });
             });
  return out;
}
}  // namespace

// The submit's work on the conversion pool: the input converted, its configs checked against
// the limits, and (unless a dry run) made into task records.

struct Service::SubmitWork {
  Result<Conversion> converted = Error{""};
  std::vector<CkConfig> configs;          // the job's (or a dry run's)
  size_t converted_count = 0;             // configs the input made (before --max-ops)
  size_t runs = 0;                        // tasks the job will have: configs x --repeat
  std::vector<TaskRecord> first_records;  // the first kRecordChunk configs' tasks
  std::string refusal;                    // a limit the configs break ("" = none)
  ConversionSummary summary;              // the answer's account of the conversion
  std::chrono::steady_clock::time_point convert_start, records_start;
};

std::optional<Service::Refusal> Service::CheckSubmit(const SubmitOptions& o, const Identity& who,
                                                     ConvertOptions* conv,
                                                     std::string* profiler) const {
  // Names in any case, as the client accepts them: "FP16", "NHWC", "Auto".
  auto is_auto = [](std::string v) {
    for (char& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return v.empty() || v == "auto";
  };
  if (!is_auto(o.data_type)) {
    conv->data_type = ParseDataTypeName(o.data_type);
    if (!conv->data_type) {
      return Refuse("submit: data_type must be auto, fp16, bf16 or fp32, got '" + o.data_type +
                    "'");
    }
  }
  if (!is_auto(o.layout)) {
    conv->layout = ParseLayoutName(o.layout);
    if (!conv->layout) {
      return Refuse("submit: layout must be auto, nchw or nhwc, got '" + o.layout + "'");
    }
  }
  *profiler = o.profiler_path.empty() ? config_.profiler_path : o.profiler_path;
  if (profiler->empty() && !o.dry_run) {
    return Refuse(
        "submit: no profiler path: pass --profiler-path, or set "
        "profiler_path in the ckprofd config");
  }
  if (!profiler->empty() && (*profiler)[0] != '/') {
    return Refuse("submit: profiler_path must be absolute, got '" + *profiler + "'");
  }
  if (!o.cwd.empty() && o.cwd[0] != '/') {
    return Refuse("submit: cwd must be absolute, got '" + o.cwd + "'");
  }
  if (!o.reuse.empty() && o.reuse != "auto" && o.reuse != "never") {
    return Refuse("submit: reuse must be auto or never, got '" + o.reuse + "'");
  }
  if (Status s = CheckTimeout(o.timeout_s, who); !s) return Refuse("submit: " + s.error());
  if (Status s = CheckJobTimeout(o.job_timeout_s, who); !s) {
    return Refuse("submit: " + s.error());
  }
  if (o.dry_run) return std::nullopt;
  // Checked again when the job is stored (one may end or go meanwhile).
  JobRecord deps;
  deps.after = o.after;
  deps.after_ok = o.after_ok;
  if (Status s = scheduler_.CheckDependencies(deps); !s) return Refuse("submit: " + s.error());
  // The per-user limits before any work (again on the pool with the runs counted, and last
  // on the io thread right before the job is stored).
  if (Status s = CheckQueueRoom(UseAndLimits(who), 1, 1); !s) {
    return Refuse("submit refused: " + s.error());
  }
  auto accepted = AcceptProfiler(*profiler, who);
  if (!accepted) {
    return Refuse("submit: " + accepted.error() +
                  (o.profiler_path.empty() ? " (the daemon's default profiler_path; pass "
                                             "--profiler-path)"
                                           : ""));
  }
  *profiler = *accepted;
  return std::nullopt;
}

void Service::ConvertSubmit(const SubmitOptions& o, const ConvertOptions& conv, const UserUse& use,
                            SubmitWork* w) {
  w->convert_start = w->records_start = std::chrono::steady_clock::now();
  // A large configs list is read on a few cores.
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  if (o.content_encoding.empty()) {
    w->converted = ConvertText(o.content, conv, threads);  // plain: converted in place
  } else if (auto text = DecodeSubmitContent(o); !text) {
    w->converted = Error{text.error()};
  } else {
    w->converted = ConvertText(*text, conv, threads);
  }
  if (!w->converted) return;
  std::vector<CkConfig>& configs = w->configs;
  configs = std::move(w->converted->configs);
  w->converted->configs.clear();
  w->converted_count = configs.size();
  if (o.max_ops > 0 && configs.size() > static_cast<size_t>(o.max_ops)) {
    configs.resize(static_cast<size_t>(o.max_ops));
  }
  if (o.dry_run) return;
  const size_t runs = configs.size() * static_cast<size_t>(std::max(o.repeat, 1));
  if (Status room = CheckQueueRoom(use, 1, static_cast<int64_t>(runs)); !room) {
    w->refusal = "submit refused: " + room.error();
    return;
  }
  if (runs > kMaxJobTasks) {
    w->refusal = "submit: " + std::to_string(configs.size()) + " configs x --repeat " +
                 std::to_string(o.repeat) + " is more than the " + std::to_string(kMaxJobTasks) +
                 " runs a job may hold: lower --repeat, or split the input (--max-ops)";
    return;
  }
  w->runs = runs;
  w->records_start = std::chrono::steady_clock::now();
  w->first_records = Scheduler::MakeTaskRecords(configs, o.repeat, 0, kRecordChunk);
}

void Service::IdentifyRecoveredProfilers() {
  std::set<std::pair<std::string, uint32_t>> seen;
  for (const JobRecord& job : scheduler_.UnendedJobRecords()) {
    if (job.profiler_path.empty() || !seen.emplace(job.profiler_path, job.uid).second) continue;
    Identity owner;
    owner.uid = job.uid;
    owner.gid = job.gid;
    owner.groups = job.groups;
    asio::post(pool_, [this, path = job.profiler_path, owner] {
      IdentifyProfiler(path, owner);
      spdlog::info("profiler {} (uid {}): identified again after the restart", path, owner.uid);
    });
  }
}

void Service::IdentifyProfiler(const std::string& profiler, const Identity& who) {
  // Which build the profiler is: its first use hashes the executable, here rather than on
  // the io thread (the scheduler finds it cached), for every job: a job that reuses nothing
  // (--reuse never, --repeat) still adds its measurements for others. Read with the user's
  // rights: nothing she could not read is hashed for her (the admin's profiler_path is the
  // daemon's own).
  ActingAs as(AdminsProfiler(profiler) ? 0 : who.uid, who.gid, who.groups);
  if (!as.ok()) return;
  if (auto target = ResolveProfiler(profiler)) {
    for (ConvOp op : {ConvOp::kFwd, ConvOp::kBwdData, ConvOp::kBwdWeight}) {
      if (target->Supports(op))
        (void)scheduler_.profiler_identities().Of(target->ExecutableFor(op));
    }
  }
}

SubmitReply Service::DryRunReply(const std::string& profiler,
                                 const std::vector<CkConfig>& configs) const {
  SubmitReply reply;
  std::string note;
  ProfilerTarget target =
      ResolveOrAssumeProfiler(profiler.empty() ? "./build/bin" : profiler, &note);
  for (const auto& p : PlanCommands(target, configs)) {
    PlannedRun run;
    run.position = p.position;
    run.priority_rank = p.priority_rank;
    run.operation = OperationTypeName(p.op);
    run.description = p.description;
    run.argv = p.argv;
    run.command = p.argv.empty() ? "" : FormatCommandLine(p.argv);
    run.error = p.error;
    reply.commands.push_back(std::move(run));
  }
  reply.dry_run = true;
  reply.profiler = note;
  return reply;
}

Result<JobRecord> Service::MakeJob(const SubmitOptions& o, const Identity& who,
                                   const std::string& profiler, InputFormat format) const {
  for (int g : o.gpus) {
    auto gpus = scheduler_.Gpus();
    bool known = false;
    for (const auto& gi : gpus) known = known || gi.index == g;
    if (!known) return MakeError("submit: this daemon drives no GPU " + std::to_string(g));
  }
  // A job-end command runs as its submitter: only a root daemon can (or one of the submitter's
  // own, ckprof run --local); a daemon of another user would run it as that user.
  if (!o.on_end.empty() && getuid() != 0 && who.uid != getuid()) {
    return MakeError("submit: --on-end runs a command as you, which this ckprofd (not root, uid " +
                     std::to_string(getuid()) +
                     ") cannot do: ask its admin for on_job_end, or use a root ckprofd");
  }
  if (o.mail) {
    if (config_.sendmail.empty()) {
      return MakeError(
          "submit: --mail: this ckprofd sends no mail (its config's sendmail is "
          "empty); --on-end CMD can tell you another way");
    }
    if (access(config_.sendmail.c_str(), X_OK) != 0) {
      return MakeError("submit: --mail needs a local sendmail, and this host has none at " +
                       config_.sendmail +
                       " (its admin installs a mail transfer agent such as exim4 or postfix, "
                       "or sets \"sendmail\" in the ckprofd config); --on-end CMD can tell you "
                       "another way");
    }
    if (getuid() != 0 && who.uid != getuid()) {
      return MakeError(
          "submit: --mail sends mail as you, which this ckprofd (not root) cannot "
          "do: use a root ckprofd");
    }
  }
  auto env = JobEnvironment(o.env, who);
  if (!env) return MakeError("submit: " + env.error());
  JobRecord job;
  job.env = std::move(*env);
  job.uid = who.uid;
  job.gid = who.gid;
  job.groups = who.groups;
  job.owner = who.user;
  job.name = !o.name.empty() ? o.name : (!o.input_name.empty() ? o.input_name : "job");
  job.priority = o.priority;
  job.gpus = o.gpus;
  job.max_gpus = o.max_gpus;
  job.order = o.order;
  job.not_before = o.not_before;
  job.timeout_s = o.timeout_s;
  job.profiler_path = profiler;
  job.cwd = o.cwd.empty() ? "/" : o.cwd;
  job.input_format = std::string(InputFormatName(format));
  job.repeat = o.repeat;
  job.noise_threshold = config_.noise_threshold;
  job.on_end = o.on_end;
  job.reuse = o.reuse != "never";
  job.after = o.after;
  job.after_ok = o.after_ok;
  job.job_timeout_s = o.job_timeout_s >= 0 ? o.job_timeout_s : config_.max_job_timeout_s;
  job.mail = o.mail;
  return job;
}

asio::awaitable<Result<int64_t>> Service::StoreJob(JobRecord job, std::vector<CkConfig> job_configs,
                                                   std::vector<TaskRecord> first_records,
                                                   const Identity& who,
                                                   const std::function<bool()>& client_gone) {
  const int repeat = job.repeat;
  // What the pool made is given back on the pool, however the submit ends: freed here, memory
  // of the pool's heap may have glibc consolidate that heap on this thread (malloc_consolidate:
  // 100-300 ms for a million configs' chunks), and every other client would wait.
  struct FreedOnPool {
    asio::thread_pool& pool;
    std::shared_ptr<std::vector<CkConfig>> configs;
    std::vector<TaskRecord> records;  // the chunk being stored
    void Records() {
      asio::post(pool, [gone = std::move(records)] {});
    }
    ~FreedOnPool() {
      Records();
      asio::post(pool, [gone = std::move(configs)] {});
    }
  } own{pool_, std::make_shared<std::vector<CkConfig>>(std::move(job_configs)),
        std::move(first_records)};
  const std::shared_ptr<std::vector<CkConfig>>& configs = own.configs;
  const size_t total = configs->size() * static_cast<size_t>(std::max(repeat, 1));
  const uid_t uid = job.uid;
  auto id = scheduler_.BeginSubmit(std::move(job), static_cast<int64_t>(total));
  if (!id) co_return id;
  // The records of the chunk of configs from `from` on, made on the pool while the io thread
  // stores the chunk before.
  auto make_ahead = [this, &configs, repeat](size_t from) {
    return MakeOnPool(pool_, io_, [configs, repeat, from] {
      return Scheduler::MakeTaskRecords(*configs, repeat, from, from + kRecordChunk);
    });
  };
  std::shared_ptr<FromPool<std::vector<TaskRecord>>> next;
  if (configs->size() > kRecordChunk) next = make_ahead(kRecordChunk);
  // A step at a time, each one transaction, with every other request served in between: a
  // million tasks must not stall everyone's `status`.
  std::vector<TaskRecord>& records = own.records;
  size_t stored = 0;
  int64_t steps = 1;
  std::chrono::steady_clock::duration waited_log{}, waited_records{};  // (for the debug log)
  for (size_t from = 0;;) {
    std::span<TaskRecord> left(records);
    while (!left.empty()) {
      // One step of the user's at a time (their other submits' and cancels' wait), each after
      // whatever else the io thread has to do. (Charged to the user's io share, but not held
      // back by it: a lone user's million configs would take twice as long.)
      auto turn = co_await TakeStepTurn(who, /*yield=*/stored > 0);
      // (None: the Service is gone, and with it this job's submit, never committed.)
      if (!turn) co_return Error{"ckprofd is shutting down"};
      if (stored > 0) {
        if (client_gone && client_gone()) {  // (Ctrl-C): a job nobody was told of is not kept
          scheduler_.AbortSubmit(*id);
          co_return Error{std::string(kClientLeft)};
        }
        waited_log += co_await WaitForLog();
        ++steps;
      }
      const size_t n = std::min(left.size(), static_cast<size_t>(scheduler_.StepRows()));
      const std::span<TaskRecord> step = left.first(n);
      Status added;
      {
        IoBudget::Charged charged(io_budget_, uid);  // (the submitter's share: IoBudget)
        added = scheduler_.AddSubmitTasks(*id, step);
      }
      if (!added) {
        scheduler_.AbortSubmit(*id);
        co_return Error{added.error()};
      }
      left = left.subspan(n);
      stored += n;
      if (stored >= total) break;
    }
    from += kRecordChunk;
    if (from >= configs->size() || !next) break;
    if (!next->value) {  // made soon
      const auto wait_start = std::chrono::steady_clock::now();
      co_await next->Ready();
      waited_records += std::chrono::steady_clock::now() - wait_start;
    }
    own.Records();  // stored: freed on the pool
    records = std::move(*next->value);
    next = from + kRecordChunk < configs->size() ? make_ahead(from + kRecordChunk) : nullptr;
  }
  if (total > static_cast<size_t>(scheduler_.StepRows())) {
    // The last step's commit (synchronous=FULL) syncs the log its steps wrote: most of it
    // synced first on the pool, so that the io thread waits for what is left, not for
    // a hundred megabytes. (An fsync of the file through another descriptor is as good.)
    // A million configs are a gigabyte to give back (a second, trim included): on another of
    // the pool's threads, from now on, while this one syncs and the submitter is answered.
    asio::post(pool_, [gone = std::move(own.configs)]() mutable {
      gone.reset();
      TrimHeap();
    });
    co_await ToPool();
    const std::string log = config_.state_dir + "/ckprofd.db-wal";
    if (const int fd = open(log.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
      (void)fdatasync(fd);
      close(fd);
    }
    co_await ToIo();
  }
  if (Status s = scheduler_.CommitSubmit(*id); !s) {
    scheduler_.AbortSubmit(*id);
    co_return Error{s.error()};
  }
  auto seconds = [](auto d) { return std::chrono::duration<double>(d).count(); };
  spdlog::debug(
      "job {}: {} task(s) stored in {} step(s), {:.3f} s of waits for the log's checkpoints, "
      "{:.3f} s for task records",
      *id, total, steps, seconds(waited_log), seconds(waited_records));
  co_return id;
}

asio::awaitable<Service::Answer<SubmitReply>> Service::HandleSubmit(
    const SubmitRequest& r, const Identity& who, const std::function<bool()>& client_gone) {
  const SubmitOptions& o = r.submit;
  ConvertOptions conv;
  std::string profiler;
  if (auto refused = CheckSubmit(o, who, &conv, &profiler)) co_return std::move(*refused);
  // Converted on the pool: a large input must not stall every other client. The tasks'
  // stored text is made there too (work in proportion to the configs).
  const UserUse use = UseAndLimits(who);
  SubmitWork w;
  co_await ToPool();
  ConvertSubmit(o, conv, use, &w);
  if (w.runs > 0) IdentifyProfiler(profiler, who);
  if (w.converted) {
    // Told now, and the records' outcomes (one per config) freed here rather than on the io
    // thread: a million of them take a second to free.
    w.summary =
        ConversionOf(*w.converted, w.converted_count, o.dry_run ? w.configs.size() : w.runs);
    std::vector<RecordOutcome>().swap(w.converted->records);
    std::vector<std::string>().swap(w.converted->warnings);
  }
  co_await ToIo();
  // However the submit ends, a large one's configs are freed on the pool (a million take a
  // second), not here.
  struct ConfigsFreedOnPool {
    asio::thread_pool& pool;
    std::vector<CkConfig>& configs;
    ~ConfigsFreedOnPool() {
      if (configs.size() > kRecordChunk) asio::post(pool, [gone = std::move(configs)] {});
    }
  } freed_on_pool{pool_, w.configs};
  if (!w.converted) {
    // The converter calls the text it was given "input"; name it as the client sent it.
    std::string error = w.converted.error();
    static const std::string kInput = "input: ";
    if (!o.input_name.empty() && error.compare(0, kInput.size(), kInput) == 0) {
      error = o.input_name + ": " + error.substr(kInput.size());
    }
    co_return Refuse("submit: the input cannot be used: " + error);
  }
  if (!w.refusal.empty()) co_return Refuse(w.refusal);
  const Conversion& c = *w.converted;
  const size_t task_count = o.dry_run ? w.configs.size() : w.runs;
  SubmitReply reply;
  reply.conversion = std::move(w.summary);
  if (task_count == 0) {
    co_return Refusal{"submit: the input holds no convolution that could be converted",
                      reply.conversion};
  }
  if (o.dry_run) {
    SubmitReply dry = DryRunReply(profiler, w.configs);
    dry.conversion = std::move(reply.conversion);
    co_return dry;
  }
  auto job = MakeJob(o, who, profiler, c.format);
  if (!job) co_return Refuse(job.error());
  // (Other submits of the user may have been stored while this one converted.)
  if (Status s = CheckQueueRoom(UseAndLimits(who), 1, static_cast<int64_t>(w.runs)); !s) {
    co_return Refuse("submit refused: " + s.error());
  }
  const auto store_start = std::chrono::steady_clock::now();
  if (check_state) {
    if (Status s = check_state(); !s) co_return Refuse("submit: " + s.error());
  }
  Result<int64_t> id = Error{std::string(kClientLeft)};  // gone while its input was converted
  if (!client_gone || !client_gone()) {
    id = co_await StoreJob(std::move(*job), std::move(w.configs), std::move(w.first_records), who,
                           client_gone);
  }
  if (!id) {
    if (id.error() == kClientLeft) {
      spdlog::info("a submit of {} task(s) from {} (uid {}): {}; nothing of it is kept", task_count,
                   who.user, who.uid, kClientLeft);
    }
    co_return Refuse("submit: " + id.error());
  }
  // A database removed before the commit took it into a file no path reaches: not acknowledged.
  if (check_state) {
    if (Status s = check_state(); !s) co_return Refuse("submit: " + s.error());
  }
  auto seconds = [](auto from, auto to) {
    return std::chrono::duration<double>(to - from).count();
  };
  spdlog::debug(
      "job {}: converted in {:.3f} s on {} thread(s) (the first task records {:.3f} s of it), "
      "stored and queued in {:.3f} s (the other records made meanwhile)",
      *id, seconds(w.convert_start, store_start), c.reader_threads,
      seconds(w.records_start, store_start),
      seconds(store_start, std::chrono::steady_clock::now()));
  reply.job_id = *id;
  reply.job = SummaryOf(*id);
  co_return reply;
}

Service::Answer<StatusReply> Service::HandleStatus(const StatusRequest& r, const Identity& who,
                                                   bool all) const {
  StatusReply reply;
  if (r.job_id > 0) {
    auto s = scheduler_.Summary(r.job_id);
    if (!s) return Refuse(s.error());
    reply.job = std::move(*s);
    return reply;
  }
  reply.jobs = scheduler_.List(all);
  reply.you = UseAndLimits(who);
  return reply;
}

namespace {

// A job of more tasks than this has its results read and encoded on the pool: a million rows
// took seconds, and every other client waited for them on the io thread.
constexpr int64_t kResultsOnIoThread = 2000;

// The reply to `r`: the job's summary and the results of its tasks (a repeated job's runs
// merged into one result per config, with their spread).
ResultsReply ResultsReplyOf(JobSummary summary, std::vector<TaskResult> results,
                            const ResultsRequest& r, double noise_threshold) {
  ResultsReply reply;
  reply.job = std::move(summary);
  if (reply.job.repeat > 1) {
    reply.tasks = MergeRepeats(results, noise_threshold);
    if (r.runs) reply.runs = std::move(results);
  } else {
    reply.tasks = std::move(results);
  }
  return reply;
}

}  // namespace

asio::awaitable<std::string> Service::HandleResults(const Request& envelope,
                                                    const ResultsRequest& r, const Identity& who) {
  using A = Answer<ResultsReply>;
  if (r.job_id <= 0)
    co_return Respond(envelope, A(Refuse("results: which job? field 'job_id' is missing")));
  auto s = scheduler_.Summary(r.job_id);
  if (!s) co_return Respond(envelope, A(Refuse(s.error())));
  const double noise = scheduler_.NoiseThreshold(r.job_id);
  if (s->total <= kResultsOnIoThread) {
    IoBudget::Charged charged(io_budget_, who.uid);  // (it does not suspend)
    auto results = scheduler_.Results(r.job_id, r.all);
    if (!results) co_return Respond(envelope, A(Refuse(results.error())));
    co_return Respond(envelope, A(ResultsReplyOf(std::move(*s), std::move(*results), r, noise)));
  }
  co_return co_await LargeJobAnswer(
      envelope, who, r.job_id, "results", nullptr,
      [&](JobSummary summary, std::vector<TaskRecord>& rows) {
        std::vector<TaskResult> results;
        results.reserve(rows.size());
        for (const auto& row : rows) results.push_back(TaskResultFromRecord(row, r.all));
        rows.clear();
        rows.shrink_to_fit();
        return Respond(envelope,
                       A(ResultsReplyOf(std::move(summary), std::move(results), r, noise)));
      });
}

asio::awaitable<std::string> Service::LargeJobAnswer(
    const Request& envelope, const Identity& who, int64_t job_id, const char* what,
    std::function<void()> on_turn,
    std::function<std::string(JobSummary, std::vector<TaskRecord>&)> make, bool* refused) {
  if (results_turn_.busy()) {
    spdlog::debug("{} of job {} for uid {}: waits for its turn on the pool ({} waiting)", what,
                  job_id, who.uid, results_turn_.waiting() + 1);
  }
  if (!co_await results_turn_.Enter(who.uid)) {
    if (refused) *refused = true;
    co_return Frame(
        MakeErrorReply(envelope.id, Refuse(std::string(what) + ": ckprofd is stopping")));
  }
  if (on_turn) on_turn();
  auto summary = scheduler_.Summary(job_id);  // (after the wait for the turn)
  const std::string path = Store::FileIn(config_.state_dir);
  co_await ToPool();  // the rows read, parsed and encoded (hundreds of MB for a large job)
  const auto start = std::chrono::steady_clock::now();
  std::string frame, error;
  if (!summary) {
    error = summary.error();
  } else if (auto rows = Store::ReadJobTasks(path, job_id); !rows) {
    error = rows.error();
  } else {
    frame = make(std::move(*summary), *rows);
  }
  if (!error.empty()) frame = Frame(MakeErrorReply(envelope.id, Refuse(error)));
  if (refused) *refused = !error.empty();
  spdlog::debug("{} of job {}: made beside the io thread in {:.3f} s ({} bytes)", what, job_id,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                frame.size());
  co_await ToIo();
  results_turn_.Leave();
  TrimHeapSoon();  // what the pool made and freed of the rows (tens of MB) given back
  co_return frame;
}

asio::awaitable<Service::Answer<JobReply>> Service::HandleCancel(const CancelRequest& r,
                                                                 const Identity& who) {
  std::optional<IoBudget::Charged> charged(std::in_place, io_budget_, who.uid);
  if (r.tasks.empty()) {
    if (Status s = scheduler_.Cancel(r.job_id, who); !s) co_return Refuse(s.error());
    co_return JobReply{SummaryOf(r.job_id), std::nullopt};
  }
  if (Status s = scheduler_.CheckCancelTasks(r.job_id, who, r.tasks); !s) {
    co_return Refuse(s.error());
  }
  // 4,096 named tasks of a million-task job are 60 ms of lookups and row updates: in parts of
  // about a step's time, with whatever else arrived served in between.
  Scheduler::TasksCancelled done;
  const std::span<const int> all(r.tasks);
  // In steps: bulk writing meanwhile, and each step after the first waits while the database's
  // log is behind (as a large submit's do), not for a checkpoint's copy inside its commit.
  const bool in_steps = all.size() > static_cast<size_t>(scheduler_.CancelStepPositions());
  if (in_steps) scheduler_.LargeWorkBegins();
  Status failed = Status::Ok();
  int64_t steps = 0;
  for (size_t at = 0; at < all.size(); ++steps) {
    charged.reset();
    auto turn = co_await TakeStepTurn(who, /*yield=*/at > 0);
    if (!turn) co_return Refuse("ckprofd is shutting down");
    if (at > 0) {
      co_await WaitForIoShare(who);
      co_await WaitForLog();
    }
    charged.emplace(io_budget_, who.uid);
    const auto n = std::min(all.size() - at, static_cast<size_t>(scheduler_.CancelStepPositions()));
    failed = scheduler_.CancelTasks(r.job_id, who, all.subspan(at, n), done);
    if (!failed) break;
    at += n;
  }
  if (in_steps) {
    scheduler_.LargeWorkEnded();
    spdlog::debug("job {}: a cancel naming {} task(s) took {} steps", r.job_id, all.size(), steps);
  }
  if (!failed) {
    if (done.queued == 0 && done.running == 0) co_return Refuse(failed.error());
    (void)scheduler_.EndCancelTasks(r.job_id, who, r.tasks, done);
    co_return Refuse(failed.error() + " (" + std::to_string(done.queued + done.running) +
                     " of the named tasks were cancelled before that)");
  }
  if (Status s = scheduler_.EndCancelTasks(r.job_id, who, r.tasks, done); !s) {
    co_return Refuse(s.error());
  }
  co_return JobReply{SummaryOf(r.job_id), std::nullopt};
}

Service::Answer<JobReply> Service::HandleRetry(const RetryRequest& r, const Identity& who) {
  RetryOptions options;
  options.positions = r.tasks;
  options.failed_only = r.failed_only;
  if (r.timeout_s >= 0) {
    if (Status s = CheckTimeout(r.timeout_s, who); !s) return Refuse("retry: " + s.error());
    options.timeout_s = r.timeout_s;
  }
  // Its runs queue again (and an ended job counts as not ended again).
  const int64_t revived = scheduler_.JobExists(r.job_id) && scheduler_.JobEnded(r.job_id) ? 1 : 0;
  options.admit = [this, &who, revived](int64_t runs) -> Status {
    if (Status s = CheckQueueRoom(UseAndLimits(who), runs > 0 ? revived : 0, runs); !s) {
      return MakeError("retry refused: " + s.error());
    }
    return Status::Ok();
  };
  if (!r.profiler_path.empty()) {
    if (r.profiler_path[0] != '/') {
      return Refuse("retry: profiler_path must be absolute, got '" + r.profiler_path + "'");
    }
    auto accepted = AcceptProfiler(r.profiler_path, who);
    if (!accepted) return Refuse("retry: " + accepted.error());
    options.profiler_path = *accepted;
  }
  auto n = scheduler_.Retry(r.job_id, who, options);
  if (!n) return Refuse(n.error());
  return JobReply{SummaryOf(r.job_id), *n, scheduler_.RequeuingInSteps(r.job_id)};
}

Service::Answer<JobReply> Service::HandleBoost(const BoostRequest& r, const Identity& who) {
  if (Status s = scheduler_.Boost(r.job_id, r.priority, who); !s) return Refuse(s.error());
  return JobReply{SummaryOf(r.job_id), std::nullopt};
}

Service::Answer<JobReply> Service::HandleHold(const HoldRequest& r, const Identity& who,
                                              bool hold) {
  if (Status s = scheduler_.Hold(r.job_id, hold, who); !s) return Refuse(s.error());
  return JobReply{SummaryOf(r.job_id), std::nullopt};
}

Service::Answer<JobReply> Service::HandleEdit(const EditRequest& r, const Identity& who) {
  if (r.edit.timeout_s) {
    if (Status s = CheckTimeout(*r.edit.timeout_s, who); !s) return Refuse("edit: " + s.error());
  }
  if (Status s = scheduler_.Edit(r.job_id, r.edit, who); !s) return Refuse(s.error());
  return JobReply{SummaryOf(r.job_id), std::nullopt};
}

asio::awaitable<std::optional<std::string>> Service::EndedLargeLog(const Request& request,
                                                                   const Identity& who,
                                                                   bool* refused) {
  const LogRequest* l = request.get_if<LogRequest>();
  if (!l || !l->tasks.empty() || !scheduler_.JobExists(l->job_id) ||
      !scheduler_.JobEnded(l->job_id)) {
    co_return std::nullopt;
  }
  auto s = scheduler_.Summary(l->job_id);
  if (!s || s->total <= kResultsOnIoThread) co_return std::nullopt;
  co_return co_await HandleLog(request, *l, who, refused);
}

asio::awaitable<std::string> Service::HandleLog(const Request& envelope, const LogRequest& r,
                                                const Identity& who, bool* refused) {
  using A = Answer<LogReply>;
  auto s = scheduler_.Summary(r.job_id);
  // A few tasks named, or a small job: on the io thread, at once.
  if (!s || !r.tasks.empty() || s->total <= kResultsOnIoThread) {
    IoBudget::Charged charged(io_budget_, who.uid);  // (it does not suspend)
    auto reply = scheduler_.Log(r.job_id, r.tasks, r.lines, LogBudget(config_));
    if (refused) *refused = !reply;
    if (!reply) co_return Respond(envelope, A(Refuse(reply.error())));
    co_return Respond(envelope, A(std::move(*reply)));
  }
  // What runs now is taken on the io thread (its output so far), the stored rows on the pool.
  Scheduler::LiveLogs live;
  co_return co_await LargeJobAnswer(
      envelope, who, r.job_id, "log", [&] { live = scheduler_.LiveLogsOf(r.job_id); },
      [&](JobSummary summary, std::vector<TaskRecord>& rows) {
        return Respond(envelope, A(Scheduler::LogOf(std::move(summary), rows, false, r.lines,
                                                    LogBudget(config_), live)));
      },
      refused);
}

Service::Answer<CleanReply> Service::HandleClean(const CleanRequest& r, const Identity& who) {
  Scheduler::CleanOptions o;
  o.older_than_s = r.older_than_s;
  o.everyone = r.all;
  o.job_ids = r.job_ids;
  o.dry_run = r.dry_run;
  auto reply = scheduler_.Clean(who, o);
  if (!reply) return Refuse(reply.error());
  return std::move(*reply);
}

asio::awaitable<Service::Answer<BestReply>> Service::HandleBest(const BestRequest& r,
                                                                const Identity& who) {
  BestFilter f;
  if (!r.op.empty()) {
    auto op = ParseOperationType(r.op);
    if (!op) {
      co_return Refuse("best: op must be fwd, bwd_data or bwd_weight, got '" + r.op + "'");
    }
    f.op = OperationTypeName(*op);
  }
  if (!r.profiler_path.empty()) {
    // The table names builds by their resolved executable: a directory of per-operation
    // executables, or a symlink, is matched by what it resolves to.
    f.profiler = RealPath(r.profiler_path);
    if (f.profiler.empty()) f.profiler = r.profiler_path;
  }
  f.gpu_model = r.gpu_model;
  if (!config_.share_results && !who.admin) f.uid = who.uid;
  if (!co_await usage_turn_.Enter(who.uid)) co_return Refuse("best: ckprofd is stopping");
  const std::string path = Store::FileIn(config_.state_dir);
  co_await ToPool();
  auto rows = Store::ReadBest(path, f);
  co_await ToIo();
  usage_turn_.Leave();
  if (!rows) co_return Refuse("best: " + rows.error());
  BestReply reply;
  reply.shared = config_.share_results || who.admin;
  reply.rows.reserve(rows->size());
  for (auto& b : *rows) {
    BestRow row;
    row.operation = std::move(b.op);
    row.problem = std::move(b.problem);
    row.profiler = b.profiler.substr(0, b.profiler.find(" size="));
    row.profiler_build = std::move(b.profiler);
    row.gpu_model = std::move(b.gpu_model);
    row.best_name = std::move(b.best_name);
    row.split_k = std::move(b.split_k);
    row.avg_ms = b.avg_ms;
    row.tflops = b.tflops;
    row.gbps = b.gbps;
    row.measured = b.measured;
    row.first_at = b.first_at;
    row.last_at = b.last_at;
    row.best_at = b.best_at;
    row.job_id = b.job_id;
    row.task_id = b.task_id;
    reply.rows.push_back(std::move(row));
  }
  co_return reply;
}

GpusReply Service::HandleGpus() {
  scheduler_.RefreshGpus();
  GpusReply reply;
  reply.gpus = scheduler_.Gpus();
  reply.pin_env = config_.pin_env;
  if (scheduler_.remote()) {
    reply.executor = scheduler_.executor();
    reply.cluster = scheduler_.Cluster();
    reply.allocations = scheduler_.Allocations();
  }
  return reply;
}

Service::Answer<EmptyReply> Service::HandleDrain(const DrainRequest& r, const Identity& who,
                                                 bool drain) {
  if (Status s = scheduler_.SetDrained(r.gpu, drain, who, drain ? r.reason : ""); !s) {
    return Refuse(s.error());
  }
  return EmptyReply{};
}

}  // namespace ckprof
