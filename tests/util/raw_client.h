// RawClient: a socket to a test's daemon without the client library, for clients that make
// mistakes or misbehave on purpose (malformed frames, silence, vanishing mid-answer).
// Header-only; test threads only.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_util.h"

namespace ckprof::testing {

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
  // Takes over a connected socket (one connected as another user, say).
  void Adopt(int fd) {
    Close();
    fd_ = fd;
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
