#include "daemon/server.h"

#include <grp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json_util.h"
#include "daemon/heap_trim.h"
#include "daemon/peer.h"

namespace ckprof {

namespace {

constexpr size_t kParseOnPoolBytes = 1 << 20;
// A connection holding at most this many request bytes is never refused for the byte budgets.
constexpr uint64_t kAlwaysServedBytes = 64 << 10;
// Bytes asked of the socket in one read: at most this, and at least what is buffered (so that
// a large frame comes in few reads) or 4 KiB (so that an idle connection holds little).
constexpr size_t kMaxReadBytes = 256 << 10, kMinReadBytes = 4 << 10;
// A frame's bytes past this many are read into chunks of this size.
constexpr size_t kChunkBytes = 1 << 20;

}  // namespace

// A piece of a large frame, in a mapping of its own: once let go, its memory is the system's
// again at once (freed heap memory stays resident until a trim, and a frame read in chunks
// would then cost twice its size while it is put together).
class Server::Chunk {
 public:
  Chunk()
      : data_(static_cast<char*>(mmap(nullptr, kChunkBytes, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))) {
    if (data_ == MAP_FAILED) throw std::bad_alloc();
  }
  ~Chunk() { Release(); }
  Chunk(Chunk&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  Chunk& operator=(Chunk&&) = delete;
  char* data() { return data_; }
  size_t size() const { return size_; }
  void set_size(size_t n) { size_ = n; }
  std::string_view view() const { return {data_, size_}; }
  void Release() {
    if (data_) munmap(data_, kChunkBytes);
    data_ = nullptr;
    size_ = 0;
  }

 private:
  char* data_;
  size_t size_ = 0;
};

namespace {

using json = nlohmann::json;
using Socket = asio::local::stream_protocol::socket;
using namespace asio::experimental::awaitable_operators;
constexpr auto kTuple = asio::experimental::as_tuple(asio::use_awaitable);

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// "64 MiB", "1.5 MiB", "65536 bytes": a size for a refusal.
std::string Bytes(uint64_t n) {
  constexpr uint64_t kMiB = 1 << 20;
  if (n < kMiB) return std::to_string(n) + " bytes";
  if (n % kMiB == 0) return std::to_string(n / kMiB) + " MiB";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(n) / kMiB);
  return text;
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

// Queues a job's events for one watching connection and wakes its coroutine. A followed
// task's output that finds kMaxQueuedBytes queued (the client reads more slowly than the
// profiler writes) is dropped, and a note says how much.
class EventQueue final : public JobWatcher {
 public:
  static constexpr size_t kMaxQueuedBytes = 8u << 20;
  EventQueue(asio::any_io_executor ex, bool end_only) : wake_(ex), end_only_(end_only) {
    wake_.expires_at(asio::steady_timer::time_point::max());
  }
  void OnJobEvent(const JobEvent& event) override {
    if (event.droppable && queued_bytes_ > kMaxQueuedBytes) {
      dropped_bytes_ += event.frame.size();
      return;
    }
    if (dropped_bytes_ > 0) {
      const std::string note = Frame(
          json{{"type", "log"},
               {"event", "dropped"},
               {"bytes", dropped_bytes_},
               {"error", "output dropped: this client read more slowly than the profiler wrote"}});
      events_.push_back(JobEvent{note, false, false});
      queued_bytes_ += note.size();
      dropped_bytes_ = 0;
    }
    events_.push_back(event);
    queued_bytes_ += event.frame.size();
    wake_.cancel();
  }
  // Takes the oldest event.
  JobEvent Pop() {
    JobEvent ev = std::move(events_.front());
    events_.pop_front();
    queued_bytes_ -= ev.frame.size();
    return ev;
  }
  bool EndOnly() const override { return end_only_; }
  std::deque<JobEvent>& events() { return events_; }
  asio::steady_timer& wake() { return wake_; }

 private:
  asio::steady_timer wake_;
  bool end_only_;
  std::deque<JobEvent> events_;
  size_t queued_bytes_ = 0, dropped_bytes_ = 0;
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
  struct stat st {};
  if (owns_path_ && lstat(path_.c_str(), &st) == 0 && st.st_dev == socket_dev_ &&
      st.st_ino == socket_ino_) {
    unlink(path_.c_str());
  }
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
  if (struct stat made{}; lstat(path_.c_str(), &made) == 0) {
    socket_dev_ = made.st_dev;
    socket_ino_ = made.st_ino;
  }
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
  spdlog::info(
      "clients: at most {} ({} kept for admins), {} connections and {} streams per user; "
      "requests in flight: {} per user, {} in all; frames up to {}",
      config_.max_clients, ReservedForAdmins(), config_.max_connections_per_user,
      config_.max_streams_per_user, Bytes(config_.max_request_bytes_per_user),
      Bytes(config_.max_request_bytes), Bytes(config_.max_frame_bytes));
  if (config_.max_connections_per_user >= config_.max_clients - ReservedForAdmins()) {
    spdlog::warn(
        "max_connections_per_user ({}) lets one user take every connection that is not kept "
        "for admins (max_clients {} less {} kept for admins): the others may be locked out",
        config_.max_connections_per_user, config_.max_clients, ReservedForAdmins());
  }
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

// One connection, owned by its Session coroutine.
struct Server::Connection {
  Socket socket;
  Identity who;
  std::shared_ptr<bool> alive;  // false once the Server is gone
  std::string buffer;           // bytes read past the last frame
  std::vector<Chunk> chunks;    // a large frame's bytes past the buffer's kChunkBytes
  bool greeted = false;
  double timeout_s = 0;
  size_t max_frame = 0;
  UserUse* use = nullptr;  // its user's (the Server's users_ entry lives while it does)
  uint64_t held = 0;       // request bytes in flight: the buffer, and the request being handled
  // Bytes read and not yet taken as a frame.
  size_t Pending() const {
    size_t n = buffer.size();
    for (const auto& chunk : chunks) n += chunk.size();
    return n;
  }
  // Lets go of them (a refused frame).
  void Drop() {
    std::string().swap(buffer);
    chunks.clear();
  }
  // Writes one frame; false when the client did not take it in time (it is dropped).
  asio::awaitable<bool> Send(const std::string& frame) {
    co_return co_await WriteFrame(socket, frame, timeout_s);
  }
};

asio::awaitable<void> Server::Session(Socket socket) {
  ++connections_;
  struct Counter {
    Server* s;
    std::shared_ptr<bool> alive;
    ~Counter() {
      if (*alive) --s->connections_;
    }
  } counter{this, alive_};
  auto identity = PeerIdentity(socket.native_handle(), config_.admin_group);
  if (!identity) {
    spdlog::warn("dropping a client: {}", identity.error());
    co_return;
  }
  Connection c{.socket = std::move(socket),
               .who = *identity,
               .alive = alive_,
               .buffer = {},
               .chunks = {},
               .timeout_s = config_.client_timeout_s,
               .max_frame = config_.max_frame_bytes};
  // Admitted or refused before it counts as one of its user's connections.
  UserUse& use = users_[c.who.uid];
  if (std::string why = RefuseConnection(c.who, use); !why.empty()) {
    if (!use.refusal_logged) {
      spdlog::warn("uid {} ({}) pid {} refused: {}", c.who.uid, c.who.user, c.who.pid, why);
      use.refusal_logged = true;
    }
    if (use.connections == 0) users_.erase(c.who.uid);
    // (Built before the co_await: GCC 12 cannot keep a temporary across one.)
    const std::string refusal = Frame(ErrorResponse(0, why));
    co_await c.Send(refusal);
    co_return;
  }
  c.use = &use;
  ++c.use->connections;
  struct Release {
    Server* s;
    Connection& c;
    ~Release() {
      if (!*c.alive) return;
      s->Hold(c, 0, nullptr);
      if (--c.use->connections == 0) {
        s->users_.erase(c.who.uid);
      } else if (c.use->connections < static_cast<size_t>(s->config_.max_connections_per_user)) {
        c.use->refusal_logged = false;
      }
    }
  } release{this, c};
  while (!stopping_) {
    Hold(c, c.Pending(), nullptr);  // the last request is answered: its bytes are let go
    Incoming in = co_await ReadRequest(c);
    if (!*c.alive || stopping_) co_return;
    if (!in.reply.empty() && !co_await c.Send(in.reply)) co_return;
    if (in.close) co_return;
    if (!in.request) continue;  // refused, or an empty line
    Request& req = *in.request;
    if (!c.greeted && !co_await Greet(c, req)) co_return;
    const std::optional<StreamSpec> stream = StreamOf(req);
    if (!stream) {
      if (!co_await Answer(c, req)) co_return;
      continue;
    }
    const size_t cap = static_cast<size_t>(config_.max_streams_per_user);
    if (!c.who.admin && c.use->streams >= cap) {
      if (!c.use->refusal_logged) {
        spdlog::warn("uid {} ({}) is at max_streams_per_user ({}): a {} refused", c.who.uid,
                     c.who.user, cap, RequestTypeName(req.type()));
        c.use->refusal_logged = true;
      }
      const std::string refusal = Frame(ErrorResponse(
          req.id, "you (" + c.who.user + ") already follow " + std::to_string(c.use->streams) +
                      " jobs or logs at once (watch, wait, log -f), the most one user may " +
                      "(max_streams_per_user in ckprofd's config): end one and try again"));
      if (!co_await c.Send(refusal)) co_return;
      continue;
    }
    ++c.use->streams;
    const bool ok = co_await StreamWatch(c, req, *stream);
    if (!*c.alive) co_return;
    --c.use->streams;
    if (!ok) co_return;
  }
}

int Server::ReservedForAdmins() const {
  return std::min(config_.admin_reserved_clients, config_.max_clients / 2);
}

std::string Server::RefuseConnection(const Identity& who, const UserUse& use) const {
  if (who.admin) return "";
  if (connections_ > static_cast<size_t>(config_.max_clients - ReservedForAdmins())) {
    return "ckprofd is serving too many clients (" + std::to_string(config_.max_clients) +
           "); try again shortly";
  }
  const size_t cap = static_cast<size_t>(config_.max_connections_per_user);
  if (use.connections >= cap) {
    return "you (" + who.user + ") already have " + std::to_string(use.connections) +
           " connections to ckprofd, the most one user may hold (max_connections_per_user in " +
           "ckprofd's config): end some (watch, wait, log -f, scripts) and try again";
  }
  return "";
}

bool Server::Hold(Connection& c, uint64_t bytes, std::string* why) {
  const uint64_t before = c.held;
  c.use->bytes = c.use->bytes - before + bytes;
  bytes_in_flight_ = bytes_in_flight_ - before + bytes;
  c.held = bytes;
  if (bytes <= before || bytes <= kAlwaysServedBytes) return true;
  if (c.use->bytes > config_.max_request_bytes_per_user) {
    *why = "request refused after " + Bytes(bytes) + ": you (" + c.who.user + ") have " +
           Bytes(c.use->bytes) + " of requests in flight to ckprofd, over the " +
           Bytes(config_.max_request_bytes_per_user) +
           " one user may have at once (max_request_bytes_per_user in ckprofd's config): send "
           "large submits one after another";
    return false;
  }
  if (bytes_in_flight_ > config_.max_request_bytes) {
    *why = "request refused after " + Bytes(bytes) + ": ckprofd has " + Bytes(bytes_in_flight_) +
           " of requests in flight from all users, over the " + Bytes(config_.max_request_bytes) +
           " it takes at once (max_request_bytes in its config): try again shortly";
    return false;
  }
  return true;
}

asio::awaitable<Server::Incoming> Server::ReadRequest(Connection& c) {
  Incoming in;
  in.close = true;
  asio::steady_timer timer(c.socket.get_executor());
  timer.expires_after(Ms(c.timeout_s));
  // Read until a newline, each read's bytes held against the budgets as they come: a frame
  // over the size cap or a budget is refused at that point, not once it is all here. Past
  // kChunkBytes, bytes go into chunks filled in place: a large frame is never copied on this
  // thread as it grows (a string of tens of MiB that doubles copies all of it, on the thread
  // every other client waits for).
  size_t newline = c.buffer.find('\n');  // in the buffer, or (with chunks) in the last chunk
  while (newline == std::string::npos) {
    const size_t total = c.Pending();
    if (total > c.max_frame) {
      spdlog::warn("client uid {} pid {} sent a frame over {} bytes; closing", c.who.uid, c.who.pid,
                   c.max_frame);
      c.Drop();
      Hold(c, 0, nullptr);
      in.reply = Frame(ErrorResponse(
          0, "frame too large: over the limit of " + std::to_string(c.max_frame) + " bytes (" +
                 Bytes(c.max_frame) +
                 ", max_frame_bytes in ckprofd's config; a submit carries a gzipped input as "
                 "base64, 4/3 of the .gz file's size)"));
      co_return in;
    }
    const bool chunked = c.buffer.size() >= kChunkBytes;
    if (chunked && (c.chunks.empty() || c.chunks.back().size() == kChunkBytes)) {
      c.chunks.emplace_back();
    }
    const size_t old = chunked ? c.chunks.back().size() : c.buffer.size();
    const size_t room = std::min({chunked ? kChunkBytes - old : std::max(old, kMinReadBytes),
                                  kMaxReadBytes, c.max_frame + 1 - total});
    if (!chunked) c.buffer.resize(old + room);
    char* into = (chunked ? c.chunks.back().data() : c.buffer.data()) + old;
    auto result = co_await (c.socket.async_read_some(asio::buffer(into, room), kTuple) ||
                            timer.async_wait(kTuple));
    if (!*c.alive || stopping_) co_return in;
    const size_t got = result.index() == 0 ? std::get<1>(std::get<0>(result)) : 0;
    if (chunked) {
      c.chunks.back().set_size(old + got);
    } else {
      c.buffer.resize(old + got);
    }
    if (result.index() == 1) {
      // Silent, or too slow to finish a frame (one byte a second): either way it goes.
      const std::string t = FormatSeconds(c.timeout_s);
      std::string why = !c.greeted         ? "no hello within " + t + "; closing"
                        : c.Pending() == 0 ? "connection idle for " + t + "; closing"
                                           : "request not complete within " + t + " (" +
                                                 std::to_string(c.Pending()) +
                                                 " bytes received, no newline); closing";
      in.reply = Frame(ErrorResponse(0, why));
      co_return in;
    }
    if (std::get<0>(std::get<0>(result))) co_return in;  // EOF or reset: the client left
    std::string why;
    if (!Hold(c, c.Pending(), &why)) {
      if (!c.use->refusal_logged) {
        spdlog::warn("uid {} ({}) pid {}: {}; closing", c.who.uid, c.who.user, c.who.pid, why);
        c.use->refusal_logged = true;
      }
      c.Drop();
      Hold(c, 0, nullptr);
      in.reply = Frame(ErrorResponse(0, why));
      co_return in;
    }
    newline = (chunked ? c.chunks.back().view() : std::string_view(c.buffer)).find('\n', old);
  }
  in.close = false;
  // The frame, and what came after it stays in the buffer. A large frame (a submit) is usually
  // all the buffer holds: taken without a copy, and its memory let go once parsed, not when the
  // request is done. One read in chunks is put together on the pool.
  std::string frame;
  std::vector<Chunk> chunks;  // the frame's after `frame` (which is then its start)
  if (!c.chunks.empty()) {
    std::string rest(c.chunks.back().view().substr(newline + 1));
    c.chunks.back().set_size(newline);
    frame = std::move(c.buffer);
    chunks = std::move(c.chunks);
    c.chunks.clear();
    c.buffer = std::move(rest);
  } else if (newline + 1 == c.buffer.size()) {
    frame = std::move(c.buffer);
    c.buffer = std::string();
    frame.pop_back();
  } else {
    frame = c.buffer.substr(0, newline);
    c.buffer.erase(0, newline + 1);
    if (c.buffer.capacity() > 4 * c.buffer.size() + kMaxReadBytes) c.buffer.shrink_to_fit();
  }
  // Without a trailing '\r'; false when blank (nothing to answer).
  auto trim = [](std::string& f) {
    if (!f.empty() && f.back() == '\r') f.pop_back();
    return f.find_first_not_of(" \t") != std::string::npos;
  };
  // A large frame (a submit of 100,000 configs is 50 MB) is parsed on the pool, so that other
  // clients are answered meanwhile.
  Result<Request> request = Error{""};
  if (chunks.empty() && frame.size() < kParseOnPoolBytes) {
    if (!trim(frame)) co_return in;
    request = ParseRequest(frame);
  } else {
    if (!chunks.empty()) {
      // (Allocated here, copied there: an allocation of the pool's threads, once freed, would
      // stay resident in their arenas, which malloc_trim does not shrink.)
      size_t size = frame.size();
      for (const auto& chunk : chunks) size += chunk.size();
      frame.reserve(size);
    }
    co_await service_.ToPool();
    if (!chunks.empty()) {
      for (auto& chunk : chunks) {
        frame += chunk.view();
        chunk.Release();
      }
      chunks.clear();
    }
    const bool blank = !trim(frame);
    if (!blank) request = ParseRequest(frame);
    std::string().swap(frame);
    co_await service_.ToIo();
    if (blank) co_return in;
  }
  if (!request) {
    // A malformed frame gets a clear answer; the connection stays usable.
    in.reply = Frame(ErrorResponse(0, request.error()));
    co_return in;
  }
  in.request = std::move(*request);
  co_return in;
}

asio::awaitable<bool> Server::Greet(Connection& c, const Request& req) {
  std::string why;
  const HelloRequest* hello = req.get_if<HelloRequest>();
  if (hello == nullptr) {
    why = std::string("say hello first: {\"type\":\"hello\",\"protocol\":") +
          std::to_string(kProtocolVersion) + "}";
  } else if (hello->protocol != kProtocolVersion) {
    why = "protocol version " + std::to_string(hello->protocol) +
          " is not supported; this ckprofd speaks " + std::to_string(kProtocolVersion) +
          " (use the ckprof that came with it)";
  }
  if (!why.empty()) {
    co_await c.Send(Frame(ErrorResponse(req.id, why)));
    co_return false;
  }
  c.greeted = true;
  co_return true;
}

asio::awaitable<bool> Server::StreamWatch(Connection& c, const Request& req,
                                          const StreamSpec& spec) {
  bool refused = false;
  if (auto whole = co_await service_.EndedLargeLog(req, c.who, &refused)) {
    if (!co_await c.Send(*whole)) co_return false;
    if (refused) co_return true;
    const std::string end =
        Frame(json{{"type", "end"}, {"id", req.id}, {"job_id", req.get_if<LogRequest>()->job_id}});
    co_return co_await c.Send(end);
  }
  EventQueue queue(c.socket.get_executor(), spec.end_only);
  auto watching = service_.Stream(req, &queue);
  if (!watching) co_return co_await c.Send(Frame(ErrorResponse(req.id, watching.error())));
  bool ended = watching->ended;
  if (!co_await c.Send(Frame(watching->first))) co_return false;
  char probe = 0;
  while (!ended) {
    while (queue.events().empty()) {
      queue.wake().expires_at(asio::steady_timer::time_point::max());
      auto w = co_await (queue.wake().async_wait(kTuple) ||
                         c.socket.async_read_some(asio::buffer(&probe, 1), kTuple));
      if (!*c.alive || stopping_) co_return false;
      if (w.index() == 1) co_return false;  // the client left (or broke the protocol)
    }
    // What is queued goes out in one write (a task's end and the next start come together),
    // up to job_finished.
    std::string frames;
    while (!queue.events().empty() && !ended && frames.size() < (size_t{1} << 20)) {
      JobEvent ev = queue.Pop();
      ended = ev.job_finished;
      frames += ev.frame;
    }
    if (!co_await c.Send(frames)) co_return false;
  }
  // (Built before the co_await: GCC 12 cannot keep a braced list's temporaries across one.)
  const std::string end =
      Frame(json{{"type", "end"}, {"id", req.id}, {"job_id", watching->job_id}});
  co_return co_await c.Send(end);
}

asio::awaitable<bool> Server::Answer(Connection& c, Request& req) {
  std::string response;  // the frame, its id the request's
  try {
    // A client that hangs up (Ctrl-C on a large submit) is gone: not the one that only shut
    // down its writing (POLLRDHUP), which may still read the answer.
    const std::function<bool()> gone = [fd = c.socket.native_handle()] {
      pollfd p{fd, 0, 0};
      return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
    };
    response = co_await service_.Handle(req, c.who, gone);
  } catch (const std::exception& e) {
    spdlog::error("request {} from uid {} failed: {}", RequestTypeName(req.type()), c.who.uid,
                  e.what());
    response = Frame(ErrorResponse(req.id, std::string("internal error: ") + e.what()));
  }
  if (!*c.alive) co_return false;
  if (ReleasePayload(req)) {
    // A large submit's text and conversion are freed by now; glibc would keep the pages
    // (hundreds of MiB for 100,000 configs) for the daemon's lifetime without being asked.
    // Given back on the pool (a second after a million configs: not on the io thread), and the
    // submitter answered once that is done. (Not after a small one: the hop gained nothing,
    // and a refusal that stops the daemon, its state dir gone, went unanswered when the
    // daemon stopped during it.)
    co_await service_.ToPool();
    TrimHeap();
    co_await service_.ToIo();
    if (!*c.alive) co_return false;
  }
  co_return co_await c.Send(response);
}

}  // namespace ckprof
