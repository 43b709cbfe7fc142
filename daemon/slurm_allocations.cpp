#include "daemon/slurm_allocations.h"

#include <fcntl.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <asio/post.hpp>
#include <asio/read_until.hpp>
#include <asio/write.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "common/json_util.h"
#include "daemon/agent_channel.h"
#include "daemon/run_result_codec.h"
#include "daemon/unix_time.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using tcp = asio::ip::tcp;
using Kind = Outcome::Kind;
using SystemClock = std::chrono::system_clock;

// An opening line is short; a sealed one carries a run's end with its captures.
constexpr size_t kMaxHelloLine = 1024;
constexpr size_t kMaxLine = 64 << 20;
// A connection must prove it knows its allocation's secret this soon, and only so many may be
// trying at once (anyone on the cluster can connect).
constexpr auto kProveWithin = std::chrono::seconds(10);
constexpr int kMaxUnproven = 32;
// Of an allocation's time, what a run needs beyond its timeout and grace: reading its output,
// and the agent's start, which Slurm's clock counts.
constexpr double kMargin_s = 10;
// After a restart, runs whose allocation was not recorded wait this long for the agents to say
// what they run before they are started afresh.
constexpr double kAdoptWait_s = 30;
// Polls in a row that do not find an allocation before it is given up; how long a released
// one may take to end before it is scancelled.
constexpr int kMissingPolls = 3;
constexpr double kReleaseWait_s = 30;
// Allocations of a user in a row that end before their agent connects, before that user's
// waiting tasks are failed (else they would be asked for again and again).
constexpr int kFailedStarts = 3;

std::vector<std::string> SplitComma(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    size_t comma = text.find(',', start);
    std::string part(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (!part.empty()) out.push_back(part);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string JoinComma(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

// The allocation's secret as a previous ckprofd wrote it: a plain file of the allocation's user,
// never through a link, and small.
Result<std::string> ReadSecret(const std::string& path, uid_t owner) {
  int fd = OpenRunFile(path, owner);
  if (fd < 0) return Error{"cannot open " + path + ": " + std::strerror(errno)};
  struct stat st {};
  std::string text(256, '\0');
  ssize_t n = -1;
  if (fstat(fd, &st) == 0 && st.st_uid == owner && st.st_size <= 256) {
    n = read(fd, text.data(), text.size());
  }
  close(fd);
  if (n <= 0) return Error{path + " is no secret of uid " + std::to_string(owner)};
  text.resize(static_cast<size_t>(n));
  return text;
}

std::string ExeDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

// "host:/var/lib/ckprofd" -> "host__var_lib_ckprofd": a file name.
std::string FileNameOf(std::string_view tag) {
  std::string out;
  for (char c : tag) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return out;
}

}  // namespace

std::string AllocationScript(const std::string& agent_bin, const std::string& address_file,
                             const std::string& name, const std::string& secret_file,
                             double reconnect_s, const std::string& comment) {
  std::string s = "#!/bin/sh\n";
  s += "# " + comment + "\n";
  s += "# Written by ckprofd. Slurm runs it as the allocation's user; ckprof-agent runs that "
       "user's tasks here, as ckprofd sends them, until ckprofd lets the allocation go.\n";
  s += "PATH=\"${PATH:-/usr/local/bin:/usr/bin:/bin}\"; export PATH\n";
  char reconnect[32];
  std::snprintf(reconnect, sizeof reconnect, "%.0f", std::max(reconnect_s, 1.0));
  s += "exec " + ShellQuote(agent_bin) + " --address-file " + ShellQuote(address_file) +
       " --allocation " + ShellQuote(name) + " --secret-file " + ShellQuote(secret_file) +
       " --reconnect-s " + reconnect + " </dev/null\n";
  return s;
}

struct AllocationLauncher::Run {
  RunId id = 0;
  RunSpec spec;
  std::function<void(RunResult)> on_done;
  int64_t key = 0;
  AllocPtr alloc;        // the allocation it was given (adopted: the one it ran in)
  int gpu = -1;          // which of the allocation's GPUs; -1 until it has one
  bool sent = false;     // the agent has it (was sent it, or said it runs it)
  bool ending = false;   // the agent said it ended: its end is on its way
  bool adopted = false;  // followed after a restart; its agent has not said yet
  bool handle_told = false;
  bool cancel_requested = false;
  bool done = false;
  Capture out{0, 0}, err{0, 0};  // live output, as the agent sent it
};

struct AllocationLauncher::Alloc {
  std::string name, user, dir, secret;
  uid_t uid = 0;
  gid_t gid = 0;
  int64_t job_id = 0;
  std::string state = "submitting";
  std::string node;
  std::vector<std::string> gpus, pins;  // per GPU: its index on the node, its pin value
  std::vector<RunId> slots;             // per GPU: the run on it (0: free)
  std::optional<double> deadline;       // when Slurm ends it (Unix seconds)
  double idle_since = 0, released_at = 0;
  int64_t tasks_run = 0;
  int missing = 0;
  bool was_ready = false;
  ConnPtr conn;
  bool Idle() const {
    return std::all_of(slots.begin(), slots.end(), [](RunId r) { return r == 0; });
  }
};

struct AllocationLauncher::Conn {
  explicit Conn(tcp::socket s) : socket(std::move(s)) {}
  tcp::socket socket;
  std::string in;
  std::optional<AgentChannel> channel;
  std::string alloc;  // its allocation's name, once its opening line named it
  std::string peer;
  bool proven = false, closed = false;
  std::deque<std::string> out;  // lines to write, the first being written
  std::unique_ptr<asio::steady_timer> deadline;
};

AllocationLauncher::AllocationLauncher(asio::any_io_executor ex, SlurmSettings settings,
                                       std::string tag, std::vector<std::string> pin_env)
    : ex_(ex),
      settings_(std::move(settings)),
      tag_(std::move(tag)),
      pin_env_(std::move(pin_env)),
      tools_(std::make_unique<SlurmTools>(ex, settings_)),
      tick_timer_(ex),
      alive_(std::make_shared<bool>(true)) {
  if (settings_.agent_bin.empty()) settings_.agent_bin = ExeDir() + "/ckprof-agent";
}

AllocationLauncher::~AllocationLauncher() {
  *alive_ = false;
  tick_timer_.cancel();
  asio::error_code ignored;
  if (acceptor_) acceptor_->close(ignored);
  for (auto& [name, a] : allocs_) {
    if (a->conn) a->conn->socket.close(ignored);
  }
  tools_.reset();
}

Status AllocationLauncher::Check() {
  if (Status s = tools_->Check(); !s) return s;
  if (access(settings_.agent_bin.c_str(), X_OK) != 0) {
    return MakeError("executor slurm (allocations): the agent " + settings_.agent_bin +
                     " cannot be executed (" + std::strerror(errno) +
                     "); install ckprof-agent where the nodes find it and set executor.agent_bin");
  }
  if (Status s = Listen(); !s) return s;
  Accept();
  Scan();
  ArmTick();
  return Status::Ok();
}

Status AllocationLauncher::Listen() {
  asio::error_code ec;
  const auto address = asio::ip::make_address(settings_.agent_listen, ec);
  if (ec) {
    return MakeError("executor slurm: agent_listen '" + settings_.agent_listen +
                     "' is no IP address (e.g. \"0.0.0.0\", or one of this host's)");
  }
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(settings_.agent_port));
  acceptor_.emplace(ex_);
  acceptor_->open(endpoint.protocol(), ec);
  if (!ec) acceptor_->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return MakeError("executor slurm: cannot listen for agents on " + settings_.agent_listen + ":" +
                     std::to_string(settings_.agent_port) + ": " + ec.message());
  }
  std::string host = settings_.agent_host;
  if (host.empty()) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    host = name;
  }
  address_ = host + ":" + std::to_string(acceptor_->local_endpoint().port());
  // Where the agents read it (again at each connection: a restarted ckprofd may listen
  // elsewhere); replaced whole, never half written.
  const std::string file = settings_.work_dir + "/." + FileNameOf(tag_) + ".agents";
  if (Status s = WriteFreshFile(file + ".new", address_ + "\n", 0644, std::nullopt, std::nullopt);
      !s) {
    return MakeError("executor slurm: " + s.error());
  }
  if (rename((file + ".new").c_str(), file.c_str()) != 0) {
    return MakeError("executor slurm: cannot write " + file + ": " + std::strerror(errno));
  }
  spdlog::info("executor slurm (allocations): agents reach ckprofd at {} (told through {})",
               address_, file);
  return Status::Ok();
}

void AllocationLauncher::Accept() {
  acceptor_->async_accept([this, alive = alive_](const asio::error_code& ec, tcp::socket socket) {
    if (!*alive) return;
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // (Out of file descriptors, say: try again in a moment rather than at once.)
      spdlog::warn("executor slurm: accepting an agent's connection failed: {}", ec.message());
      auto t = std::make_shared<asio::steady_timer>(ex_, std::chrono::milliseconds(200));
      t->async_wait([this, alive, t](const asio::error_code& e) {
        if (!e && *alive) Accept();
      });
      return;
    }
    if (unproven_ >= kMaxUnproven) {
      asio::error_code ignored;
      socket.close(ignored);
    } else {
      Session(std::make_shared<Conn>(std::move(socket)));
    }
    Accept();
  });
}

void AllocationLauncher::Session(ConnPtr conn) {
  ++unproven_;
  asio::error_code ec;
  const auto remote = conn->socket.remote_endpoint(ec);
  conn->peer = ec ? "?" : remote.address().to_string() + ":" + std::to_string(remote.port());
  conn->deadline = std::make_unique<asio::steady_timer>(ex_, kProveWithin);
  conn->deadline->async_wait([this, conn, alive = alive_](const asio::error_code& e) {
    if (e || !*alive || conn->proven) return;
    Drop(conn, "it did not prove it knows an allocation's secret within 10 s");
  });
  ReadLine(conn, kMaxHelloLine, [this, conn](std::string line) { OnHello(conn, line); });
}

void AllocationLauncher::ReadLine(ConnPtr conn, size_t max,
                                  std::function<void(std::string)> on_line) {
  asio::async_read_until(conn->socket, asio::dynamic_buffer(conn->in, max), '\n',
                         [this, conn, max, on_line = std::move(on_line), alive = alive_](
                             const asio::error_code& ec, size_t n) {
                           if (!*alive || conn->closed) return;
                           if (ec) {
                             Drop(conn, ec == asio::error::eof ? "the agent closed the connection"
                                        : ec == asio::error::not_found
                                            ? "a line longer than " + std::to_string(max) + " bytes"
                                            : "cannot read: " + ec.message());
                             return;
                           }
                           std::string line = conn->in.substr(0, n - 1);
                           conn->in.erase(0, n);
                           on_line(std::move(line));
                         });
}

void AllocationLauncher::OnHello(const ConnPtr& conn, const std::string& line) {
  auto hello = ParseAgentHello(line);
  if (!hello.ok()) {
    Drop(conn, "its opening line was refused: " + hello.error());
    return;
  }
  AllocPtr alloc = FindAlloc(hello->allocation);
  if (!alloc || alloc->secret.empty()) {
    Drop(conn, "it names no allocation of this ckprofd's");
    return;
  }
  auto nonce = RandomHex(16);
  if (!nonce.ok()) {
    Drop(conn, nonce.error());
    return;
  }
  conn->alloc = alloc->name;
  conn->channel.emplace(alloc->secret, AgentRole::kDaemon, hello->nonce, *nonce);
  conn->out.push_back(AgentChallengeLine(*nonce) + "\n");
  WriteNext(conn);
  ReadLine(conn, kMaxLine, [this, conn](std::string l) { OnSealed(conn, l); });
}

void AllocationLauncher::OnSealed(const ConnPtr& conn, const std::string& line) {
  auto body = conn->channel->Open(line);
  if (!body.ok()) {
    Drop(conn, "refused a message: " + body.error());
    return;
  }
  auto m = ParseJson(*body);
  if (!m.ok() || !m->is_object()) {
    Drop(conn, "a message that is no JSON object");
    return;
  }
  AllocPtr alloc = FindAlloc(conn->alloc);
  if (!alloc || alloc->state == "ended") {
    Drop(conn, "its allocation is no longer followed");
    return;
  }
  const std::string type = m->value("type", "");
  if (!conn->proven) {
    if (type != "ready") {
      Drop(conn, "its first message is not 'ready'");
      return;
    }
    conn->proven = true;
    --unproven_;
    conn->deadline->cancel();
    OnReady(alloc, conn, *m);
  } else if (type == "started" || type == "output") {
    RunPtr run = FindKey(m->value("run", int64_t{0}));
    if (run && run->alloc == alloc && !run->done && type == "output") {
      const bool is_stderr = m->value("stderr", false);
      const auto data = m->find("data");
      if (data != m->end() && data->is_string()) {
        const std::string& text = data->get_ref<const std::string&>();
        (is_stderr ? run->err : run->out).Add(text);
        if (run->spec.on_output) run->spec.on_output(is_stderr, text);
      }
    }
  } else if (type == "ended") {
    OnEnded(alloc, *m);
  } else {
    Drop(conn, "an unknown message type '" + type + "'");
    return;
  }
  if (!conn->closed) {
    ReadLine(conn, kMaxLine, [this, conn](std::string l) { OnSealed(conn, l); });
  }
}

void AllocationLauncher::OnReady(const AllocPtr& alloc, const ConnPtr& conn, const json& m) {
  if (alloc->conn && alloc->conn != conn) Drop(alloc->conn, "its agent connected again");
  alloc->conn = conn;
  alloc->node = m.value("node", "");
  alloc->gpus = SplitComma(m.value("gpus", ""));
  alloc->pins = SplitComma(m.value("pin", ""));
  if (alloc->pins.empty()) alloc->pins = alloc->gpus;
  size_t n = std::max(alloc->gpus.size(), alloc->pins.size());
  if (n == 0) n = static_cast<size_t>(settings_.GpusPerAllocation());
  if (alloc->slots.size() < n) alloc->slots.resize(n, 0);
  if (alloc->state != "releasing") alloc->state = "ready";
  alloc->was_ready = true;
  failed_starts_[alloc->uid] = 0;
  if (!alloc->deadline) alloc->deadline = UnixNow() + settings_.allocation_time_s;
  if (alloc->idle_since == 0) alloc->idle_since = UnixNow();
  spdlog::info("allocation {} (Slurm job {}, {}) ready on {}: GPU(s) {}", alloc->name,
               alloc->job_id, alloc->user, alloc->node, JoinComma(alloc->gpus));

  // A run is this allocation's when it was given to it, or, followed after a restart whose
  // allocation was not recorded, when it is its user's.
  auto claim = [&](const RunPtr& run) {
    return run && !run->done &&
           (run->alloc == alloc ||
            (!run->alloc && run->adopted && run->spec.uid.value_or(geteuid()) == alloc->uid));
  };
  std::set<int64_t> has;
  if (auto running = m.find("running"); running != m.end() && running->is_array()) {
    for (const auto& r : *running) {
      if (!r.is_object()) continue;
      const int64_t key = r.value("run", int64_t{0});
      const int64_t gpu = r.value("gpu", int64_t{0});
      has.insert(key);
      RunPtr run = FindKey(key);
      if (!claim(run) || gpu < 0 || gpu >= 4096) {
        // Not ours to follow any more (its job was cancelled while ckprofd was away).
        Send(conn, {{"type", "cancel"}, {"run", key}});
        continue;
      }
      if (static_cast<size_t>(gpu) >= alloc->slots.size()) alloc->slots.resize(gpu + 1, 0);
      if (run->gpu >= 0 && run->gpu != gpu && static_cast<size_t>(run->gpu) < alloc->slots.size() &&
          alloc->slots[run->gpu] == run->id) {
        alloc->slots[run->gpu] = 0;
      }
      run->alloc = alloc;
      run->gpu = static_cast<int>(gpu);
      run->sent = true;
      run->adopted = false;
      alloc->slots[gpu] = run->id;
      if (run->cancel_requested) Send(conn, {{"type", "cancel"}, {"run", key}});
    }
  }
  if (auto ended = m.find("ended"); ended != m.end() && ended->is_array()) {
    for (const auto& e : *ended) {
      if (!e.is_number_integer()) continue;
      has.insert(e.get<int64_t>());
      RunPtr run = FindKey(e.get<int64_t>());
      if (!claim(run)) continue;  // acknowledged when its end comes
      run->alloc = alloc;
      run->sent = run->ending = true;
      run->adopted = false;
    }
  }
  // Runs given to it that it does not have: the run message went with the last connection (or
  // never left a previous ckprofd), so the agent never started them: sent again, or, followed
  // after a restart and cancelled meanwhile, ended here.
  for (const auto& [id, run] : runs_) {
    if (run->alloc != alloc || run->done || has.count(run->key)) continue;
    if (run->adopted && run->cancel_requested) {
      FinishLater(run, Outcome{Kind::kCancelled, 0, 0, "cancelled"});
    } else if (run->adopted) {
      // It needs a GPU of its own now.
      run->adopted = false;
      run->alloc = nullptr;
      run->gpu = -1;
      waiting_.push_front(run);
    } else if (run->gpu >= 0) {
      SendRun(alloc, run);
    }
  }
  SchedulePlace();
}

void AllocationLauncher::OnEnded(const AllocPtr& alloc, const json& m) {
  const int64_t key = m.value("run", int64_t{0});
  RunPtr run = FindKey(key);
  const bool ours = run && !run->done &&
                    (run->alloc == alloc || (!run->alloc && run->adopted &&
                                             run->spec.uid.value_or(geteuid()) == alloc->uid));
  if (ours) {
    RunResult r;
    auto result = m.find("result");
    auto parsed = result != m.end() ? RunResultFromJson(*result)
                                    : Result<RunResult>(Error{"the message has no result"});
    if (parsed.ok()) {
      r = std::move(*parsed);
    } else {
      r.outcome = Outcome{Kind::kFailed, -1, 0,
                          "the agent's report of the run cannot be read: " + parsed.error()};
      r.started_at = r.ended_at = SystemClock::now();
    }
    const std::string gpu = run->gpu >= 0 && static_cast<size_t>(run->gpu) < alloc->gpus.size()
                                ? alloc->gpus[run->gpu]
                                : "";
    r.placement = Placement{std::string(Name()), alloc->job_id, "COMPLETED", alloc->node, gpu};
    ++alloc->tasks_run;
    run->alloc = alloc;
    Finish(run, std::move(r));
  }
  // Acknowledged once recorded (Finish's on_done has stored it), or when it is none of ours:
  // the agent forgets it then.
  if (alloc->conn) Send(alloc->conn, {{"type", "ack"}, {"run", key}});
  SchedulePlace();
}

void AllocationLauncher::Drop(const ConnPtr& conn, const std::string& why) {
  if (conn->closed) return;
  conn->closed = true;
  if (!conn->proven) --unproven_;
  if (conn->deadline) conn->deadline->cancel();
  // Said before the connection closes (what the peer sees last).
  AllocPtr alloc = FindAlloc(conn->alloc);
  if (alloc && alloc->conn == conn) {
    alloc->conn = nullptr;
    if (alloc->state == "ready") alloc->state = "away";
    spdlog::info("allocation {} (Slurm job {}): its agent's connection ended: {}", alloc->name,
                 alloc->job_id, why);
  } else if (!conn->proven && !conn->alloc.empty()) {
    // Someone named an allocation without its secret: worth an admin's eye.
    spdlog::warn("agent connection from {} for allocation {} refused: {}", conn->peer, conn->alloc,
                 why);
  } else {
    spdlog::debug("agent connection from {} closed: {}", conn->peer, why);
  }
  asio::error_code ignored;
  conn->socket.close(ignored);
}

void AllocationLauncher::Send(const ConnPtr& conn, const json& m) {
  if (!conn || conn->closed || !conn->channel) return;
  auto line = conn->channel->Seal(DumpJson(m));
  if (!line.ok()) return;
  conn->out.push_back(std::move(*line));
  if (conn->out.size() == 1) WriteNext(conn);
}

void AllocationLauncher::WriteNext(const ConnPtr& conn) {
  if (conn->out.empty() || conn->closed) return;
  asio::async_write(conn->socket, asio::buffer(conn->out.front()),
                    [this, conn, alive = alive_](const asio::error_code& ec, size_t) {
                      if (!*alive || conn->closed) return;
                      if (ec) {
                        Drop(conn, "cannot write: " + ec.message());
                        return;
                      }
                      conn->out.pop_front();
                      WriteNext(conn);
                    });
}

AllocationLauncher::RunPtr AllocationLauncher::NewRun(RunSpec spec,
                                                      std::function<void(RunResult)> on_done) {
  auto run = std::make_shared<Run>();
  run->id = next_id_++;
  run->key = spec.run_key;
  run->out = Capture(spec.capture_head, spec.capture_tail);
  run->err = Capture(spec.capture_head, spec.capture_tail);
  run->spec = std::move(spec);
  run->on_done = std::move(on_done);
  runs_[run->id] = run;
  return run;
}

Launcher::RunId AllocationLauncher::Start(RunSpec spec, std::function<void(RunResult)> on_done) {
  RunPtr run = NewRun(std::move(spec), std::move(on_done));
  waiting_.push_back(run);
  SchedulePlace();
  return run->id;
}

Launcher::RunId AllocationLauncher::Adopt(RunSpec spec, int64_t handle,
                                          std::function<void(RunResult)> on_done) {
  RunPtr run = NewRun(std::move(spec), std::move(on_done));
  run->adopted = true;
  run->handle_told = handle > 0;
  if (handle > 0) {
    // Its allocation, once the scan has found it (Scan attaches it).
    adopted_handles_[run->id] = handle;
  } else {
    waiting_.push_back(run);
  }
  SchedulePlace();
  return run->id;
}

bool AllocationLauncher::Cancel(RunId id) {
  auto it = runs_.find(id);
  if (it == runs_.end() || it->second->done || it->second->cancel_requested) return false;
  RunPtr run = it->second;
  run->cancel_requested = true;
  if (run->adopted) return true;  // decided once its agent says whether it runs it
  if (!run->sent) {
    FinishLater(run, Outcome{Kind::kCancelled, 0, 0, "cancelled before it started"});
  } else if (run->alloc && run->alloc->conn && !run->ending) {
    Send(run->alloc->conn, {{"type", "cancel"}, {"run", run->key}});
  }
  return true;
}

bool AllocationLauncher::Interrupt(RunId) { return false; }

std::optional<RunOutput> AllocationLauncher::Output(RunId id) const {
  auto it = runs_.find(id);
  if (it == runs_.end()) return std::nullopt;
  return RunOutput{it->second->out.Text(), it->second->err.Text()};
}

std::optional<Placement> AllocationLauncher::Where(RunId id) const {
  auto it = runs_.find(id);
  if (it == runs_.end()) return std::nullopt;
  const Run& run = *it->second;
  if (!run.alloc) return Placement{std::string(Name()), 0, "PENDING", "", ""};
  const Alloc& a = *run.alloc;
  const std::string gpu =
      run.gpu >= 0 && static_cast<size_t>(run.gpu) < a.gpus.size() ? a.gpus[run.gpu] : "";
  return Placement{std::string(Name()), a.job_id, run.sent ? "RUNNING" : "PENDING", a.node, gpu};
}

std::string AllocationLauncher::DrainAdvice() const {
  return "the GPUs are Slurm's (executor slurm, allocations): drain a node in Slurm (scontrol "
         "update nodename=NODE state=drain reason=...), or lower max_allocations";
}

std::vector<AllocationInfo> AllocationLauncher::Allocations() const {
  std::vector<AllocationInfo> out;
  const double now = UnixNow();
  for (const auto& [name, a] : allocs_) {
    AllocationInfo i;
    i.name = a->name;
    i.job_id = a->job_id;
    i.user = a->user;
    i.uid = a->uid;
    i.state = a->state;
    i.node = a->node;
    i.gpus = JoinComma(a->gpus);
    i.running = static_cast<int>(
        std::count_if(a->slots.begin(), a->slots.end(), [](RunId r) { return r != 0; }));
    i.tasks_run = a->tasks_run;
    if (a->deadline) i.time_left_s = std::max(0.0, *a->deadline - now);
    out.push_back(std::move(i));
  }
  return out;
}

double AllocationLauncher::Need(const Run& run) const {
  const double timeout = std::chrono::duration<double>(run.spec.timeout).count();
  if (timeout <= 0) return 0;
  return timeout + std::chrono::duration<double>(run.spec.grace).count() + kMargin_s;
}

int AllocationLauncher::LiveAllocations() const {
  return static_cast<int>(std::count_if(allocs_.begin(), allocs_.end(), [](const auto& kv) {
    return kv.second->state != "releasing" && kv.second->state != "ended";
  }));
}

AllocationLauncher::RunPtr AllocationLauncher::FindKey(int64_t key) const {
  if (key <= 0) return nullptr;
  for (const auto& [id, run] : runs_) {
    if (run->key == key) return run;
  }
  return nullptr;
}

AllocationLauncher::AllocPtr AllocationLauncher::FindAlloc(const std::string& name) const {
  auto it = allocs_.find(name);
  return it == allocs_.end() ? nullptr : it->second;
}

void AllocationLauncher::SchedulePlace() {
  if (place_posted_) return;
  place_posted_ = true;
  asio::post(ex_, [this, alive = alive_] {
    if (!*alive) return;
    place_posted_ = false;
    Place();
  });
}

void AllocationLauncher::Place() {
  if (!scanned_) return;
  const double now = UnixNow();
  const bool agents_may_say = now - scanned_at_ < kAdoptWait_s &&
                              std::any_of(allocs_.begin(), allocs_.end(), [](const auto& kv) {
                                return kv.second->state == "starting" || kv.second->state == "away";
                              });
  std::map<uid_t, int> unplaced;
  std::map<uid_t, RunPtr> first;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    RunPtr run = *it;
    if (run->done || run->alloc) {
      it = waiting_.erase(it);
      continue;
    }
    if (run->adopted) {
      // Followed, its allocation not recorded: an agent may yet say it runs it.
      if (agents_may_say) {
        ++it;
        continue;
      }
      run->adopted = false;
      if (run->cancel_requested) {
        FinishLater(run, Outcome{Kind::kCancelled, 0, 0, "cancelled"});
        it = waiting_.erase(it);
        continue;
      }
    }
    const double need = Need(*run);
    if (need > settings_.allocation_time_s) {
      FinishLater(run, Outcome{Kind::kSpawnFailed, 0, 0,
                               "its timeout and grace need " + FormatSeconds(need) +
                                   " of an allocation, more than its time (executor "
                                   "allocation_time " +
                                   settings_.allocation_time +
                                   "): submit with a shorter --timeout, or raise allocation_time"});
      it = waiting_.erase(it);
      continue;
    }
    const uid_t uid = run->spec.uid.value_or(geteuid());
    bool placed = false;
    for (auto& [name, a] : allocs_) {
      if (a->state != "ready" || !a->conn || a->uid != uid) continue;
      if (need > 0 && a->deadline && *a->deadline - now < need) continue;
      auto free = std::find(a->slots.begin(), a->slots.end(), RunId{0});
      if (free == a->slots.end()) continue;
      run->alloc = a;
      run->gpu = static_cast<int>(free - a->slots.begin());
      *free = run->id;
      SendRun(a, run);
      placed = true;
      break;
    }
    if (placed) {
      it = waiting_.erase(it);
      continue;
    }
    if (!unplaced[uid]++) first[uid] = run;
    ++it;
  }
  // Allocations for those who wait: the ones coming count.
  const int per = settings_.GpusPerAllocation();
  for (const auto& [uid, n] : unplaced) {
    int coming = 0;
    for (const auto& [name, a] : allocs_) {
      if (a->uid != uid) continue;
      if (a->state == "submitting" || a->state == "pending" || a->state == "starting" ||
          a->state == "away") {
        coming += static_cast<int>(std::count(a->slots.begin(), a->slots.end(), RunId{0}));
        if (a->slots.empty()) coming += per;
      }
    }
    for (int want = (n - coming + per - 1) / per; want > 0; --want) {
      if (LiveAllocations() >= settings_.max_allocations) {
        // Room under max_allocations: an idle allocation (of another user, or of this one with
        // too little time left) goes.
        AllocPtr idle;
        for (const auto& [name, a] : allocs_) {
          if ((a->state == "ready" || a->state == "away") && a->Idle() &&
              (!idle || a->idle_since < idle->idle_since)) {
            idle = a;
          }
        }
        if (!idle) break;
        Release(idle, (idle->uid == uid ? std::string("too little time left for its user's next "
                                                      "task; a new one takes its room")
                                        : std::string("another user's tasks need its room")) +
                          " (max_allocations " + std::to_string(settings_.max_allocations) + ")");
      }
      Request(first[uid]->spec);
    }
  }
}

bool AllocationLauncher::SendRun(const AllocPtr& alloc, const RunPtr& run) {
  const RunSpec& spec = run->spec;
  json env = json::array();
  for (const auto& [k, v] : spec.set_env) env.push_back({k, v});
  // Pinned to its GPU of the allocation, as the profilers here number them.
  if (run->gpu >= 0 && static_cast<size_t>(run->gpu) < alloc->pins.size()) {
    for (const auto& var : pin_env_) env.push_back({var, alloc->pins[run->gpu]});
  }
  json argv = json::array();
  for (const auto& a : spec.argv) argv.push_back(a);
  Send(alloc->conn, {{"type", "run"},
                     {"run", run->key},
                     {"gpu", run->gpu},
                     {"argv", argv},
                     {"set_env", env},
                     {"cwd", spec.cwd},
                     {"timeout_ms", spec.timeout.count()},
                     {"grace_ms", spec.grace.count()},
                     {"drain_ms", spec.drain.count()},
                     {"capture_head", spec.capture_head},
                     {"capture_tail", spec.capture_tail},
                     {"top_k", spec.top_k}});
  run->sent = true;
  if (!run->handle_told) {
    run->handle_told = true;
    // The allocation's job id: what a restarted ckprofd follows the run by.
    if (spec.on_started) spec.on_started(static_cast<pid_t>(alloc->job_id));
  }
  return true;
}

void AllocationLauncher::Request(const RunSpec& owner) {
  auto a = std::make_shared<Alloc>();
  auto hex = RandomHex(6);
  auto secret = RandomHex(32);
  if (!hex.ok() || !secret.ok()) {
    spdlog::error("executor slurm: cannot make an allocation's name or secret: {}",
                  hex.ok() ? secret.error() : hex.error());
    return;
  }
  a->name = "a" + *hex;
  a->uid = owner.uid.value_or(geteuid());
  a->gid = owner.gid.value_or(getegid());
  a->user = owner.stem.substr(0, owner.stem.find('/'));
  if (a->user.empty()) a->user = std::to_string(a->uid);
  const std::string rel = a->user + "/alloc-" + a->name;
  a->dir = settings_.work_dir + "/" + rel;
  a->secret = *secret;
  a->slots.assign(static_cast<size_t>(settings_.GpusPerAllocation()), 0);
  const std::string comment = "ckprof allocation " + a->name + " uid " + std::to_string(a->uid) +
                              " user " + a->user + " from " + tag_;
  const std::string address_file = settings_.work_dir + "/." + FileNameOf(tag_) + ".agents";
  Status s = MakeRunDir(settings_.work_dir, rel, 0700, owner.uid, owner.gid);
  if (s) s = WriteFreshFile(a->dir + "/secret", a->secret, 0600, owner.uid, owner.gid);
  if (s) {
    s = WriteFreshFile(
        a->dir + "/alloc.sh",
        AllocationScript(settings_.agent_bin, address_file, a->name, a->dir + "/secret",
                         std::max(60.0, settings_.idle_release_s), comment),
        0644, std::nullopt, std::nullopt);
  }
  if (!s) {
    spdlog::error("executor slurm: cannot prepare an allocation for {}: {}", a->user, s.error());
    // Its tasks cannot run: said on each, rather than asked again and again.
    for (const RunPtr& run : waiting_) {
      if (!run->done && !run->alloc && run->spec.uid.value_or(geteuid()) == a->uid) {
        FinishLater(run, Outcome{Kind::kSpawnFailed, 0, 0,
                                 "cannot prepare its Slurm allocation: " + s.error()});
      }
    }
    return;
  }
  std::vector<std::string> args = {"--parsable",
                                   "--no-requeue",
                                   "--job-name=ckprof-" + a->user,
                                   "--comment=" + comment,
                                   "--output=" + a->dir + "/agent.log",
                                   "--export=NONE",
                                   "--time=" + settings_.allocation_time};
  if (!settings_.gres.empty()) args.push_back("--gres=" + settings_.gres);
  if (!settings_.partition.empty()) args.push_back("--partition=" + settings_.partition);
  // Submitted for the user: Slurm's accounting, limits and fair share see them.
  if (owner.uid && geteuid() == 0) {
    args.push_back("--uid=" + std::to_string(*owner.uid));
    if (owner.gid) args.push_back("--gid=" + std::to_string(*owner.gid));
  }
  for (const auto& arg : settings_.sbatch_args) args.push_back(arg);
  args.push_back(a->dir + "/alloc.sh");
  allocs_[a->name] = a;
  spdlog::info("allocation {} asked for {} ({} for {})", a->name, a->user,
               settings_.gres.empty() ? "no GPU" : settings_.gres, settings_.allocation_time);
  tools_->Run("sbatch", std::move(args), [this, a](RunResult r) { OnSubmitted(a, std::move(r)); });
  ArmTick();
}

void AllocationLauncher::OnSubmitted(const AllocPtr& alloc, RunResult tool) {
  std::optional<int64_t> id;
  if (tool.outcome.kind == Kind::kSucceeded || tool.outcome.kind == Kind::kUnsupported) {
    std::string_view out = tool.stdout_capture;
    id = ParseSlurmJobId(out.substr(0, out.find('\n')));
  }
  if (!id) {
    std::string why = LastLine(tool.stderr_capture);
    if (why.empty()) why = tool.outcome.Summary();
    spdlog::warn("allocation {} for {}: sbatch refused it: {}", alloc->name, alloc->user, why);
    allocs_.erase(alloc->name);
    alloc->state = "ended";
    unlink((alloc->dir + "/secret").c_str());
    // Its user's waiting tasks end saying why (as each task's own sbatch would in the
    // per-task mode), rather than asking Slurm again and again.
    for (const RunPtr& run : waiting_) {
      if (!run->done && !run->alloc && run->spec.uid.value_or(geteuid()) == alloc->uid) {
        FinishLater(run,
                    Outcome{Kind::kSpawnFailed, 0, 0, "sbatch refused its allocation: " + why});
      }
    }
    return;
  }
  alloc->job_id = *id;
  if (alloc->state == "submitting") alloc->state = "pending";
  spdlog::info("allocation {} for {}: Slurm job {}", alloc->name, alloc->user, *id);
  if (alloc->state == "releasing") {
    tools_->Run("scancel", {std::to_string(*id)}, [](RunResult) {});
  }
}

void AllocationLauncher::Release(const AllocPtr& alloc, const std::string& why) {
  if (alloc->state == "releasing" || alloc->state == "ended") return;
  spdlog::info("allocation {} (Slurm job {}, {}) let go after {} task(s): {}", alloc->name,
               alloc->job_id, alloc->user, alloc->tasks_run, why);
  alloc->state = "releasing";
  alloc->released_at = UnixNow();
  if (alloc->conn) {
    Send(alloc->conn, {{"type", "release"}});
  } else if (alloc->job_id > 0) {
    tools_->Run("scancel", {std::to_string(alloc->job_id)}, [](RunResult) {});
  }
}

void AllocationLauncher::Ended(const AllocPtr& alloc, const std::string& why) {
  if (alloc->state == "ended") return;
  const bool expected = alloc->state == "releasing";
  alloc->state = "ended";
  spdlog::log(expected ? spdlog::level::info : spdlog::level::warn,
              "allocation {} (Slurm job {}, {}): {}", alloc->name, alloc->job_id, alloc->user, why);
  for (const auto& [id, run] : runs_) {
    if (run->alloc != alloc || run->done) continue;
    FinishLater(run,
                Outcome{Kind::kInterrupted, 0, 0,
                        "its allocation (Slurm job " + std::to_string(alloc->job_id) +
                            (alloc->node.empty() ? "" : " on " + alloc->node) + ") ended: " + why});
  }
  if (alloc->conn) Drop(alloc->conn, "its allocation ended");
  unlink((alloc->dir + "/secret").c_str());
  if (!alloc->was_ready && !expected && ++failed_starts_[alloc->uid] >= kFailedStarts) {
    // Its agent never connected (not installed on the node, or it cannot reach this host):
    // asking again would fail again. The user's waiting tasks end, saying so.
    failed_starts_[alloc->uid] = 0;
    const std::string reason = std::to_string(kFailedStarts) +
                               " allocations in a row ended before their agent " +
                               "connected to ckprofd (" + why + "; see " + alloc->dir +
                               "/agent.log, and executor.agent_bin and agent_host)";
    for (const RunPtr& run : waiting_) {
      if (!run->done && !run->alloc && run->spec.uid.value_or(geteuid()) == alloc->uid) {
        FinishLater(run, Outcome{Kind::kSpawnFailed, 0, 0, reason});
      }
    }
  }
  allocs_.erase(alloc->name);
  SchedulePlace();
}

namespace {

// squeue -o '%i|%T|%N|%r|%L|%k' lines (the comment last: it is ours, without a '|').
struct AllocRow {
  int64_t id = 0;
  std::string state, node, reason;
  std::optional<double> left;
  std::string comment;
};

std::vector<AllocRow> ParseAllocRows(std::string_view text) {
  std::vector<AllocRow> rows;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string_view line = text.substr(start, nl == std::string_view::npos ? nl : nl - start);
    start = nl == std::string_view::npos ? text.size() : nl + 1;
    std::vector<std::string_view> f;
    size_t from = 0;
    while (f.size() < 5) {
      size_t bar = line.find('|', from);
      if (bar == std::string_view::npos) break;
      f.push_back(line.substr(from, bar - from));
      from = bar + 1;
    }
    if (f.size() < 4) continue;
    f.push_back(line.substr(from));
    auto id = ParseSlurmJobId(f[0]);
    if (!id) continue;
    AllocRow r;
    r.id = *id;
    r.state = std::string(f[1].substr(0, f[1].find_first_of(" +")));
    r.node = std::string(f[2]);
    if (r.node == "(null)" || r.node == "None assigned") r.node.clear();
    r.reason = std::string(f[3]);
    if (f.size() > 5) {
      r.left = ParseSlurmTime(f[4]);
      r.comment = std::string(f[5]);
    } else if (f.size() > 4) {
      r.left = ParseSlurmTime(f[4]);
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace

void AllocationLauncher::Scan() {
  if (polling_) return;
  polling_ = true;
  tools_->Run("squeue", {"-h", "-t", "all", "-o", "%i|%T|%N|%r|%L|%k"}, [this](RunResult r) {
    polling_ = false;
    if (r.outcome.kind != Kind::kSucceeded && r.outcome.kind != Kind::kUnsupported) {
      spdlog::warn(
          "executor slurm: squeue failed ({}): looking for the allocations left running "
          "again in a moment",
          LastLine(r.stderr_capture));
      return;  // the tick asks again
    }
    const std::string from = " from " + tag_;
    for (const AllocRow& row : ParseAllocRows(r.stdout_capture)) {
      // "ckprof allocation NAME uid UID user USER from TAG"
      const std::string& c = row.comment;
      if (c.rfind("ckprof allocation ", 0) != 0 || c.size() < from.size() ||
          c.compare(c.size() - from.size(), from.size(), from) != 0 || SlurmStateFinal(row.state)) {
        continue;
      }
      char name[64] = {}, user[256] = {};
      unsigned uid = 0;
      if (std::sscanf(c.c_str(), "ckprof allocation %63s uid %u user %255s", name, &uid, user) !=
          3) {
        continue;
      }
      auto a = std::make_shared<Alloc>();
      a->name = name;
      a->uid = uid;
      a->user = user;
      a->job_id = row.id;
      a->node = row.node;
      a->state = row.state == "PENDING" ? "pending" : "starting";
      if (row.left) a->deadline = UnixNow() + *row.left;
      a->dir = settings_.work_dir + "/" + a->user + "/alloc-" + a->name;
      if (const passwd* pw = getpwuid(uid)) a->gid = pw->pw_gid;
      auto secret = ReadSecret(a->dir + "/secret", uid);
      if (!secret.ok() || a->user.find('/') != std::string::npos) {
        spdlog::warn("allocation {} (Slurm job {}) left by the last ckprofd: {}; cancelling it",
                     a->name, row.id, secret.ok() ? "its user's name" : secret.error());
        tools_->Run("scancel", {std::to_string(row.id)}, [](RunResult) {});
        continue;
      }
      a->secret = *secret;
      a->slots.assign(static_cast<size_t>(settings_.GpusPerAllocation()), 0);
      spdlog::info("allocation {} (Slurm job {}, {}) left by the last ckprofd: followed again",
                   a->name, a->job_id, a->user);
      allocs_[a->name] = a;
    }
    // The runs followed in them: each waits for its agent to say what it has.
    for (const auto& [id, handle] : adopted_handles_) {
      auto it = runs_.find(id);
      if (it == runs_.end() || it->second->done) continue;
      RunPtr run = it->second;
      for (const auto& [name, a] : allocs_) {
        if (a->job_id == handle) run->alloc = a;
      }
      if (!run->alloc) {
        FinishLater(run, Outcome{Kind::kInterrupted, 0, 0,
                                 "its allocation (Slurm job " + std::to_string(handle) +
                                     ") ended while ckprofd was stopped"});
      }
    }
    adopted_handles_.clear();
    scanned_ = true;
    scanned_at_ = UnixNow();
    SchedulePlace();
  });
}

void AllocationLauncher::ArmTick() {
  if (tick_armed_) return;
  tick_armed_ = true;
  tick_timer_.expires_after(std::chrono::seconds(1));
  tick_timer_.async_wait([this, alive = alive_](const asio::error_code& ec) {
    if (ec || !*alive) return;
    tick_armed_ = false;
    Tick();
  });
}

void AllocationLauncher::Tick() {
  const double now = UnixNow();
  if (!scanned_) {
    Scan();
  } else if (!polling_ && (now - polled_at_) * 1000 >= settings_.poll_ms) {
    Poll();
  }
  for (const auto& [name, a] : std::map<std::string, AllocPtr>(allocs_)) {
    if (a->state == "ready" && a->Idle() && now - a->idle_since >= settings_.idle_release_s) {
      Release(a, "idle for " + FormatSeconds(now - a->idle_since));
    } else if (a->state == "releasing" && now - a->released_at > kReleaseWait_s && a->job_id > 0) {
      a->released_at = now;
      tools_->Run("scancel", {std::to_string(a->job_id)}, [](RunResult) {});
    }
  }
  // Followed runs wait only so long for their agents to speak.
  if (scanned_ && now - scanned_at_ >= kAdoptWait_s && !waiting_.empty()) SchedulePlace();
  // (Nothing to follow: the next Request arms it again.)
  if (!scanned_ || !allocs_.empty() || !waiting_.empty()) ArmTick();
}

void AllocationLauncher::Poll() {
  std::string ids;
  for (const auto& [name, a] : allocs_) {
    if (a->job_id > 0) ids += (ids.empty() ? "" : ",") + std::to_string(a->job_id);
  }
  if (ids.empty()) return;
  polling_ = true;
  polled_at_ = UnixNow();
  tools_->Run("squeue", {"-h", "-t", "all", "-o", "%i|%T|%N|%r|%L", "-j", ids},
              [this](RunResult r) {
                polling_ = false;
                // (Exit 1, "Invalid job id specified", when none is known any more.)
                std::map<int64_t, AllocRow> rows;
                for (auto& row : ParseAllocRows(r.stdout_capture)) rows[row.id] = row;
                const double now = UnixNow();
                for (const auto& [name, a] : std::map<std::string, AllocPtr>(allocs_)) {
                  if (a->job_id <= 0) continue;
                  auto it = rows.find(a->job_id);
                  if (it == rows.end()) {
                    if (++a->missing >= kMissingPolls) Ended(a, "Slurm no longer knows it");
                    continue;
                  }
                  const AllocRow& row = it->second;
                  a->missing = 0;
                  if (!row.node.empty()) a->node = row.node;
                  if (row.left) a->deadline = now + *row.left;
                  if (SlurmStateFinal(row.state)) {
                    std::string why = "Slurm ended it " + row.state;
                    if (!row.reason.empty() && row.reason != "None") why += " (" + row.reason + ")";
                    Ended(a, why);
                  } else if (row.state == "RUNNING" && a->state == "pending") {
                    a->state = "starting";
                  }
                }
              });
}

void AllocationLauncher::Finish(const RunPtr& run, RunResult r) {
  if (run->done) return;
  run->done = true;
  runs_.erase(run->id);
  if (AllocPtr a = run->alloc; a && run->gpu >= 0 &&
                               static_cast<size_t>(run->gpu) < a->slots.size() &&
                               a->slots[run->gpu] == run->id) {
    a->slots[run->gpu] = 0;
    if (a->Idle()) a->idle_since = UnixNow();
  }
  auto done = std::move(run->on_done);
  if (done) done(std::move(r));
}

void AllocationLauncher::FinishLater(const RunPtr& run, Outcome o) {
  asio::post(ex_, [this, run, o = std::move(o), alive = alive_]() mutable {
    if (!*alive || run->done) return;
    RunResult r;
    r.outcome = std::move(o);
    r.started_at = r.ended_at = SystemClock::now();
    r.pid = -1;
    if (run->alloc) {
      r.placement = Placement{std::string(Name()), run->alloc->job_id, "", run->alloc->node, ""};
    }
    Finish(run, std::move(r));
  });
}

}  // namespace ckprof
