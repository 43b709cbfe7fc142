#include "daemon/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace ckprof {

bool SystemdNotifyEnabled() {
  const char* s = std::getenv("NOTIFY_SOCKET");
  return s && *s;
}

void SystemdNotify(const std::string& state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (!path || !*path) return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = std::strlen(path);
  if (len >= sizeof addr.sun_path) return;
  std::memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  (void)sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
               addr_len);
  close(fd);
}

std::chrono::microseconds SystemdWatchdogInterval() {
  const char* usec = std::getenv("WATCHDOG_USEC");
  const char* pid = std::getenv("WATCHDOG_PID");
  if (!usec) return std::chrono::microseconds(0);
  if (pid && std::atoi(pid) != getpid()) return std::chrono::microseconds(0);
  long long us = std::atoll(usec);
  return std::chrono::microseconds(us > 0 ? us / 2 : 0);
}

}  // namespace ckprof
