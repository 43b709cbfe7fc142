#include "daemon/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <asio/execution/outstanding_work.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <utility>

extern char** environ;

namespace ckprof {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64 * 1024;
// After the run is over, how long to keep re-killing a group whose members are still dying.
constexpr auto kSettleLimit = std::chrono::seconds(2);
constexpr auto kSettleStep = std::chrono::milliseconds(5);
// Polling interval when pidfd_open is not available (kernels before 5.3).
constexpr auto kExitPollStep = std::chrono::milliseconds(20);
// How often the pipes of running profilers are read while no wakeup watches them (OutPipe).
constexpr auto kOutputPollStep = std::chrono::milliseconds(50);
// A poll that finds this much in a pipe has the pipe watched from then on (the smallest pipe
// the kernel makes holds one page: a profiler filling it waits for no poll).
constexpr size_t kWatchAfterBytes = 4096;
// Reads per wakeup at most, so that one chatty profiler cannot hold the thread.
constexpr int kReadsPerWakeup = 4;

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// True when `pid` (our child) has exited; does not reap it.
bool HasExited(pid_t pid) {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return errno == ECHILD;  // reaped elsewhere: nothing left to wait for
  }
  return info.si_pid == pid;
}

}  // namespace

void Capture::Add(std::string_view d) {
  total_ += d.size();
  if (head_.size() < head_max_) {
    size_t take = std::min(d.size(), head_max_ - head_.size());
    head_.append(d.substr(0, take));
    d.remove_prefix(take);
  }
  if (d.empty() || tail_max_ == 0) return;
  if (d.size() >= tail_max_) {
    tail_.assign(d.substr(d.size() - tail_max_));
    return;
  }
  tail_.append(d);
  if (tail_.size() > 2 * tail_max_) tail_.erase(0, tail_.size() - tail_max_);
}

std::string Capture::Text() const {
  size_t keep = std::min(tail_.size(), tail_max_);
  uint64_t omitted = total_ - head_.size() - keep;
  std::string s = head_;
  if (omitted > 0) s += "\n[... " + std::to_string(omitted) + " bytes omitted ...]\n";
  s.append(tail_, tail_.size() - keep, keep);
  return s;
}

// One of a run's output pipes (our read end). It starts quiet: no wakeup watches it; the
// runner's output poll reads it every kOutputPollStep and the leader's exit drains it, so a
// profiler that prints a few KiB and exits costs one wakeup (its exit) instead of one per
// write: the CK profiler flushes every line. A pipe a poll finds holding a page or more is
// watched from then on, read as soon as it is readable, so a chatty profiler never waits on a
// full pipe for more than one poll.
struct OutPipe {
  enum class Mode { kClosed, kQuiet, kWatched };
  explicit OutPipe(asio::any_io_executor ex) : stream(std::move(ex)) {}

  bool open() const { return mode != Mode::kClosed; }
  bool quiet() const { return mode == Mode::kQuiet; }
  int native() { return mode == Mode::kWatched ? stream.native_handle() : fd; }
  void OpenQuiet(int read_fd) {
    fd = read_fd;
    mode = Mode::kQuiet;
  }
  // Hands the descriptor to the reactor; false (and closed) if it cannot take it.
  bool Watch() {
    asio::error_code ec;
    const int taken = std::exchange(fd, -1);
    stream.assign(taken, ec);
    if (ec) {
      close(taken);
      mode = Mode::kClosed;
      return false;
    }
    mode = Mode::kWatched;
    return true;
  }
  void Close() {
    asio::error_code ignored;
    if (mode == Mode::kWatched) stream.close(ignored);
    if (fd >= 0) close(fd);
    fd = -1;
    mode = Mode::kClosed;
  }

  Mode mode = Mode::kClosed;
  int fd = -1;                            // while quiet
  asio::posix::stream_descriptor stream;  // while watched
};

// What one read pass over a pipe found.
struct ReadPass {
  size_t bytes = 0;
  bool eof = false;   // EOF or an error: the stream is over either way
  bool more = false;  // stopped at the read limit with data left
};

// A run's phases, in order (a run only moves forward).
enum class RunPhase { kSpawning, kRunning, kLeaderExited, kSettling, kFinished };

// One run: its process, pipes, timers and what has been read so far. Shared with the pending
// handlers, which do nothing once `owner` is null (runner gone) or `finished` is set.
struct ProcessRunner::Run {
  Run(asio::any_io_executor ex, RunSpec s)
      : spec(std::move(s)),
        out(ex),
        err(ex),
        pidfd(ex),
        timeout_timer(ex),
        grace_timer(ex),
        drain_timer(ex),
        exit_poll_timer(ex),
        exec_status(ex),
        exec_timer(ex),
        parser(spec.top_k),
        out_cap(spec.capture_head, spec.capture_tail),
        err_cap(spec.capture_head, spec.capture_tail) {}

  RunId id = 0;
  ProcessRunner* owner = nullptr;
  RunSpec spec;
  std::function<void(RunResult)> on_done;
  pid_t pid = -1;
  OutPipe out, err;
  asio::posix::stream_descriptor pidfd;
  asio::steady_timer timeout_timer, grace_timer, drain_timer, exit_poll_timer;
  // The status pipe, until the profiler's exec closes it (or a failure arrives on it), and
  // the deadline for that (RunSpec::start_timeout).
  asio::posix::stream_descriptor exec_status;
  asio::steady_timer exec_timer;
  SpawnError exec_report;
  // A failure after the clone: reported by the child (or ckprofd-exec), or its deadline.
  std::optional<std::string> start_error;
  CkOutputParser parser;
  Capture out_cap, err_cap;
  // Where the run is: spawning, running, its leader exited (pipes draining), its group settling
  // (members still dying), finished (reported). A failed spawn goes straight to kLeaderExited.
  RunPhase phase = RunPhase::kSpawning;
  bool status_known = false;
  int wait_status = 0;
  std::optional<Outcome::Kind> stop_kind;  // timeout, cancel or interrupt requested
  bool kill_sent = false;                  // SIGKILL had to follow SIGTERM
  SteadyClock::time_point settle_deadline;
  std::optional<std::string> spawn_error;
  std::shared_ptr<ProcessRunner::SpawnRequest> spawning;  // until the spawn is reported back
  std::chrono::system_clock::time_point started_at;
  SteadyClock::time_point started_steady;
  // The run's cgroup (TaskCgroups::Acquire), given back when the run is over; null = none
  // (process group alone).
  std::unique_ptr<RunCgroup> cgroup;
  std::optional<rusage> leader_usage;  // from wait4, once the leader is reaped

  bool Alive() const { return owner != nullptr && phase != RunPhase::kFinished; }
  bool Exited() const { return phase >= RunPhase::kLeaderExited; }
  void CloseAll() {
    asio::error_code ec;
    timeout_timer.cancel();
    grace_timer.cancel();
    drain_timer.cancel();
    exit_poll_timer.cancel();
    exec_timer.cancel();
    out.Close();
    err.Close();
    pidfd.close(ec);
    exec_status.close(ec);
  }
};

// The steps of a run, over the shared Run. Every handler checks Run::Alive first, so none
// touches a runner that is gone.
class RunSteps {
 public:
  using RunPtr = std::shared_ptr<ProcessRunner::Run>;
  static ReadPass ReadAvailable(ProcessRunner::Run& run, bool is_stdout, int max_reads,
                                bool to_end = false);
  static void ReadMore(const RunPtr& run, bool is_stdout);
  static void OnReadable(const RunPtr& run, bool is_stdout, const asio::error_code& ec);
  static void PollQuiet(const RunPtr& run, bool is_stdout);
  static void DrainQuiet(const RunPtr& run, bool is_stdout);
  static void OnLeaderExited(const RunPtr& run);
  static void WaitForExit(const RunPtr& run);
  static void MaybeFinish(const RunPtr& run);
  static RunResult MakeResult(ProcessRunner::Run& run);
  static void OnSpawned(const RunPtr& run);
  // Watches the status pipe until the profiler's exec closes it, or a failure or the start
  // deadline comes first.
  static void WatchStart(const RunPtr& run, int status_read);
  static void FailSpawn(const RunPtr& run, std::string why);
  static void SendStop(const RunPtr& run);
};

// What one spawn needs, made on the io thread, used by the spawn thread (which writes only the
// results below) and handed back through a post to the io thread (or, if the runner is
// destroyed first, read by its destructor after the spawn thread has been joined).
struct ProcessRunner::SpawnRequest {
  std::vector<std::string> env, args;
  std::vector<char*> envp, argv;
  std::vector<gid_t> groups;
  int out_read = -1, err_read = -1;      // ours: closed here unless taken by the run's streams
  int status_read = -1;                  // the status pipe's read end; closed here unless taken
  std::vector<std::string> helper_args;  // ckprofd-exec's, when the child switches uid
  std::vector<char*> helper_argv;
  ChildArgs child{};
  // Keeps the io_context running until the spawn is reported back: while a spawn is in flight
  // nothing else may be pending on it (no pipe nor pidfd is watched yet), and a daemon stopping
  // would otherwise see its io_context run out of work and exit with the run unreported.
  asio::any_io_executor work;
  pid_t pid = -1;       // the child, once cloned
  int clone_errno = 0;  // when the clone itself failed

  ~SpawnRequest() {
    if (out_read >= 0) close(out_read);
    if (err_read >= 0) close(err_read);
    if (status_read >= 0) close(status_read);
  }
};

// The runner's output poll (see OutPipe): one timer for every run, armed only while a quiet
// pipe is open, so an idle daemon never wakes for it. Shared with its pending handler, which
// does nothing once `owner` is null (runner gone).
struct ProcessRunner::OutputPoll {
  explicit OutputPoll(asio::any_io_executor ex) : timer(std::move(ex)) {}
  asio::steady_timer timer;
  ProcessRunner* owner = nullptr;
  bool armed = false;
};

ProcessRunner::ProcessRunner(asio::any_io_executor ex, TaskCgroups* cgroups,
                             std::string exec_helper)
    : ex_(ex),
      cgroups_(cgroups),
      exec_helper_(exec_helper.empty() ? FindExecHelper() : std::move(exec_helper)),
      read_buf_(kReadChunk),
      poll_(std::make_shared<OutputPoll>(ex)),
      spawner_(std::make_unique<SpawnThread>()) {
  poll_->owner = this;
}

void ProcessRunner::ArmOutputPoll() {
  if (poll_->armed) return;
  poll_->armed = true;
  poll_->timer.expires_after(kOutputPollStep);
  poll_->timer.async_wait([poll = poll_](const asio::error_code& ec) {
    poll->armed = false;
    if (ec || poll->owner == nullptr) return;
    poll->owner->PollOutput();
  });
}

void ProcessRunner::PollOutput() {
  std::vector<std::shared_ptr<Run>> quiet;
  for (const auto& [id, run] : runs_) {
    if (run->out.quiet() || run->err.quiet()) quiet.push_back(run);
  }
  bool again = false;
  for (const auto& run : quiet) {
    RunSteps::PollQuiet(run, true);
    RunSteps::PollQuiet(run, false);
    again = again || run->out.quiet() || run->err.quiet();
  }
  if (again) ArmOutputPoll();
}

ProcessRunner::~ProcessRunner() {
  poll_->owner = nullptr;
  poll_->timer.cancel();
  spawner_.reset();  // no clone in progress from here on
  for (auto& [id, run] : runs_) {
    // Spawned, but not reported back to this thread yet: it is ours to kill and reap.
    if (run->spawning && run->spawning->pid > 0) run->pid = run->spawning->pid;
    // (A run whose leader has exited had its group killed then; its id may be free by now.)
    if (run->pid > 0 && !run->Exited()) {
      kill(-run->pid, SIGKILL);
      int status = 0;
      while (waitpid(run->pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    if (run->cgroup) {
      run->cgroup->Kill();
      cgroups_->Release(std::move(run->cgroup));  // removed once empty
    }
    run->owner = nullptr;
    run->CloseAll();
  }
}

size_t ProcessRunner::running() const { return runs_.size(); }

pid_t ProcessRunner::RunningPid(RunId id) const {
  auto it = runs_.find(id);
  if (it == runs_.end() || it->second->Exited() || it->second->spawn_error) return -1;
  return it->second->pid;
}

std::optional<RunOutput> ProcessRunner::Output(RunId id) const {
  auto it = runs_.find(id);
  if (it == runs_.end()) return std::nullopt;
  return RunOutput{it->second->out_cap.Text(), it->second->err_cap.Text()};
}

// Reads what the pipe holds, up to `max_reads` reads, into the runner's one buffer (every
// handler runs on the same thread): no buffer per run to allocate and clear. A short read ends
// the pass (the pipe is empty for now) unless `to_end`: then only EAGAIN or EOF does, so that a
// drain after the writer's exit sees the EOF.
ReadPass RunSteps::ReadAvailable(ProcessRunner::Run& run, bool is_stdout, int max_reads,
                                 bool to_end) {
  OutPipe& pipe = is_stdout ? run.out : run.err;
  std::vector<char>& buf = run.owner->read_buf_;
  ReadPass pass;
  for (int i = 0; i < max_reads; ++i) {
    ssize_t n = read(pipe.native(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) {
      --i;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return pass;
    if (n <= 0) {
      pass.eof = true;
      return pass;
    }
    std::string_view data(buf.data(), static_cast<size_t>(n));
    pass.bytes += data.size();
    if (is_stdout) {
      run.out_cap.Add(data);
      run.parser.Feed(data);
    } else {
      run.err_cap.Add(data);
      run.parser.FeedStderr(data);
    }
    if (run.spec.on_output) run.spec.on_output(!is_stdout, data);
    if (!to_end && static_cast<size_t>(n) < buf.size()) return pass;  // drained for now
  }
  pass.more = true;
  return pass;
}

// A watched pipe: waits for it to be readable, then reads.
void RunSteps::ReadMore(const RunPtr& run, bool is_stdout) {
  auto& stream = (is_stdout ? run->out : run->err).stream;
  stream.async_wait(
      asio::posix::stream_descriptor::wait_read,
      [run, is_stdout](const asio::error_code& ec) { OnReadable(run, is_stdout, ec); });
}

void RunSteps::OnReadable(const RunPtr& run, bool is_stdout, const asio::error_code& ec) {
  if (!run->Alive()) return;
  OutPipe& pipe = is_stdout ? run->out : run->err;
  if (!pipe.open()) return;  // closed by the drain timer
  if (ec || ReadAvailable(*run, is_stdout, kReadsPerWakeup).eof) {
    pipe.Close();
    MaybeFinish(run);
    return;
  }
  ReadMore(run, is_stdout);
}

// The output poll's visit to a quiet pipe of a running profiler.
void RunSteps::PollQuiet(const RunPtr& run, bool is_stdout) {
  OutPipe& pipe = is_stdout ? run->out : run->err;
  if (!run->Alive() || !pipe.quiet()) return;
  const ReadPass pass = ReadAvailable(*run, is_stdout, kReadsPerWakeup);
  if (pass.eof) {
    pipe.Close();  // closed its end early; the leader's exit finishes the run
    MaybeFinish(run);
  } else if (pass.more || pass.bytes >= kWatchAfterBytes) {
    if (pipe.Watch()) ReadMore(run, is_stdout);
  }
}

// The leader has exited: reads what its quiet pipe holds. A pipe still open after that (a
// process that left the group holds it, or it is still being written) is watched until EOF or
// the drain timer.
void RunSteps::DrainQuiet(const RunPtr& run, bool is_stdout) {
  OutPipe& pipe = is_stdout ? run->out : run->err;
  if (!pipe.quiet()) return;
  const ReadPass pass = ReadAvailable(*run, is_stdout, 4 * kReadsPerWakeup, /*to_end=*/true);
  if (pass.eof) {
    pipe.Close();
  } else if (pipe.Watch()) {
    ReadMore(run, is_stdout);
  }
}

// The leader has exited (it is a zombie, or already reaped elsewhere): kill what is left of
// its group while the zombie still pins the group id, reap, then wait for the pipes to drain.
void RunSteps::OnLeaderExited(const RunPtr& run) {
  if (run->Exited()) return;
  kill(-run->pid, SIGKILL);
  // What left the group (setsid, a double fork) is still in the run's cgroup.
  if (run->cgroup) run->cgroup->Kill();
  int status = 0;
  pid_t r;
  rusage usage{};
  while ((r = wait4(run->pid, &status, 0, &usage)) < 0 && errno == EINTR) {
  }
  if (r == run->pid) run->leader_usage = usage;
  run->phase = RunPhase::kLeaderExited;
  run->status_known = r == run->pid;
  run->wait_status = status;
  run->timeout_timer.cancel();
  run->grace_timer.cancel();
  run->exit_poll_timer.cancel();
  asio::error_code ec;
  run->pidfd.close(ec);
  DrainQuiet(run, true);
  DrainQuiet(run, false);
  if (run->out.open() || run->err.open()) {
    run->drain_timer.expires_after(run->spec.drain);
    run->drain_timer.async_wait([run](const asio::error_code& ec) {
      if (ec || !run->Alive()) return;
      run->out.Close();
      run->err.Close();
      MaybeFinish(run);
    });
  }
  MaybeFinish(run);
}

void RunSteps::WaitForExit(const RunPtr& run) {
  if (run->pidfd.is_open()) {
    run->pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                          [run](const asio::error_code& ec) {
                            if (ec || !run->Alive() || run->Exited()) return;
                            if (HasExited(run->pid)) {
                              OnLeaderExited(run);
                            } else {
                              WaitForExit(run);
                            }
                          });
    return;
  }
  run->exit_poll_timer.expires_after(kExitPollStep);
  run->exit_poll_timer.async_wait([run](const asio::error_code& ec) {
    if (ec || !run->Alive() || run->Exited()) return;
    if (HasExited(run->pid)) {
      OnLeaderExited(run);
    } else {
      WaitForExit(run);
    }
  });
}

RunResult RunSteps::MakeResult(ProcessRunner::Run& run) {
  RunResult r;
  r.pid = run.pid;
  r.started_at = run.started_at;
  r.ended_at = std::chrono::system_clock::now();
  r.elapsed_s = std::chrono::duration<double>(SteadyClock::now() - run.started_steady).count();
  run.parser.Finish();
  r.perf = run.parser.perf();
  r.stdout_bytes = run.out_cap.total();
  r.stderr_bytes = run.err_cap.total();
  r.stdout_capture = run.out_cap.Text();
  r.stderr_capture = run.err_cap.Text();
  const bool signaled = run.status_known && WIFSIGNALED(run.wait_status);
  if (run.spawn_error || run.start_error) {
    r.outcome.kind = Outcome::Kind::kSpawnFailed;
    r.outcome.reason = run.spawn_error ? *run.spawn_error : *run.start_error;
  } else if (run.stop_kind) {
    r.outcome.kind = *run.stop_kind;
    if (signaled) r.outcome.signal = WTERMSIG(run.wait_status);
    // Stop() is asked for one of three kinds: timed out, cancelled, else interrupted.
    if (*run.stop_kind == Outcome::Kind::kTimedOut) {
      r.outcome.reason = "timed out after " +
                         FormatSeconds(std::chrono::duration<double>(run.spec.timeout).count());
    } else if (*run.stop_kind == Outcome::Kind::kCancelled) {
      r.outcome.reason = "cancelled";
    } else {
      r.outcome.reason = "interrupted (daemon shutdown)";
    }
    if (run.kill_sent) {
      r.outcome.reason += " (still running " +
                          FormatSeconds(std::chrono::duration<double>(run.spec.grace).count()) +
                          " after SIGTERM: killed)";
    }
  } else if (!run.status_known) {
    r.outcome.kind = Outcome::Kind::kFailed;
    r.outcome.exit_code = -1;
    r.outcome.reason = "exit status lost: the child was reaped elsewhere (SIGCHLD ignored?)";
  } else if (signaled) {
    r.outcome = ClassifyExit(true, WTERMSIG(run.wait_status), r.perf, r.stderr_capture);
  } else {
    r.outcome = ClassifyExit(false, WEXITSTATUS(run.wait_status), r.perf, r.stderr_capture);
  }
  return r;
}

void RunSteps::MaybeFinish(const RunPtr& run) {
  if (!run->Alive() || !run->Exited() || run->out.open() || run->err.open() ||
      run->exec_status.is_open()) {
    return;
  }
  // Members of the group (and of the cgroup) killed after the leader may still be dying: wait
  // until none is live.
  TaskCgroups* cgroups = run->owner->cgroups_;
  const bool group_alive =
      run->pid > 0 && !run->spawn_error && kill(-run->pid, 0) == 0 && ProcessGroupAlive(run->pid);
  const bool cgroup_alive = run->cgroup && !run->cgroup->Empty();
  if (group_alive || cgroup_alive) {
    auto now = SteadyClock::now();
    if (run->phase != RunPhase::kSettling) {
      run->phase = RunPhase::kSettling;
      run->settle_deadline = now + kSettleLimit;
    }
    if (now < run->settle_deadline) {
      if (group_alive) kill(-run->pid, SIGKILL);
      if (cgroup_alive) run->cgroup->Kill();
      run->drain_timer.expires_after(kSettleStep);
      run->drain_timer.async_wait([run](const asio::error_code& ec) {
        if (!ec) MaybeFinish(run);
      });
      return;
    }
  }
  run->phase = RunPhase::kFinished;
  run->CloseAll();
  RunResult result = MakeResult(*run);
  if (run->cgroup) {
    const RunCgroup::Usage u = run->cgroup->Read();
    if (u.cpu_s) {
      result.cpu_s = u.cpu_s;
      result.peak_memory_bytes = u.peak_memory_bytes;
      result.usage_from = "cgroup";
    }
    cgroups->Release(std::move(run->cgroup));  // empty: serves another run
  }
  if (run->leader_usage) {
    // Without the cgroup's count: the leader's, with the children it waited for; without the
    // memory controller (no memory.peak): the largest resident set among those.
    const rusage& u = *run->leader_usage;
    if (result.usage_from.empty()) {
      result.cpu_s = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                     static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
      result.usage_from = "rusage";
    }
    if (!result.peak_memory_bytes) {
      result.peak_memory_bytes = static_cast<uint64_t>(u.ru_maxrss) * 1024;
    }
  }
  ProcessRunner* owner = run->owner;
  auto on_done = std::move(run->on_done);
  owner->Forget(run->id);  // may destroy everything but `run` itself, which we hold
  if (on_done) on_done(std::move(result));
}

ProcessRunner::RunId ProcessRunner::Start(RunSpec spec, std::function<void(RunResult)> on_done) {
  const RunId id = next_id_++;
  auto run = std::make_shared<Run>(ex_, std::move(spec));
  run->id = id;
  run->owner = this;
  run->on_done = std::move(on_done);
  run->started_at = std::chrono::system_clock::now();
  run->started_steady = SteadyClock::now();
  runs_[id] = run;
  const RunSpec& s = run->spec;

  auto fail_spawn = [&](std::string why) {
    run->spawn_error = std::move(why);
    run->phase = RunPhase::kLeaderExited;
    asio::post(ex_, [run] { RunSteps::MaybeFinish(run); });
    return id;
  };
  if (s.argv.empty() || s.argv[0].empty()) return fail_spawn("empty command");

  // Everything the child needs, prepared before the clone (the child may only make
  // async-signal-safe calls).
  auto req = std::make_shared<SpawnRequest>();
  std::vector<std::string> base;
  if (s.base_env) {
    base = *s.base_env;
  } else {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) base.emplace_back(*e);
  }
  req->env = BuildChildEnvironment(base, s.set_env);
  for (auto& e : req->env) req->envp.push_back(e.data());
  req->envp.push_back(nullptr);
  req->args = s.argv;
  for (auto& a : req->args) req->argv.push_back(a.data());
  req->argv.push_back(nullptr);
  req->groups = s.groups.value_or(std::vector<gid_t>{});

  int out_pipe[2], err_pipe[2];
  // Non-blocking: our ends are read until EAGAIN (ReadMore); the child clears it on its own.
  constexpr int kPipeFlags = O_CLOEXEC | O_NONBLOCK;
  if (pipe2(out_pipe, kPipeFlags) != 0) return fail_spawn(std::string("pipe: ") + strerror(errno));
  if (pipe2(err_pipe, kPipeFlags) != 0) {
    int e = errno;
    close(out_pipe[0]);
    close(out_pipe[1]);
    return fail_spawn(std::string("pipe: ") + strerror(e));
  }
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    return fail_spawn(std::string("pipe: ") + strerror(e));
  }
  req->out_read = out_pipe[0];
  req->err_read = err_pipe[0];
  req->status_read = status_pipe[0];
  req->work = asio::prefer(ex_, asio::execution::outstanding_work.tracked);
  ChildArgs& child = req->child;
  child.out_fd = out_pipe[1];
  child.err_fd = err_pipe[1];
  child.path = req->argv[0];
  child.argv = req->argv.data();
  child.envp = req->envp.data();
  child.set_groups = s.groups.has_value();
  child.groups = req->groups.data();
  child.n_groups = req->groups.size();
  child.gid = s.gid ? static_cast<int64_t>(*s.gid) : -1;
  child.uid = s.uid ? static_cast<int64_t>(*s.uid) : -1;
  child.cwd = s.cwd.c_str();
  child.exec_fd = s.exec_fd;
  child.status_fd = status_pipe[1];
  child.status_read_fd = status_pipe[0];
  child.reset_nice = OwnNiceIsRaised();
  if (s.uid && *s.uid != geteuid()) {
    // Another user's process: started through ckprofd-exec (spawn.h), never switched here.
    if (exec_helper_.empty()) {
      close(status_pipe[1]);
      close(out_pipe[1]);
      close(err_pipe[1]);
      return fail_spawn(
          "ckprofd-exec was not found beside ckprofd (nor in ../libexec/ckprof/): a profiler "
          "cannot be started as another user without it; reinstall ckprofd");
    }
    req->helper_args = HelperArguments(exec_helper_, child);
    for (auto& a : req->helper_args) req->helper_argv.push_back(a.data());
    req->helper_argv.push_back(nullptr);
    child.helper = exec_helper_.c_str();
    child.helper_argv = req->helper_argv.data();
  }
  if (cgroups_) {
    // Without its cgroup a run still runs, in its process group alone (and says so).
    auto cgroup = cgroups_->Acquire();
    if (cgroup) {
      run->cgroup = std::move(*cgroup);
      child.cgroup_fd = run->cgroup->procs_fd();
    } else {
      spdlog::warn("run {}: {}; process group alone", id, cgroup.error());
    }
  }
  // The spawn thread writes the outcome into the request, then hands the run back here. The
  // request outlives the clone: the run holds it, and the callback holds the run.
  SpawnRequest* outcome = req.get();
  run->spawning = std::move(req);
  spawner_->Post(&child, [run, outcome, ex = ex_](pid_t pid, int clone_errno) {
    outcome->pid = pid;
    outcome->clone_errno = clone_errno;
    asio::post(ex, [run] { RunSteps::OnSpawned(run); });
  });
  return id;
}

// Back on the io thread with the spawn's outcome.
void RunSteps::OnSpawned(const RunPtr& run) {
  if (!run->Alive()) return;  // the runner is gone (its destructor reaped the child)
  std::shared_ptr<ProcessRunner::SpawnRequest> req = std::move(run->spawning);
  const RunSpec& s = run->spec;
  if (req->pid < 0) {
    FailSpawn(run, std::string("clone: ") + strerror(req->clone_errno));
    return;
  }
  run->pid = req->pid;
  run->phase = RunPhase::kRunning;
  if (req->child.error.stage != SpawnStage::kNone) {
    int status = 0;
    while (waitpid(run->pid, &status, 0) < 0 && errno == EINTR) {
    }
    FailSpawn(run, SpawnErrorText(req->child));
    return;
  }

  asio::error_code ec;
  run->out.OpenQuiet(std::exchange(req->out_read, -1));
  run->err.OpenQuiet(std::exchange(req->err_read, -1));
  WatchStart(run, std::exchange(req->status_read, -1));
  run->owner->ArmOutputPoll();
  int pidfd = PidfdOpen(run->pid);
  if (pidfd >= 0) {
    run->pidfd.assign(pidfd, ec);
    if (ec) close(pidfd);
  }
  WaitForExit(run);
  if (s.timeout.count() > 0) {
    run->timeout_timer.expires_after(s.timeout);
    run->timeout_timer.async_wait([run](const asio::error_code& ec) {
      if (ec || !run->Alive() || run->Exited()) return;
      run->owner->Stop(run->id, Outcome::Kind::kTimedOut);
    });
  }
  if (s.on_started) s.on_started(run->pid);
  if (run->Alive() && run->stop_kind && !run->Exited()) SendStop(run);  // asked before it existed
}

void RunSteps::WatchStart(const RunPtr& run, int status_read) {
  if (status_read < 0) return;
  asio::error_code ec;
  run->exec_status.assign(status_read, ec);
  if (ec) {
    close(status_read);
    return;
  }
  run->exec_timer.expires_after(run->spec.start_timeout);
  run->exec_timer.async_wait([run](const asio::error_code& ec) {
    if (ec || !run->Alive() || run->Exited() || !run->exec_status.is_open()) return;
    run->start_error =
        "did not start within " +
        FormatSeconds(std::chrono::duration<double>(run->spec.start_timeout).count()) +
        ": stopped (SIGSTOP) or stuck before it could run the profiler (a working directory "
        "that does not answer?); killed";
    asio::error_code ignored;
    run->exec_status.close(ignored);
    kill(-run->pid, SIGKILL);
    if (run->cgroup) run->cgroup->Kill();
  });
  asio::async_read(
      run->exec_status, asio::buffer(&run->exec_report, sizeof run->exec_report),
      [run](const asio::error_code& ec, size_t n) {
        if (!run->Alive() || !run->exec_status.is_open()) return;
        run->exec_timer.cancel();
        if (!ec && n == sizeof run->exec_report && run->exec_report.stage != SpawnStage::kNone) {
          // The child or ckprofd-exec said why it could not run the profiler (it exits 127).
          ChildArgs said{};
          said.error = run->exec_report;
          said.path = run->spec.argv[0].c_str();
          said.cwd = run->spec.cwd.c_str();
          said.uid = run->spec.uid ? static_cast<int64_t>(*run->spec.uid) : -1;
          said.gid = run->spec.gid ? static_cast<int64_t>(*run->spec.gid) : -1;
          run->start_error = SpawnErrorText(said);
        }
        // Else EOF: the profiler's exec closed the pipe; it runs.
        asio::error_code ignored;
        run->exec_status.close(ignored);
        MaybeFinish(run);
      });
}

void RunSteps::FailSpawn(const RunPtr& run, std::string why) {
  run->spawn_error = std::move(why);
  run->phase = RunPhase::kLeaderExited;
  MaybeFinish(run);
}

bool ProcessRunner::Stop(RunId id, Outcome::Kind kind) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return false;
  auto run = it->second;
  if (run->Exited() || run->stop_kind || run->spawn_error) return false;
  if (run->spawning) {
    run->stop_kind = kind;  // stopped as soon as the spawn is reported back
    return true;
  }
  // It beat us to it: the exit watcher will report how it really ended.
  if (HasExited(run->pid)) return false;
  run->stop_kind = kind;
  RunSteps::SendStop(run);
  return true;
}

void RunSteps::SendStop(const RunPtr& run) {
  run->timeout_timer.cancel();
  kill(-run->pid, SIGTERM);
  run->grace_timer.expires_after(run->spec.grace);
  run->grace_timer.async_wait([run](const asio::error_code& ec) {
    if (ec || !run->Alive() || run->Exited()) return;
    run->kill_sent = true;
    kill(-run->pid, SIGKILL);
    // Also what left the group: everything in the run's cgroup, at once.
    if (run->cgroup) run->cgroup->Kill();
  });
}

bool ProcessRunner::Cancel(RunId id) { return Stop(id, Outcome::Kind::kCancelled); }

bool ProcessRunner::Interrupt(RunId id) { return Stop(id, Outcome::Kind::kInterrupted); }

}  // namespace ckprof
