// status_probe: what another user sees of ckprofd while something else happens to it. Asks
// `status` the way `ckprof status` does (a new connection, the hello, the request) every
// --interval-ms until its standard input closes (or SIGTERM/SIGINT), then prints one JSON line:
//   {"requests":N,"errors":E,"p50_ms":..,"p99_ms":..,"max_ms":..,"first_error":"..."}
// A request that fails (refused, closed, an error reply, no answer in 10 s) counts as an error
// and as 10000 ms. Prints "ready" on stderr after its first answered request, so that a test
// can start its attack then. Used by the security tests (run as a second real user) and by
// bench/bench.py. --clients N: N such clients at once (threads, their starts spread over one
// interval), the figures over all their requests.
//
//   status_probe SOCKET [--interval-ms 50] [--job J] [--clients N] [--log-slow MS]
// --log-slow MS: each call slower than MS on stderr, "slow: answered at UNIXTIME after X ms".
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kFailedMs = 10000;

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

// One line from fd within `deadline`; empty on EOF, error or timeout.
std::string ReadLine(int fd, std::string& buffer, Clock::time_point deadline) {
  for (;;) {
    if (auto nl = buffer.find('\n'); nl != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return line;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return "";
    pollfd p{fd, POLLIN, 0};
    // (The SIGTERM that stops the probe interrupts poll: the request in flight goes on.)
    const int ready = poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return "";
    char chunk[65536];
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

bool SendAll(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// One `ckprof status`: connect, hello, status. "" when it was answered, else what went wrong.
std::string AskStatus(const std::string& socket_path, const std::string& request) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  std::string error;
  std::string buffer;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    error = std::string("connect: ") + std::strerror(errno);
  } else if (!SendAll(fd, "{\"type\":\"hello\",\"protocol\":1,\"id\":1}\n")) {
    error = "the hello could not be sent";
  } else if (auto hello = ReadLine(fd, buffer, deadline);
             hello.find("\"ok\":true") == std::string::npos) {
    error = "hello: " + (hello.empty() ? std::string("no answer") : hello.substr(0, 200));
  } else if (!SendAll(fd, request)) {
    error = "the request could not be sent";
  } else if (auto reply = ReadLine(fd, buffer, deadline);
             reply.find("\"ok\":true") == std::string::npos) {
    error = "status: " + (reply.empty() ? std::string("no answer") : reply.substr(0, 200));
  }
  close(fd);
  return error;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(
        stderr,
        "usage: status_probe SOCKET [--interval-ms 50] [--job J] [--clients N] [--log-slow MS]\n");
    return 2;
  }
  const std::string socket_path = argv[1];
  int interval_ms = 50;
  int clients = 1;
  double log_slow_ms = 0;  // --log-slow MS: each call slower than that on stderr, with its time
  std::string request = "{\"type\":\"status\",\"id\":2}\n";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--interval-ms") {
      interval_ms = std::atoi(argv[i + 1]);
    } else if (flag == "--log-slow") {
      log_slow_ms = std::atof(argv[i + 1]);
    } else if (flag == "--clients") {
      clients = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--job") {
      request = std::string("{\"type\":\"status\",\"id\":2,\"job_id\":") + argv[i + 1] + "}\n";
    } else {
      std::fprintf(stderr, "status_probe: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  signal(SIGPIPE, SIG_IGN);
  // Stops when a piped standard input closes (the other end's owner went away).
  struct stat st {};
  if (fstat(0, &st) == 0 && S_ISFIFO(st.st_mode)) {
    std::thread stdin_watch([] {
      char c;
      while (read(0, &c, 1) > 0) {
      }
      g_stop = true;
    });
    stdin_watch.detach();
  }

  // Each client's own figures, merged at the end.
  struct Tally {
    std::vector<double> ms;
    int errors = 0;
    std::string first_error;
  };
  std::vector<Tally> tallies(static_cast<size_t>(clients));
  std::atomic<bool> ready{false};
  auto client = [&](Tally& t, int index) {
    auto next =
        Clock::now() + std::chrono::microseconds(int64_t{interval_ms} * 1000 * index / clients);
    std::this_thread::sleep_until(next);
    while (!g_stop) {
      const auto start = Clock::now();
      const std::string error = AskStatus(socket_path, request);
      const double took = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (log_slow_ms > 0 && took > log_slow_ms) {
        timespec now{};
        clock_gettime(CLOCK_REALTIME, &now);
        std::fprintf(stderr, "slow: answered at %ld.%03ld after %.1f ms\n",
                     static_cast<long>(now.tv_sec), now.tv_nsec / 1000000, took);
      }
      if (error.empty()) {
        t.ms.push_back(took);
        if (!ready.exchange(true)) {
          std::fprintf(stderr, "ready\n");
          std::fflush(stderr);
        }
      } else {
        ++t.errors;
        t.ms.push_back(kFailedMs);
        if (t.first_error.empty()) t.first_error = error;
      }
      next += std::chrono::milliseconds(interval_ms);
      const auto now = Clock::now();
      if (next > now) {
        std::this_thread::sleep_for(next - now);
      } else {
        next = now;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < clients; ++i) threads.emplace_back(client, std::ref(tallies[i]), i);
  client(tallies[0], 0);
  for (auto& th : threads) th.join();
  std::vector<double> ms;
  int errors = 0;
  std::string first_error;
  for (const Tally& t : tallies) {
    ms.insert(ms.end(), t.ms.begin(), t.ms.end());
    errors += t.errors;
    if (first_error.empty()) first_error = t.first_error;
  }
  std::printf(
      "{\"requests\":%zu,\"errors\":%d,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,"
      "\"first_error\":%s}\n",
      ms.size(), errors, Percentile(ms, 0.5), Percentile(ms, 0.99),
      ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end()), JsonString(first_error).c_str());
  return 0;
}
