// Connection: the client's side of the ckprofd protocol — connect to the daemon's socket,
// say hello, send requests and read their answers (or a watch stream). Blocking I/O; one
// thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/protocol.h"
#include "common/result.h"

namespace ckprof {

// The socket a command talks to: --socket, else $CKPROF_SOCKET, else the default path.
std::string ResolveSocketPath(const std::string& flag);

// Exit code for "the daemon is not reachable".
inline constexpr int kExitUnreachable = 2;

class Connection {
 public:
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects and exchanges hellos. The error is one line naming the socket and how to start
  // ckprofd (or to use --local where the command has it); when the socket is there but its
  // permissions keep the user out, it names the group to join instead.
  // `went_away`, when given, is set when the daemon accepted the connection and then closed it
  // before it answered the hello (it stopped or died at that moment): not a refusal.
  static Result<std::unique_ptr<Connection>> Open(const std::string& socket_path,
                                                  bool* went_away = nullptr);

  // Sends a request (StatusRequest, SubmitRequest, ... in common/protocol.h) and returns the
  // daemon's answer as the request's reply type: conn.Call(StatusRequest{...}) is a
  // Result<StatusReply>. A response with "ok": false comes back as an error holding the
  // daemon's message; `refusal`, when given, then receives it as an ErrorReply (a refused
  // submit carries its conversion summary and warnings).
  template <typename R>
  requires IsRequest<R> Result<typename R::Reply> Call(R request, ErrorReply* refusal = nullptr) {
    nlohmann::json refused;
    auto answer = CallJson(std::move(request), refusal ? &refused : nullptr);
    if (!answer) {
      if (refusal) {
        auto r = ReadReply<ErrorReply>(refused);
        *refusal = r ? std::move(*r) : ErrorReply{answer.error(), std::nullopt};
      }
      return Error{answer.error()};
    }
    return ReadReply<typename R::Reply>(*answer);
  }

  // The same, the answer as JSON (`refusal` receives a refusal's whole answer): for the raw
  // frame (tests, --json views that print it).
  Result<nlohmann::json> CallJson(Request request, nlohmann::json* refusal = nullptr);

  // Sends a request answered by a stream (watch, log with follow); calls on_frame for the
  // first answer (a refusal is the error) and every frame until the stream ends
  // ({"type":"end"}). on_frame may return false to stop early.
  Status Stream(Request request, const std::function<bool(const nlohmann::json&)>& on_frame);
  // Sends a watch request; calls on_frame for the first answer and every event until the
  // stream ends ({"type":"end"}). on_frame may return false to stop early. end_only: no task
  // events, only the first answer and job_finished (what `ckprof wait` needs).
  Status Watch(int64_t job_id, const std::function<bool(const nlohmann::json&)>& on_frame,
               bool end_only = false);
  // The same, typed: on_start gets the first answer, on_event each event.
  Status Watch(int64_t job_id, const std::function<bool(const WatchReply&)>& on_start,
               const std::function<bool(const JobEventFrame&)>& on_event, bool end_only = false);

  const std::string& path() const { return path_; }
  const nlohmann::json& hello() const { return hello_; }
  // True once the connection broke: the daemon closed it (it stopped or died) or a read or
  // write failed. An error from Call or Watch then means "the daemon is gone", not "the daemon
  // said no".
  bool lost() const { return lost_; }
  // A time by which each answer or frame must have come (none: wait as long as it takes). One
  // that has not comes back as an error with timed_out() true; the connection stays usable.
  void SetDeadline(std::optional<std::chrono::steady_clock::time_point> deadline) {
    deadline_ = deadline;
  }
  bool timed_out() const { return timed_out_; }

 private:
  Connection(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Status Send(const nlohmann::json& j);
  // An error when the daemon's hello lacks the feature the request needs.
  Status CheckFeature(const Request& request) const;
  Result<nlohmann::json> Receive();
  int fd_;
  std::string path_;
  std::string buffer_;
  int64_t next_id_ = 1;
  nlohmann::json hello_;
  bool lost_ = false;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  bool timed_out_ = false;
};

}  // namespace ckprof
