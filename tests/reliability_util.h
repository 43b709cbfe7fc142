// Helpers shared by the reliability suite (tests/reliability_*_test.cpp and
// tests/integration_reliability_*_test.cpp): talking to a daemon through the real client
// Connection, and a raw socket for clients that misbehave on purpose. Header-only; test threads
// only.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "client/connection.h"
#include "common/json_util.h"
#include "common/protocol.h"
#include "tests/test_util.h"

namespace ckprof::testing {

// False in builds with a sanitizer: ASan keeps freed memory in quarantine (256 MiB) and pads
// every allocation, so the daemon's peak memory says nothing there. Tests still run every
// step; they check memory bounds only where the numbers mean something.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kMemoryIsMeasurable = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kMemoryIsMeasurable = false;
#else
inline constexpr bool kMemoryIsMeasurable = true;
#endif
#else
inline constexpr bool kMemoryIsMeasurable = true;
#endif

// One request on a fresh connection.
inline Result<nlohmann::json> CallOnce(const std::string& socket, Request r) {
  auto conn = Connection::Open(socket);
  if (!conn) return Error{conn.error()};
  return (*conn)->Call(std::move(r));
}

// Submits `content` (a configs file, IR list or trace text); `tweak` may set more options.
inline Result<int64_t> SubmitContent(const std::string& socket, const std::string& content,
                                     const std::function<void(SubmitOptions&)>& tweak = {}) {
  Request r;
  r.type = RequestType::kSubmit;
  r.submit.content = content;
  r.submit.input_name = "reliability.json";
  if (tweak) tweak(r.submit);
  auto a = CallOnce(socket, std::move(r));
  if (!a) return Error{a.error()};
  return a->value("job_id", int64_t{0});
}

// Follows a job's event stream until `until` is true for a frame's job summary (or the stream
// ends); returns the last summary seen.
inline Result<JobSummary> WatchUntil(const std::string& socket, int64_t job,
                                     const std::function<bool(const JobSummary&)>& until) {
  auto conn = Connection::Open(socket);
  if (!conn) return Error{conn.error()};
  JobSummary last;
  Status s = (*conn)->Watch(job, [&](const nlohmann::json& f) {
    if (auto it = f.find("job"); it != f.end()) {
      if (auto js = JobSummaryFromJson(*it); js) last = *js;
    }
    return !until(last);
  });
  if (!s) return Error{s.error()};
  return last;
}

// Waits for a job to end (its watch stream's end); returns its final summary.
inline Result<JobSummary> WaitJobEnd(const std::string& socket, int64_t job) {
  auto end = WatchUntil(socket, job, [](const JobSummary&) { return false; });
  if (!end) return end;
  Request r;
  r.type = RequestType::kStatus;
  r.job_id = job;
  auto a = CallOnce(socket, r);
  if (!a) return Error{a.error()};
  return JobSummaryFromJson((*a)["job"]);
}

// A job's per-task results (with output captures and configs when `with_output`).
inline Result<std::vector<TaskResult>> JobResults(const std::string& socket, int64_t job,
                                                  bool with_output = false) {
  Request r;
  r.type = RequestType::kResults;
  r.job_id = job;
  r.all = with_output;
  auto a = CallOnce(socket, r);
  if (!a) return Error{a.error()};
  std::vector<TaskResult> out;
  for (const auto& t : a->value("tasks", nlohmann::json::array())) {
    if (auto tr = TaskResultFromJson(t); tr) out.push_back(*tr);
  }
  return out;
}

inline bool Ping(const std::string& socket) {
  Request r;
  r.type = RequestType::kPing;
  return CallOnce(socket, r).ok();
}

// A client socket that sends whatever bytes a test wants and reads raw answer lines.
class RawClient {
 public:
  RawClient() = default;
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // Connects; false (errno kept) when the connection is refused.
  bool Connect(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      int e = errno;
      Close();
      errno = e;
      return false;
    }
    return true;
  }
  int fd() const { return fd_; }
  // Writes all of `bytes`; false when the daemon has closed the connection.
  bool Send(std::string_view bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  bool Hello() {
    if (!Send("{\"type\":\"hello\",\"protocol\":1,\"id\":1}\n")) return false;
    auto line = ReadLine(10);
    return line && line->find("\"ok\":true") != std::string::npos;
  }
  // The next answer line (without '\n'), or nullopt on EOF or after timeout_s.
  std::optional<std::string> ReadLine(double timeout_s) {
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    for (;;) {
      if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      if (eof_) return std::nullopt;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) return std::nullopt;
      pollfd p = {fd_, POLLIN, 0};
      int n = poll(&p, 1, static_cast<int>(left));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      char buf[65536];
      ssize_t got = ::recv(fd_, buf, sizeof buf, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        eof_ = true;
      } else {
        buffer_.append(buf, static_cast<size_t>(got));
      }
    }
  }
  // The next answer, parsed; nullopt on EOF, timeout, or an answer that is not valid JSON.
  std::optional<nlohmann::json> ReadJson(double timeout_s) {
    auto line = ReadLine(timeout_s);
    if (!line) return std::nullopt;
    auto j = ParseJson(*line);
    if (!j) return std::nullopt;
    return *j;
  }
  // True when the daemon closes the connection within timeout_s (answers before EOF are
  // skipped and kept in `skipped`).
  bool WaitClosed(double timeout_s, std::vector<std::string>* skipped = nullptr) {
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    while (std::chrono::steady_clock::now() < deadline) {
      auto left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now());
      auto line = ReadLine(left.count());
      if (line) {
        if (skipped) skipped->push_back(*line);
        continue;
      }
      return eof_;
    }
    return eof_;
  }
  void ShutdownWrite() { shutdown(fd_, SHUT_WR); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  std::string buffer_;
  bool eof_ = false;
};

}  // namespace ckprof::testing
