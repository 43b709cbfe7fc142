// Server: ckprofd's Unix socket — listening (or a socket handed over by systemd), accepting,
// and one coroutine per connection that owns its socket: identity from SO_PEERCRED, the hello,
// size-capped newline-delimited JSON frames with timeouts, and each request handed to the
// Service (a watch as the Service's subscription, streamed). The Server talks to its Service
// only. A misbehaving client loses its connection; the daemon never stops.
//
// What one user may hold is bounded, so that no user locks out the others or runs the daemon
// out of memory: connections (max_connections_per_user; the last admin_reserved_clients of
// max_clients are kept for admins), streams (max_streams_per_user) and request bytes in flight
// (max_request_bytes_per_user, and max_request_bytes for everyone): the bytes read of frames
// not yet answered, counted as they arrive, so that a frame that would go over is refused
// before it is read whole. Admins are bound by max_clients and the byte budgets only.
//
// Construct, Start and Stop on the daemon's io thread.
#pragma once

#include <sys/types.h>

#include <asio.hpp>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/result.h"
#include "daemon/daemon_config.h"
#include "daemon/service.h"

namespace ckprof {

class Server {
 public:
  Server(asio::io_context& io, Service& service, const DaemonConfig& config);
  ~Server();

  // Binds the socket: a systemd-activated one when LISTEN_FDS says so, else config.socket
  // (a stale socket file replaced, mode and group applied). Fails when another daemon answers
  // on the path, or as CheckSocketPath does.
  Status Listen();
  // Whether `config.socket` can be bound, checked before anything else starts: its directory
  // must exist (it is never created: systemd's RuntimeDirectory makes /run/ckprofd) and the
  // path must fit a socket address. Ok under systemd socket activation.
  static Status CheckSocketPath(const DaemonConfig& config);
  void Start();  // begins accepting
  void Stop();   // stops accepting and closes every connection
  void set_config(const DaemonConfig& c) { config_ = c; }
  const std::string& path() const { return path_; }
  size_t connections() const { return connections_; }

 private:
  struct Connection;
  class Chunk;
  // What one user holds at once.
  struct UserUse {
    size_t connections = 0;
    size_t streams = 0;
    uint64_t bytes = 0;           // request bytes in flight
    bool refusal_logged = false;  // the log said once that this user was at a cap
  };
  // Of max_clients, how many only admins may take: admin_reserved_clients, at most half.
  int ReservedForAdmins() const;
  // Why a new connection from `who` is refused ("" = admitted); `use`: what its user holds
  // (the global count, connections_, already counts it).
  std::string RefuseConnection(const Identity& who, const UserUse& use) const;
  // Sets the request bytes `c` holds (in flight) to `bytes`. False, with the refusal in *why,
  // when that growth takes its user or everyone over a budget; a connection that holds at
  // most kAlwaysServedBytes is never refused (small requests are served whatever else is
  // in flight).
  bool Hold(Connection& c, uint64_t bytes, std::string* why);
  // What one read brought: a request to act on, or nothing (an empty line); `reply` is sent
  // first when set (a refusal), and `close` ends the connection after it.
  struct Incoming {
    std::optional<Request> request;
    std::string reply;
    bool close = false;
  };
  asio::awaitable<void> AcceptLoop();
  // One connection, from its peer's identity to its end: reads requests and hands each to
  // Greet (the first), then to StreamWatch or Answer. Each returns false to close.
  asio::awaitable<void> Session(asio::local::stream_protocol::socket socket);
  // The next frame, size-capped and timed out, parsed (on the pool when large).
  asio::awaitable<Incoming> ReadRequest(Connection& c);
  // The hello, with the protocol version: anything else first is refused.
  asio::awaitable<bool> Greet(Connection& c, const Request& req);
  // A watch: the Service's first frame, then the job's events until its end.
  asio::awaitable<bool> StreamWatch(Connection& c, const Request& req, const StreamSpec& spec);
  // Any other request: the Service's response.
  asio::awaitable<bool> Answer(Connection& c, Request& req);

  asio::io_context& io_;
  Service& service_;
  DaemonConfig config_;
  asio::local::stream_protocol::acceptor acceptor_;
  std::string path_;
  bool owns_path_ = false;
  // The socket file it made (its device and inode): the path is removed at the end only while
  // it still names that file, not another daemon's made there since (after ours was removed).
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  bool stopping_ = false;
  size_t connections_ = 0;
  uint64_t bytes_in_flight_ = 0;                 // everyone's request bytes in flight
  std::unordered_map<uint32_t, UserUse> users_;  // by uid; those with a connection
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ckprof
