// ckprof-agent: runs inside a Slurm allocation that ckprofd asked for (the Slurm executor's
// allocation mode, issue 35), as the allocation's user, and starts each profiler ckprofd sends
// it on the GPUs Slurm granted, the way ckprofd starts a local one (ProcessRunner: own process
// group, timeout, captures parsed by CkOutputParser); what each run reports goes back whole
// (run_result_codec), so results are the same as a local run's.
//
// It connects to ckprofd (--connect HOST:PORT, or the address ckprofd last wrote into
// --address-file, read again before each connection) over TCP and authenticates every line both
// ways with the allocation's secret (daemon/agent_channel.h). Should the connection drop (ckprofd
// restarted), its runs go on and it connects again; a run's end is sent until ckprofd
// acknowledges it, so that none is lost and ckprofd, which knows which it has recorded, counts
// none twice. Messages, one JSON object per sealed line:
//   agent -> ckprofd  {"type":"ready","node","gpus","pin","pid","running":[{"run","gpu"}...],
//                      "ended":[run ids not acknowledged]}  (each connection, first)
//                     {"type":"started","run","pid"}
//                     {"type":"output","run","stderr","data"}  (live output, for log -f)
//                     {"type":"ended","run","result":{RunResult}}  (until acknowledged)
//   ckprofd -> agent  {"type":"run","run","gpu","argv","set_env":[[K,V]...],"cwd","timeout_ms",
//                      "grace_ms","drain_ms","capture_head","capture_tail","top_k"}
//                     {"type":"cancel","run"}  {"type":"ack","run"}  {"type":"release"}
// It exits 0 when released, 3 when ckprofd has not answered for --reconnect-s while nothing ran
// (what it still held then, ckprofd's recovery requeues).
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read_until.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/json_util.h"
#include "daemon/agent_channel.h"
#include "daemon/run_result_codec.h"
#include "daemon/runner.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using asio::ip::tcp;
constexpr auto kTuple = asio::experimental::as_tuple(asio::use_awaitable);

// The longest line either end sends (a run's end carries its captures: 2 x 16 KiB by default).
constexpr size_t kMaxLine = 64 << 20;
// Live output queued for a slow connection beyond this is dropped (the run's end still has the
// captures).
constexpr size_t kMaxQueuedOutput = 8 << 20;

const char kUsage[] =
    "usage: ckprof-agent (--connect HOST:PORT | --address-file FILE) --allocation ID\n"
    "                    --secret-file FILE [--reconnect-s SECONDS]\n"
    "\n"
    "Runs inside a Slurm allocation of ckprofd's allocation mode and starts the profilers\n"
    "ckprofd sends it on the allocation's GPUs. Started by ckprofd's allocation jobs, not by\n"
    "hand.\n"
    "\n"
    "  --connect HOST:PORT   where ckprofd listens for its agents\n"
    "  --address-file FILE   a file holding HOST:PORT, which ckprofd writes as it starts (read\n"
    "                        again before each connection: a restarted ckprofd may move)\n"
    "  --allocation ID       the allocation this agent serves, as ckprofd named it\n"
    "  --secret-file FILE    the allocation's secret (readable only by its user)\n"
    "  --reconnect-s S       how long to try to reach ckprofd again after the connection drops\n"
    "                        while nothing runs, before exiting (default 600)\n";

struct Options {
  std::string host, port, allocation, secret_file, address_file;
  double reconnect_s = 600;
};

// The GPUs Slurm granted, as its variables say ("" when none says).
std::string GrantedGpus() {
  for (const char* var : {"SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "ROCR_VISIBLE_DEVICES",
                          "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}) {
    if (const char* v = std::getenv(var); v && *v) return v;
  }
  return "";
}

// The GPUs as the profilers here number them (what ckprofd pins a run to, one of these):
// the visible-devices list Slurm set ("" when none is set).
std::string PinnedGpus() {
  for (const char* var : {"ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
                          "HIP_VISIBLE_DEVICES"}) {
    if (const char* v = std::getenv(var); v && *v) return v;
  }
  return "";
}

// HOST:PORT split at its last colon; false when there is none.
bool SplitAddress(const std::string& text, std::string* host, std::string* port) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ' || t.back() == '\r')) t.pop_back();
  const size_t colon = t.rfind(':');
  if (t.empty() || colon == std::string::npos || colon == 0 || colon + 1 == t.size()) {
    return false;
  }
  *host = t.substr(0, colon);
  *port = t.substr(colon + 1);
  return true;
}

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

class Agent {
 public:
  Agent(asio::io_context& io, Options o, std::string secret)
      : io_(io), o_(std::move(o)), secret_(std::move(secret)), runner_(io.get_executor()) {}

  // Stops every run (SIGTERM to its group, then SIGKILL after its grace) and the agent once
  // they ended.
  void Terminate() {
    terminating_ = true;
    if (runs_.empty()) io_.stop();
    for (const auto& [run, r] : runs_) runner_.Cancel(r.id);
  }

  // Serves ckprofd until released (0) or ckprofd stays away (3).
  asio::awaitable<int> Serve() {
    auto last_seen = std::chrono::steady_clock::now();
    auto backoff = std::chrono::milliseconds(100);
    for (;;) {
      std::string why = co_await Connection(&last_seen);
      if (released_) co_return 0;
      const double away =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - last_seen).count();
      if (runs_.empty() && away > o_.reconnect_s) {
        std::cerr << "ckprof-agent: ckprofd has not answered for " << static_cast<int>(away)
                  << " s (" << why << "): exiting with " << unacked_.size()
                  << " end(s) it did not acknowledge\n";
        co_return 3;
      }
      std::cerr << "ckprof-agent: " << why << "; connecting again\n";
      asio::steady_timer t(io_, backoff);
      co_await t.async_wait(kTuple);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
      if (why.empty()) backoff = std::chrono::milliseconds(100);
    }
  }

 private:
  struct Run {
    ProcessRunner::RunId id = 0;
    int64_t gpu = 0;  // which of the allocation's GPUs ckprofd pinned it to
  };

  // One connection: its opening, then its messages until it ends; why it ended.
  asio::awaitable<std::string> Connection(std::chrono::steady_clock::time_point* last_seen) {
    if (!o_.address_file.empty()) {
      auto text = ReadFileBytes(o_.address_file);
      if (!text.ok()) co_return "cannot read ckprofd's address: " + text.error();
      if (!SplitAddress(*text, &o_.host, &o_.port)) {
        co_return o_.address_file + " holds no HOST:PORT";
      }
    }
    tcp::resolver resolver(io_);
    auto [rerr, endpoints] = co_await resolver.async_resolve(o_.host, o_.port, kTuple);
    if (rerr) co_return "cannot resolve " + o_.host + ": " + rerr.message();
    tcp::socket socket(io_);
    auto [cerr, ep] = co_await asio::async_connect(socket, endpoints, kTuple);
    if (cerr) co_return "cannot connect to " + o_.host + ":" + o_.port + ": " + cerr.message();
    auto nonce = RandomHex(16);
    if (!nonce.ok()) co_return nonce.error();
    std::string in;  // read but not yet taken
    auto [werr, wn] = co_await asio::async_write(
        socket, asio::buffer(AgentHelloLine(o_.allocation, *nonce) + "\n"), kTuple);
    if (werr) co_return "cannot write: " + werr.message();
    std::string line;
    if (auto err = co_await ReadLine(socket, in, &line); !err.empty()) co_return err;
    auto daemon_nonce = ParseAgentChallenge(line);
    if (!daemon_nonce.ok()) co_return daemon_nonce.error();
    channel_.emplace(secret_, AgentRole::kAgent, *nonce, *daemon_nonce);
    socket_ = &socket;
    *last_seen = std::chrono::steady_clock::now();

    json running = json::array(), ended = json::array();
    for (const auto& [run, r] : runs_) running.push_back({{"run", run}, {"gpu", r.gpu}});
    for (const auto& [run, m] : unacked_) ended.push_back(run);
    Send({{"type", "ready"},
          {"node", HostName()},
          {"gpus", GrantedGpus()},
          {"pin", PinnedGpus()},
          {"pid", getpid()},
          {"running", running},
          {"ended", ended}});
    for (const auto& [run, ended] : unacked_) Send(ended);

    std::string why;
    for (;;) {
      if (auto err = co_await ReadLine(socket, in, &line); !err.empty()) {
        why = err;
        break;
      }
      auto body = channel_->Open(line);
      if (!body.ok()) {
        why = "refused a message: " + body.error();
        break;
      }
      *last_seen = std::chrono::steady_clock::now();
      auto m = ParseJson(*body);
      if (!m.ok() || !m->is_object()) {
        why = "a message that is no JSON object";
        break;
      }
      if (auto err = Handle(*m); !err.empty()) {
        why = err;
        break;
      }
      if (released_) break;
    }
    // What is still queued is for this connection only: an end is sent again on the next.
    socket_ = nullptr;
    channel_.reset();
    queue_.clear();
    queued_output_ = 0;
    asio::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    co_return why;
  }

  asio::awaitable<std::string> ReadLine(tcp::socket& socket, std::string& in, std::string* line) {
    auto [err, n] =
        co_await asio::async_read_until(socket, asio::dynamic_buffer(in, kMaxLine), '\n', kTuple);
    if (err) {
      co_return err == asio::error::eof ? "ckprofd closed the connection"
                                        : "cannot read: " + err.message();
    }
    line->assign(in, 0, n);
    in.erase(0, n);
    co_return "";
  }

  // A message from ckprofd; "" or why the connection must end.
  std::string Handle(const json& m) {
    const std::string type = m.value("type", "");
    if (type == "run") return StartRun(m);
    if (type == "cancel") {
      if (auto it = runs_.find(m.value("run", int64_t{0})); it != runs_.end()) {
        runner_.Cancel(it->second.id);
      }
      return "";
    }
    if (type == "ack") {
      unacked_.erase(m.value("run", int64_t{0}));
      return "";
    }
    if (type == "release") {
      if (!runs_.empty()) return "released while runs are going";
      released_ = true;
      return "";
    }
    return "an unknown message type '" + type + "'";
  }

  std::string StartRun(const json& m) {
    const int64_t run = m.value("run", int64_t{0});
    if (run <= 0) return "a run without its number";
    if (runs_.count(run) || unacked_.count(run)) {
      return "";  // already started (a message repeated after a reconnection): nothing to do
    }
    RunSpec spec;
    const auto argv = m.find("argv");
    if (argv == m.end() || !argv->is_array() || argv->empty()) return "a run without its argv";
    for (const auto& a : *argv) {
      if (!a.is_string()) return "a run whose argv holds a non-string";
      spec.argv.push_back(a.get<std::string>());
    }
    if (auto env = m.find("set_env"); env != m.end() && env->is_array()) {
      for (const auto& kv : *env) {
        if (!kv.is_array() || kv.size() != 2 || !kv[0].is_string() || !kv[1].is_string()) {
          return "a run whose set_env is not [[KEY, VALUE], ...]";
        }
        spec.set_env.emplace_back(kv[0].get<std::string>(), kv[1].get<std::string>());
      }
    }
    // The run sees its own GPU only: each visible-devices list Slurm set for the allocation is
    // narrowed to the run's entry (a profiler's environment holds none of the agent's own;
    // ckprofd's pin variables, in set_env, come after and win).
    const int64_t gpu = m.value("gpu", int64_t{0});
    std::vector<std::pair<std::string, std::string>> narrowed;
    for (const char* var : {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"}) {
      const char* v = std::getenv(var);
      if (!v || !*v) continue;
      std::vector<std::string> list;
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');) list.push_back(item);
      if (gpu >= 0 && static_cast<size_t>(gpu) < list.size()) narrowed.emplace_back(var, list[gpu]);
    }
    spec.set_env.insert(spec.set_env.begin(), narrowed.begin(), narrowed.end());
    spec.cwd = m.value("cwd", "");
    spec.timeout = std::chrono::milliseconds(m.value("timeout_ms", int64_t{0}));
    spec.grace = std::chrono::milliseconds(m.value("grace_ms", int64_t{2000}));
    spec.drain = std::chrono::milliseconds(m.value("drain_ms", int64_t{500}));
    spec.capture_head = m.value("capture_head", size_t{16384});
    spec.capture_tail = m.value("capture_tail", size_t{16384});
    spec.top_k = m.value("top_k", size_t{5});
    spec.on_started = [this, run](pid_t pid) {
      Send({{"type", "started"}, {"run", run}, {"pid", pid}});
    };
    spec.on_output = [this, run](bool is_stderr, std::string_view data) {
      if (!socket_ || queued_output_ > kMaxQueuedOutput) return;
      queued_output_ += data.size();
      Send({{"type", "output"}, {"run", run}, {"stderr", is_stderr}, {"data", std::string(data)}});
    };
    runs_[run].gpu = gpu;
    runs_[run].id = runner_.Start(std::move(spec), [this, run](RunResult r) {
      runs_.erase(run);
      if (terminating_) {
        // The allocation is ending: ckprofd requeues what ran in it, with Slurm's reason.
        if (runs_.empty()) io_.stop();
        return;
      }
      // Slurm ends an allocation (scancel, its time limit) with SIGTERM to every process of it
      // at once, so a profiler may die of it a moment before the agent hears its own: such an
      // end waits a moment, and is not sent if the agent is ending by then.
      const bool maybe_slurm = r.outcome.kind == Outcome::Kind::kCrashed &&
                               (r.outcome.signal == SIGTERM || r.outcome.signal == SIGKILL);
      // (Kept meanwhile, so that a run message repeated after a reconnection starts nothing.)
      json ended = {{"type", "ended"}, {"run", run}, {"result", RunResultToJson(r)}};
      unacked_[run] = ended;
      if (!maybe_slurm) {
        Send(ended);
        return;
      }
      auto wait = std::make_shared<asio::steady_timer>(io_, std::chrono::seconds(2));
      wait->async_wait([this, wait, run](const asio::error_code&) {
        auto it = unacked_.find(run);
        if (!terminating_ && it != unacked_.end()) Send(it->second);
      });
    });
    return "";
  }

  // Seals and queues `m` on the connection, if there is one (else it waits: an end is sent
  // again on the next connection, live output is not).
  void Send(const json& m) {
    if (!socket_ || !channel_) return;
    auto line = channel_->Seal(DumpJson(m));
    if (!line.ok()) return;
    queue_.push_back(std::move(*line));
    if (queue_.size() == 1) WriteNext();
  }

  void WriteNext() {
    if (queue_.empty() || !socket_) return;
    asio::async_write(*socket_, asio::buffer(queue_.front()),
                      [this, socket = socket_](const asio::error_code& ec, size_t n) {
                        if (socket != socket_) return;  // that connection is gone
                        if (ec) {
                          asio::error_code ignored;
                          socket->close(ignored);  // the read fails and the session ends
                          return;
                        }
                        queued_output_ = queued_output_ > n ? queued_output_ - n : 0;
                        queue_.pop_front();
                        WriteNext();
                      });
  }

  asio::io_context& io_;
  Options o_;
  std::string secret_;
  ProcessRunner runner_;
  std::map<int64_t, Run> runs_;      // by ckprofd's run number
  std::map<int64_t, json> unacked_;  // ends not acknowledged yet
  tcp::socket* socket_ = nullptr;    // the current connection's, while there is one
  std::optional<AgentChannel> channel_;
  std::deque<std::string> queue_;  // sealed lines waiting to be written, the first being written
  size_t queued_output_ = 0;
  bool released_ = false;
  bool terminating_ = false;
};

int Main(int argc, char** argv) {
  Options o;
  std::string connect;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::optional<std::string> {
      if (i + 1 >= argc) {
        std::cerr << "ckprof-agent: " << name << " needs a value\n" << kUsage;
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    std::optional<std::string> v;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--connect" && (v = value("--connect"))) {
      connect = *v;
    } else if (a == "--address-file" && (v = value("--address-file"))) {
      o.address_file = *v;
    } else if (a == "--allocation" && (v = value("--allocation"))) {
      o.allocation = *v;
    } else if (a == "--secret-file" && (v = value("--secret-file"))) {
      o.secret_file = *v;
    } else if (a == "--reconnect-s" && (v = value("--reconnect-s"))) {
      o.reconnect_s = std::atof(v->c_str());
    } else {
      if (!v && (a == "--connect" || a == "--address-file" || a == "--allocation" ||
                 a == "--secret-file" || a == "--reconnect-s")) {
        return 2;
      }
      std::cerr << "ckprof-agent: unknown argument '" << a << "'\n" << kUsage;
      return 2;
    }
  }
  const bool connect_ok = connect.empty() || SplitAddress(connect, &o.host, &o.port);
  if ((connect.empty() == o.address_file.empty()) || !connect_ok || o.allocation.empty() ||
      o.secret_file.empty()) {
    std::cerr << "ckprof-agent: --connect HOST:PORT (or --address-file), --allocation and "
                 "--secret-file are needed\n"
              << kUsage;
    return 2;
  }
  auto secret = ReadFileBytes(o.secret_file);
  if (!secret.ok() || secret->empty()) {
    std::cerr << "ckprof-agent: cannot read the secret from " << o.secret_file << ": "
              << (secret.ok() ? "it is empty" : secret.error()) << "\n";
    return 2;
  }
  asio::io_context io;
  Agent agent(io, o, *secret);
  int code = 1;
  // Slurm ends the allocation (scancel, its time limit): the profilers are stopped with it, not
  // left running on the GPU without anyone to report them.
  asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const asio::error_code& ec, int sig) {
    if (ec) return;
    std::cerr << "ckprof-agent: signal " << sig << ": stopping its runs\n";
    code = 128 + sig;
    agent.Terminate();
  });
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const int served = co_await agent.Serve();
        if (code == 1) code = served;  // (a signal's code stays)
        signals.cancel();              // nothing else keeps the agent
      },
      [](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          std::cerr << "ckprof-agent: " << ex.what() << "\n";
        }
      });
  io.run();
  return code;
}

}  // namespace
}  // namespace ckprof

int main(int argc, char** argv) { return ckprof::Main(argc, argv); }
