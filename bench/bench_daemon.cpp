// bench_daemon: drives a real ckprofd through the client's Connection and measures it.
//
// Each mode starts its own ckprofd (--gpus 0-(G-1), the emulator as profiler) on a socket in a
// fresh directory, waits for its READY=1 (sd_notify), does its work, stops it with SIGTERM, and
// prints one JSON object on stdout for bench/bench.py to tabulate. Times come from the steady
// clock; the daemon's CPU time and RSS from /proc/PID/stat and /proc/PID/status; idle gaps from
// the daemon's own records (the attempts table of its SQLite database).
//
//   bench_daemon commands --configs FILE --profiler PATH --out FILE
//       writes the command lines ckprofd would run for FILE, one JSON argv array per line
//   bench_daemon run --configs FILE [common options]
//       submit -> job finished: wall time, tasks/s, daemon CPU, idle gaps per GPU
//   bench_daemon scale --configs FILE [--clients 32] [--poll-ms 100] [--poll-seconds 20]
//                      [--idle-seconds 10] [common options]
//       submit latency, RSS after submit (at once and 1 s later) and at the end, status latency
//       under polling clients while the GPUs run, daemon CPU time while idle
// common options: --ckprofd PATH --emulator PATH --dir DIR [--gpus 8] [--env K=V]...
//                 [--nice N] (the daemon's nice value, as systemd/ckprofd.service sets it)
//                 [--order rank|longest-first] (the job's task order, as ckprof submit --order)
//                 [--config FILE] (a ckprofd config file)
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/connection.h"
#include "client/local_daemon.h"
#include "common/command_plan.h"
#include "common/convert.h"
#include "common/profiler_path.h"
#include "common/protocol.h"
#include "daemon/process_util.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The daemon we started, stopped by Die too (std::exit runs no destructors).
pid_t g_daemon_pid = -1;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "bench_daemon: %s\n", what.c_str());
  if (g_daemon_pid > 0) {
    kill(g_daemon_pid, SIGTERM);
    waitpid(g_daemon_pid, nullptr, 0);
  }
  std::exit(1);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

json Stats(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return json{{"n", v.size()},
              {"p50", Percentile(v, 0.5)},
              {"p99", Percentile(v, 0.99)},
              {"max", v.empty() ? 0 : *std::max_element(v.begin(), v.end())},
              {"mean", v.empty() ? 0 : sum / static_cast<double>(v.size())}};
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// utime + stime of `pid`, in seconds; with `children`, that of the children it has reaped.
double CpuSeconds(pid_t pid, bool children = false) {
  auto st = ckprof::ReadProcStat(pid);
  if (!st) return 0;
  return children ? st->cutime_s + st->cstime_s : st->utime_s + st->stime_s;
}

// This process's own user + system CPU time, in seconds (its children not counted).
double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// A field of /proc/PID/status in MiB ("VmRSS", "VmHWM").
double StatusMiB(pid_t pid, const std::string& field) {
  return std::max<int64_t>(ckprof::ProcStatusKiB(pid, field), 0) / 1024.0;
}

struct Common {
  std::string ckprofd, emulator, dir, configs;
  int gpus = 8;
  int nice = 0;        // the daemon's nice value (systemd/ckprofd.service: Nice=-5)
  std::string order;   // the job's task order (ckprof submit --order)
  std::string config;  // a ckprofd config file (--config), e.g. to watch a fake sysfs tree
  std::vector<std::string> env;
};

// A ckprofd started for the benchmark; stopped (SIGTERM, wait) on destruction.
class Daemon {
 public:
  explicit Daemon(const Common& c) : dir_(c.dir) {
    std::filesystem::create_directories(dir_);
    auto notify = ckprof::NotifySocket::Bind(dir_ + "/notify.sock");
    if (!notify) Die(notify.error());
    std::vector<std::string> argv = {c.ckprofd,
                                     "--socket",
                                     socket(),
                                     "--state-dir",
                                     state_dir(),
                                     "--gpus",
                                     "0-" + std::to_string(c.gpus - 1),
                                     "--profiler-path",
                                     c.emulator,
                                     "--log-level",
                                     "warn"};
    if (!c.config.empty()) argv.insert(argv.end(), {"--config", c.config});
    ckprof::DaemonProcessSpec spec;
    spec.argv = std::move(argv);
    spec.env = ckprof::EnvironmentForDaemon();
    spec.env.insert(spec.env.end(), c.env.begin(), c.env.end());
    spec.env.push_back("NOTIFY_SOCKET=" + notify->path());
    const std::string log = dir_ + "/ckprofd.log";
    spec.log_path = log;
    spec.nice = c.nice;
    auto pid = ckprof::StartDaemonProcess(spec);
    if (!pid) Die("cannot start ckprofd: " + pid.error());
    pid_ = *pid;
    g_daemon_pid = pid_;
    switch (notify->WaitReady(pid_, 60000, nullptr)) {
      case ckprof::NotifySocket::Wait::kReady:
        return;
      case ckprof::NotifySocket::Wait::kExited:
        pid_ = g_daemon_pid = -1;
        Die("ckprofd exited at start: " + ReadAll(log));
      case ckprof::NotifySocket::Wait::kTimedOut:
        Die("ckprofd not ready within 60 s; see " + log);
    }
  }
  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      g_daemon_pid = -1;
    }
  }
  pid_t pid() const { return pid_; }
  std::string socket() const { return dir_ + "/ckprofd.sock"; }
  std::string state_dir() const { return dir_ + "/state"; }
  std::string db_path() const { return state_dir() + "/ckprofd.db"; }

 private:
  std::string dir_;
  pid_t pid_ = -1;
};

std::unique_ptr<ckprof::Connection> Connect(const std::string& socket) {
  auto c = ckprof::Connection::Open(socket);
  if (!c) Die(c.error());
  return std::move(*c);
}

// Submits the configs file; returns the job id.
int64_t Submit(ckprof::Connection& conn, const Common& c, const std::string& content) {
  ckprof::SubmitRequest r;
  // As `ckprof submit` sends it: over 1 MiB, gzip+base64 (timed: it is part of the user's wait).
  if (ckprof::Status s = ckprof::EncodeSubmitContent(content, &r.submit); !s) {
    Die("submit: " + s.error());
  }
  r.submit.input_name = std::filesystem::path(c.configs).filename();
  r.submit.name = "bench";
  r.submit.profiler_path = c.emulator;
  r.submit.cwd = c.dir;
  if (!c.order.empty() && !ckprof::ParseEnum(c.order, &r.submit.order)) {
    Die("--order must be rank or longest-first, got '" + c.order + "'");
  }
  auto answer = conn.CallJson(r);
  if (!answer) Die("submit: " + answer.error());
  return answer->value("job_id", int64_t{0});
}

// Waits for the job's job_finished event (or the end of the stream), as `ckprof wait` does:
// no task events.
void WaitForJob(ckprof::Connection& conn, int64_t job_id) {
  ckprof::Status s = conn.Watch(
      job_id, [](const json& f) { return f.value("event", std::string()) != "job_finished"; },
      /*end_only=*/true);
  if (!s) Die("watch: " + s.error());
}

// Idle gaps from the daemon's records: per GPU, next started_at - previous ended_at (ms), and
// each attempt's recorded duration (ms).
void GapsFromStore(const std::string& db_path, int64_t job_id, std::vector<double>* gaps,
                   std::vector<double>* durations) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    Die("cannot open " + db_path);
  }
  sqlite3_stmt* q = nullptr;
  const char* sql =
      "SELECT a.gpu, a.started_at, a.ended_at FROM attempts a JOIN tasks t ON t.id = a.task_id "
      "WHERE t.job_id = ? AND a.gpu >= 0 AND a.ended_at > 0 ORDER BY a.gpu, a.started_at";
  if (sqlite3_prepare_v2(db, sql, -1, &q, nullptr) != SQLITE_OK) Die(sqlite3_errmsg(db));
  sqlite3_bind_int64(q, 1, job_id);
  int prev_gpu = -1;
  double prev_end = 0;
  while (sqlite3_step(q) == SQLITE_ROW) {
    const int gpu = sqlite3_column_int(q, 0);
    const double start = sqlite3_column_double(q, 1), end = sqlite3_column_double(q, 2);
    if (gpu == prev_gpu) gaps->push_back((start - prev_end) * 1e3);
    durations->push_back((end - start) * 1e3);
    prev_gpu = gpu;
    prev_end = end;
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
}

int RunMode(const Common& c) {
  const std::string content = ReadAll(c.configs);
  Daemon d(c);
  auto conn = Connect(d.socket());
  auto watch = Connect(d.socket());
  const double cpu0 = CpuSeconds(d.pid()), children0 = CpuSeconds(d.pid(), true);
  const double self0 = SelfCpuSeconds();
  const auto t0 = Clock::now();
  const int64_t job = Submit(*conn, c, content);
  const double submit_s = Since(t0);
  WaitForJob(*watch, job);
  const double wall = Since(t0);
  const double cpu = CpuSeconds(d.pid()) - cpu0;
  const double client_cpu = SelfCpuSeconds() - self0;
  const double profiler_cpu = CpuSeconds(d.pid(), true) - children0;
  auto status = conn->CallJson([&] {
    ckprof::StatusRequest r;
    r.job_id = job;
    return r;
  }());
  if (!status) Die("status: " + status.error());
  const json& js = (*status)["job"];
  std::vector<double> gaps, durations;
  GapsFromStore(d.db_path(), job, &gaps, &durations);
  const int64_t tasks = js.value("total", int64_t{0});
  json out = {{"tasks", tasks},
              {"succeeded", js.value("succeeded", int64_t{0})},
              {"failed", js.value("failed", int64_t{0})},
              {"submit_s", submit_s},
              {"seconds", wall},
              {"tasks_per_s", wall > 0 ? static_cast<double>(tasks) / wall : 0},
              {"daemon_cpu_s", cpu},
              {"client_cpu_s", client_cpu},
              {"profiler_cpu_s", profiler_cpu},
              {"daemon_rss_mib", StatusMiB(d.pid(), "VmRSS")},
              {"gap_ms", Stats(gaps)},
              {"duration_ms", Stats(durations)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int ScaleMode(const Common& c, int clients, int poll_ms, double poll_seconds, double idle_seconds) {
  const std::string content = ReadAll(c.configs);
  Daemon d(c);
  const double rss_start = StatusMiB(d.pid(), "VmRSS");
  auto conn = Connect(d.socket());
  auto t0 = Clock::now();
  const int64_t job = Submit(*conn, c, content);
  const double submit_s = Since(t0);
  const double rss_after_submit = StatusMiB(d.pid(), "VmRSS");
  // Settled: a second later, once the request's buffers are gone and the GPUs have started.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double rss_settled = StatusMiB(d.pid(), "VmRSS");

  auto status_of = [&](ckprof::Connection& cn) {
    ckprof::StatusRequest r;
    r.job_id = job;
    auto a = cn.CallJson(r);
    if (!a) Die("status: " + a.error());
    return (*a)["job"];
  };
  const int64_t done_before = status_of(*conn).value("succeeded", int64_t{0});

  // Polling clients: each opens a connection (hello), asks for the job's status and closes,
  // as `ckprof status JOB` does, every poll_ms; latency is the whole exchange.
  std::mutex mu;
  std::vector<double> latencies;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const double cpu0 = CpuSeconds(d.pid());
  t0 = Clock::now();
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      std::vector<double> mine;
      // Spread the clients' phases over the interval.
      std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms * i / std::max(clients, 1)));
      auto next = Clock::now();
      while (!stop.load()) {
        const auto s = Clock::now();
        {
          auto cn = Connect(d.socket());
          status_of(*cn);
        }
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
        next += std::chrono::milliseconds(poll_ms);
        std::this_thread::sleep_until(std::max(next, Clock::now()));
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(poll_seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double polled_s = Since(t0);
  const double busy_cpu = CpuSeconds(d.pid()) - cpu0;
  const json during = status_of(*conn);
  const int64_t done_during = during.value("succeeded", int64_t{0}) - done_before;
  const double rss_busy = StatusMiB(d.pid(), "VmRSS");

  // The end: cancel what is left, wait for the job to end, then stay idle.
  {
    ckprof::CancelRequest r;
    r.job_id = job;
    if (auto a = conn->CallJson(r); !a) Die("cancel: " + a.error());
  }
  auto watch = Connect(d.socket());
  WaitForJob(*watch, job);
  watch.reset();
  conn.reset();
  const double rss_end = StatusMiB(d.pid(), "VmRSS");
  const double idle_cpu0 = CpuSeconds(d.pid());
  std::this_thread::sleep_for(std::chrono::duration<double>(idle_seconds));
  const double idle_cpu = CpuSeconds(d.pid()) - idle_cpu0;
  json out = {{"configs", during.value("total", int64_t{0})},
              {"submit_s", submit_s},
              {"rss_start_mib", rss_start},
              {"rss_after_submit_mib", rss_after_submit},
              {"rss_settled_mib", rss_settled},
              {"rss_busy_mib", rss_busy},
              {"rss_end_mib", rss_end},
              {"hwm_mib", StatusMiB(d.pid(), "VmHWM")},
              {"clients", clients},
              {"poll_ms", poll_ms},
              {"polled_s", polled_s},
              {"tasks_done_while_polled", done_during},
              {"busy_cpu_s", busy_cpu},
              {"status_ms", Stats(latencies)},
              {"idle_s", idle_seconds},
              {"idle_cpu_s", idle_cpu}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int CommandsMode(const std::string& configs, const std::string& profiler, const std::string& out) {
  auto conv = ckprof::ConvertFile(configs, ckprof::ConvertOptions{});
  if (!conv) Die(configs + ": " + conv.error());
  auto target = ckprof::ResolveProfiler(profiler);
  if (!target) Die(target.error());
  std::ofstream o(out);
  size_t n = 0;
  for (const auto& p : ckprof::PlanCommands(*target, conv->configs)) {
    if (p.argv.empty()) Die("config " + std::to_string(p.position) + ": " + p.error);
    o << json(p.argv).dump() << '\n';
    ++n;
  }
  if (!o.flush()) Die("cannot write " + out);
  std::printf("%s\n", json{{"commands", n}}.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_daemon commands|run|scale [options] (see the source)\n");
    return 2;
  }
  const std::string mode = argv[1];
  Common c;
  std::string profiler, out;
  int clients = 32, poll_ms = 100;
  double poll_seconds = 20, idle_seconds = 10;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--ckprofd")
      c.ckprofd = value();
    else if (a == "--emulator")
      c.emulator = value();
    else if (a == "--dir")
      c.dir = value();
    else if (a == "--configs")
      c.configs = value();
    else if (a == "--gpus")
      c.gpus = std::atoi(value().c_str());
    else if (a == "--env")
      c.env.push_back(value());
    else if (a == "--nice")
      c.nice = std::atoi(value().c_str());
    else if (a == "--order")
      c.order = value();
    else if (a == "--config")
      c.config = value();
    else if (a == "--profiler")
      profiler = value();
    else if (a == "--out")
      out = value();
    else if (a == "--clients")
      clients = std::atoi(value().c_str());
    else if (a == "--poll-ms")
      poll_ms = std::atoi(value().c_str());
    else if (a == "--poll-seconds")
      poll_seconds = std::atof(value().c_str());
    else if (a == "--idle-seconds")
      idle_seconds = std::atof(value().c_str());
    else
      Die("unknown option " + a);
  }
  signal(SIGPIPE, SIG_IGN);
  if (mode == "commands") return CommandsMode(c.configs, profiler, out);
  if (c.ckprofd.empty() || c.emulator.empty() || c.dir.empty() || c.configs.empty()) {
    Die("--ckprofd, --emulator, --dir and --configs are required");
  }
  if (mode == "run") return RunMode(c);
  if (mode == "scale") return ScaleMode(c, clients, poll_ms, poll_seconds, idle_seconds);
  Die("unknown mode " + mode);
}
