#include "daemon/server.h"

#include <grp.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>

#include "common/json_util.h"
#include "daemon/peer.h"

namespace ckprof {

namespace {

constexpr size_t kParseOnPoolBytes = 1 << 20;

// Gives the heap's free pages back to the system.
void ReturnFreedMemory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace

namespace {

using json = nlohmann::json;
using Socket = asio::local::stream_protocol::socket;
using namespace asio::experimental::awaitable_operators;
constexpr auto kTuple = asio::experimental::as_tuple(asio::use_awaitable);

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// True when something accepts connections at `path` (another ckprofd).
bool SomeoneListens(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// Queues a job's events for one watching connection and wakes its coroutine.
class EventQueue final : public JobWatcher {
 public:
  EventQueue(asio::any_io_executor ex, bool end_only) : wake_(ex), end_only_(end_only) {
    wake_.expires_at(asio::steady_timer::time_point::max());
  }
  void OnJobEvent(const JobEvent& event) override {
    events_.push_back(event);
    wake_.cancel();
  }
  bool EndOnly() const override { return end_only_; }
  std::deque<JobEvent>& events() { return events_; }
  asio::steady_timer& wake() { return wake_; }

 private:
  asio::steady_timer wake_;
  bool end_only_;
  std::deque<JobEvent> events_;
};

// Writes one frame, bounded by a timeout (a client that stops reading is dropped).
asio::awaitable<bool> WriteFrame(Socket& socket, const std::string& frame, double timeout_s) {
  asio::steady_timer timer(socket.get_executor());
  timer.expires_after(Ms(std::max(timeout_s, 1.0)));
  auto result =
      co_await (asio::async_write(socket, asio::buffer(frame), kTuple) || timer.async_wait(kTuple));
  if (result.index() == 1) co_return false;
  auto [ec, n] = std::get<0>(result);
  co_return !ec;
}

// systemd socket activation: our socket is fd 3.
bool SocketActivated() {
  const char* listen_pid = std::getenv("LISTEN_PID");
  const char* listen_fds = std::getenv("LISTEN_FDS");
  return listen_pid && listen_fds && std::atoi(listen_pid) == getpid() &&
         std::atoi(listen_fds) >= 1;
}

}  // namespace

Server::Server(asio::io_context& io, Service& service, const DaemonConfig& config)
    : io_(io), service_(service), config_(config), acceptor_(io) {}

Server::~Server() {
  *alive_ = false;
  if (owns_path_) unlink(path_.c_str());
}

Status Server::CheckSocketPath(const DaemonConfig& config) {
  if (SocketActivated()) return Status::Ok();
  const std::string& path = config.socket;
  if (path.empty()) return MakeError("the socket path is empty: pass --socket PATH");
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return MakeError("socket path " + path + " is too long (at most " +
                     std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes)");
  }
  const auto dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    return MakeError("the socket's directory " + dir.string() +
                     " does not exist: create it first (systemd's RuntimeDirectory= makes "
                     "/run/ckprofd) or choose another --socket");
  }
  return Status::Ok();
}

Status Server::Listen() {
  // systemd socket activation: our socket is fd 3.
  if (SocketActivated()) {
    asio::error_code ec;
    acceptor_.assign(asio::local::stream_protocol(), 3, ec);
    if (ec) return MakeError("cannot use the socket systemd passed (fd 3): " + ec.message());
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    path_ = config_.socket + " (from systemd)";
    return Status::Ok();
  }
  path_ = config_.socket;
  if (Status s = CheckSocketPath(config_); !s) return s;
  struct stat st {};
  if (lstat(path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return MakeError("socket path " + path_ +
                       " exists and is not a socket; remove it or choose "
                       "another --socket");
    }
    if (SomeoneListens(path_)) {
      return MakeError("another ckprofd is already listening on " + path_);
    }
    unlink(path_.c_str());  // stale: its daemon is gone
  }
  asio::error_code ec;
  acceptor_.open(asio::local::stream_protocol(), ec);
  if (!ec) {
    mode_t old = umask(0177);
    acceptor_.bind(asio::local::stream_protocol::endpoint(path_), ec);
    umask(old);
  }
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return MakeError("cannot listen on " + path_ + ": " + ec.message());
  owns_path_ = true;
  if (!config_.socket_group.empty()) {
    std::vector<char> buf(16384);
    group gr{};
    group* g = nullptr;
    if (getgrnam_r(config_.socket_group.c_str(), &gr, buf.data(), buf.size(), &g) != 0 || !g) {
      return MakeError("socket_group '" + config_.socket_group + "' does not exist");
    }
    if (chown(path_.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) {
      return MakeError("cannot give " + path_ + " to group " + config_.socket_group + ": " +
                       std::strerror(errno));
    }
  }
  if (chmod(path_.c_str(), config_.socket_mode) != 0) {
    return MakeError("cannot set the mode of " + path_ + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

void Server::Start() {
  asio::co_spawn(io_, AcceptLoop(), [](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::error("accept loop ended: {}", ex.what());
    }
  });
}

void Server::Stop() {
  stopping_ = true;
  asio::error_code ec;
  acceptor_.close(ec);
}

asio::awaitable<void> Server::AcceptLoop() {
  while (!stopping_) {
    auto [ec, socket] = co_await acceptor_.async_accept(kTuple);
    if (ec) {
      if (stopping_ || ec == asio::error::operation_aborted) co_return;
      spdlog::warn("accept failed: {}", ec.message());
      if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space) {
        asio::steady_timer pause(io_);
        pause.expires_after(std::chrono::milliseconds(100));
        co_await pause.async_wait(kTuple);
      }
      continue;
    }
    if (connections_ >= static_cast<size_t>(config_.max_clients)) {
      std::string frame =
          Frame(ErrorResponse(0, "ckprofd is serving too many clients (" +
                                     std::to_string(config_.max_clients) + "); try again shortly"));
      asio::error_code wec;
      asio::write(socket, asio::buffer(frame), wec);
      continue;
    }
    asio::co_spawn(io_, Session(std::move(socket)), [](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        spdlog::error("client session ended by an error: {}", ex.what());
      }
    });
  }
}

asio::awaitable<void> Server::Session(Socket socket) {
  ++connections_;
  auto alive = alive_;
  struct Counter {
    Server* s;
    std::shared_ptr<bool> alive;
    ~Counter() {
      if (*alive) --s->connections_;
    }
  } counter{this, alive};
  auto identity = PeerIdentity(socket.native_handle(), config_.admin_group);
  if (!identity) {
    spdlog::warn("dropping a client: {}", identity.error());
    co_return;
  }
  const Identity who = *identity;
  const double timeout_s = config_.client_timeout_s;
  const size_t max_frame = config_.max_frame_bytes;
  std::string buffer;
  bool greeted = false;
  asio::steady_timer timer(socket.get_executor());

  while (!stopping_) {
    timer.expires_after(Ms(timeout_s));
    auto result = co_await (
        asio::async_read_until(socket, asio::dynamic_buffer(buffer, max_frame + 1), '\n', kTuple) ||
        timer.async_wait(kTuple));
    if (!*alive || stopping_) co_return;
    if (result.index() == 1) {
      // Silent, or too slow to finish a frame (one byte a second): either way it goes.
      std::string why = !greeted ? "no hello within " + FormatSeconds(timeout_s) + "; closing"
                        : buffer.empty()
                            ? "connection idle for " + FormatSeconds(timeout_s) + "; closing"
                            : "request not complete within " + FormatSeconds(timeout_s) + " (" +
                                  std::to_string(buffer.size()) +
                                  " bytes received, no newline); closing";
      std::string out = Frame(ErrorResponse(0, why));
      co_await WriteFrame(socket, out, 1);
      co_return;
    }
    auto [ec, n] = std::get<0>(result);
    if (ec == asio::error::not_found || (!ec && n > max_frame + 1)) {
      spdlog::warn("client uid {} pid {} sent a frame over {} bytes; closing", who.uid, who.pid,
                   max_frame);
      std::string out = Frame(ErrorResponse(
          0, "frame too large: over the limit of " + std::to_string(max_frame) + " bytes"));
      co_await WriteFrame(socket, out, timeout_s);
      co_return;
    }
    if (ec) co_return;  // EOF or reset: the client left
    // A large frame (a submit) is usually all the buffer holds: take it without a copy, and
    // let go of its memory once parsed, not when the request is done.
    std::string frame;
    if (n == buffer.size()) {
      frame = std::move(buffer);
      buffer = std::string();
      frame.pop_back();
    } else {
      frame = buffer.substr(0, n - 1);
      buffer.erase(0, n);
    }
    if (!frame.empty() && frame.back() == '\r') frame.pop_back();
    if (frame.find_first_not_of(" \t") == std::string::npos) continue;

    // A large frame (a submit of 100,000 configs is 50 MB) is parsed on the pool, so that
    // other clients are answered meanwhile.
    Result<Request> request = Error{""};
    if (frame.size() >= kParseOnPoolBytes) {
      co_await service_.ToPool();
      request = ParseRequest(frame);
      std::string().swap(frame);
      co_await service_.ToIo();
      if (!*alive || stopping_) co_return;
    } else {
      request = ParseRequest(frame);
    }
    std::string().swap(frame);
    if (!request) {
      // A malformed frame gets a clear answer; the connection stays usable.
      std::string out = Frame(ErrorResponse(0, request.error()));
      if (!co_await WriteFrame(socket, out, timeout_s)) {
        co_return;
      }
      continue;
    }
    Request& req = *request;
    if (!greeted) {
      if (req.type != RequestType::kHello) {
        std::string out = Frame(ErrorResponse(
            req.id, std::string("say hello first: {\"type\":\"hello\",\"protocol\":") +
                        std::to_string(kProtocolVersion) + "}"));
        co_await WriteFrame(socket, out, timeout_s);
        co_return;
      }
      if (req.protocol != kProtocolVersion) {
        std::string out = Frame(ErrorResponse(
            req.id, "protocol version " + std::to_string(req.protocol) +
                        " is not supported; this ckprofd speaks " +
                        std::to_string(kProtocolVersion) + " (use the ckprof that came with it)"));
        co_await WriteFrame(socket, out, timeout_s);
        co_return;
      }
      greeted = true;
    }
    if (req.type == RequestType::kWatch) {
      Scheduler& sched = service_.scheduler();
      if (!sched.JobExists(req.job_id)) {
        std::string out = Frame(ErrorResponse(req.id, "no job " + std::to_string(req.job_id)));
        if (!co_await WriteFrame(socket, out, timeout_s)) {
          co_return;
        }
        continue;
      }
      EventQueue queue(socket.get_executor(), req.end_only);
      sched.AddWatcher(req.job_id, &queue);
      struct Unwatch {
        Scheduler& s;
        int64_t job;
        EventQueue* q;
        std::shared_ptr<bool> alive;
        ~Unwatch() {
          if (*alive) s.RemoveWatcher(job, q);
        }
      } unwatch{sched, req.job_id, &queue, alive};
      json first = OkResponse(req);
      if (auto s = sched.Summary(req.job_id); s) first["job"] = ToJson(*s);
      json running = json::array();
      for (const auto& g : sched.Gpus()) {
        if (g.job_id == req.job_id) running.push_back(ToJson(g));
      }
      first["running"] = std::move(running);
      // Decided with the summary, before the write: events of a job that ends while the first
      // frame is being written are queued, and must be sent, job_finished included.
      bool ended = sched.JobEnded(req.job_id);
      std::string first_frame = Frame(first);
      if (!co_await WriteFrame(socket, first_frame, timeout_s)) co_return;
      char probe = 0;
      while (!ended) {
        while (queue.events().empty()) {
          queue.wake().expires_at(asio::steady_timer::time_point::max());
          auto w = co_await (queue.wake().async_wait(kTuple) ||
                             socket.async_read_some(asio::buffer(&probe, 1), kTuple));
          if (!*alive || stopping_) co_return;
          if (w.index() == 1) co_return;  // the client left (or broke the protocol)
        }
        // What is queued goes out in one write (a task's end and the next start come
        // together), up to job_finished.
        std::string frames;
        while (!queue.events().empty() && !ended && frames.size() < (size_t{1} << 20)) {
          JobEvent ev = std::move(queue.events().front());
          queue.events().pop_front();
          ended = ev.job_finished;
          frames += ev.frame;
        }
        if (!co_await WriteFrame(socket, frames, timeout_s)) co_return;
      }
      std::string end_frame = Frame(json{{"type", "end"}, {"id", req.id}, {"job_id", req.job_id}});
      if (!co_await WriteFrame(socket, end_frame, timeout_s)) {
        co_return;
      }
      continue;
    }
    json response;
    try {
      response = co_await service_.Handle(req, who);
    } catch (const std::exception& e) {
      spdlog::error("request {} from uid {} failed: {}", RequestTypeName(req.type), who.uid,
                    e.what());
      response = ErrorResponse(req.id, std::string("internal error: ") + e.what());
    }
    if (!*alive) co_return;
    if (req.type == RequestType::kSubmit) {
      // A submit's text and conversion are freed by now; glibc would keep the pages (hundreds
      // of MiB for 100,000 configs) for the daemon's lifetime without being asked.
      std::string().swap(req.submit.content);
      ReturnFreedMemory();
    }
    response["id"] = req.id;
    std::string response_frame = Frame(response);
    if (!co_await WriteFrame(socket, response_frame, timeout_s)) co_return;
  }
}

}  // namespace ckprof
