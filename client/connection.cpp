#include "client/connection.h"

#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/json_util.h"
#include "common/version.h"

namespace ckprof {
namespace {

std::string GroupName(gid_t gid) {
  if (const group* g = getgrgid(gid)) return g->gr_name;
  return std::to_string(gid);
}

std::string UserName(uid_t uid) {
  if (const passwd* p = getpwuid(uid)) return p->pw_name;
  return std::to_string(uid);
}

// What a user whom the socket at `path` turned away (connect: EACCES) should ask for: to join
// the socket's group when the group may use it, else access from whoever runs ckprofd; or,
// when a directory on the way keeps the user out, access to that directory. `runs`: whether
// a ckprofd listens there (else the advice is for when one does).
std::string AccessAdvice(const std::string& path, bool runs = true) {
  const std::string lead =
      runs ? "ckprofd runs, but you may not use it: " : "once it runs, you may not use it either: ";
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (st.st_mode & S_IWGRP) {
      return lead + "ask to join group " + GroupName(st.st_gid) +
             " (the socket's group; log in again after joining)";
    }
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return lead + "its socket (mode " + std::string(mode) + ", owner " + UserName(st.st_uid) +
           ") admits no group; ask ckprofd's administrator "
           "for access (socket_mode and socket_group in its config)";
  }
  // The socket cannot even be looked at: the first directory on the way that may not be
  // entered is the one to ask about.
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (access(dir.c_str(), X_OK) == 0) continue;
    if (stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IXGRP)) {
      return "ckprofd's directory " + dir + " is closed to you: ask to join group " +
             GroupName(st.st_gid) + " (the directory's group; log in again after joining)";
    }
    return "ckprofd's directory " + dir +
           " is closed to you: ask ckprofd's administrator for "
           "access";
  }
  return "you may not use ckprofd's socket: ask ckprofd's administrator for access";
}

// What `st` is, for "PATH is not a socket (it is a directory)".
std::string FileKind(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISREG(st.st_mode)) return "a regular file";
  if (S_ISFIFO(st.st_mode)) return "a named pipe";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  return "not a socket";
}

// Whether a socket listens at `path`, from the kernel's table of Unix sockets (which everyone
// may read, unlike a socket closed to them); nullopt when the table or the path cannot be
// read. A socket is matched by its bound path naming the same file as `path`.
std::optional<bool> SomeoneListens(const std::string& path) {
  struct stat target {};
  if (stat(path.c_str(), &target) != 0) return std::nullopt;
  std::ifstream table("/proc/net/unix");
  std::string line;
  if (!table || !std::getline(table, line)) return std::nullopt;  // the header
  while (std::getline(table, line)) {
    // Num RefCount Protocol Flags Type St Inode Path
    std::istringstream fields(line);
    std::string num, refs, protocol, flags, type, state, inode, bound;
    if (!(fields >> num >> refs >> protocol >> flags >> type >> state >> inode)) continue;
    std::getline(fields >> std::ws, bound);
    if (bound.empty() || bound[0] == '@') continue;  // unnamed, or the abstract namespace
    constexpr unsigned long kAcceptCon = 0x10000;    // __SO_ACCEPTCON: listening
    if (!(std::strtoul(flags.c_str(), nullptr, 16) & kAcceptCon)) continue;
    struct stat other {};
    if (stat(bound.c_str(), &other) == 0 && other.st_dev == target.st_dev &&
        other.st_ino == target.st_ino) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string ResolveSocketPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("CKPROF_SOCKET"); env && *env) return env;
  return kDefaultSocketPath;
}

Connection::~Connection() {
  if (fd_ >= 0) close(fd_);
}

Result<std::unique_ptr<Connection>> Connection::Open(const std::string& path, bool* went_away) {
  signal(SIGPIPE, SIG_IGN);
  if (went_away) *went_away = false;
  auto unreachable = [&](const std::string& why) {
    return MakeError("cannot reach ckprofd at " + path + " (" + why +
                     "): start it with 'ckprofd --socket " + path +
                     "' (or 'systemctl start ckprofd'), point --socket/CKPROF_SOCKET at a running "
                     "one, or use --local where the command offers it");
  };
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return unreachable("socket path too long");
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return unreachable(std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    close(fd);
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      return MakeError("cannot reach ckprofd: " + path + " is not a socket (it is " + FileKind(st) +
                       "): point --socket or CKPROF_SOCKET at ckprofd's socket (its --socket; "
                       "by default " +
                       kDefaultSocketPath + ")");
    }
    // A socket file with nobody listening is left from a ckprofd that stopped (the kernel
    // says so, ECONNREFUSED, only to those who may use the socket; its table to everyone).
    const bool dead = e == ECONNREFUSED || (e == EACCES && SomeoneListens(path) == false);
    if (dead) {
      std::string why = "cannot reach ckprofd: no ckprofd listening on " + path +
                        " (the socket is left from one that stopped): start it with 'ckprofd "
                        "--socket " +
                        path +
                        "' (or 'systemctl start ckprofd'), point --socket/CKPROF_SOCKET at a "
                        "running one, or use --local where the command offers it";
      if (e == EACCES) why += "; " + AccessAdvice(path, /*runs=*/false);
      return MakeError(why);
    }
    // Starting another ckprofd is no advice for a socket that is there but closed to us.
    if (e == EACCES) {
      return MakeError("ckprofd at " + path + ": " + std::strerror(e) + ": " + AccessAdvice(path));
    }
    return unreachable(std::strerror(e));
  }
  std::unique_ptr<Connection> c(new Connection(fd, path));
  HelloRequest hello;
  hello.protocol = kProtocolVersion;
  hello.client = std::string("ckprof ") + kVersion;
  nlohmann::json refused;
  auto answer = c->CallJson(hello, &refused);
  // A refusal ("serving too many clients") may come with a broken pipe: it is still one.
  if (!answer && c->lost() && !refused.is_object()) {
    // Connected, then closed before the hello's answer: the daemon went away at that moment
    // (the error already says "ckprofd at PATH closed the connection").
    if (went_away) *went_away = true;
    return Error{answer.error()};
  }
  if (!answer)
    return MakeError("ckprofd at " + path + " refused the connection: " + answer.error());
  c->hello_ = *answer;
  return c;
}

Status Connection::Send(const nlohmann::json& j) {
  std::string frame = Frame(j);
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t n = write(fd_, frame.data() + off, frame.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      lost_ = true;
      return MakeError("lost the connection to ckprofd at " + path_ + ": " + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<nlohmann::json> Connection::Receive() {
  // Where the search for the line's end goes on: what was searched already had none (a large
  // answer arrives in many reads; searching it all again after each was quadratic).
  size_t searched = 0;
  for (;;) {
    auto nl = buffer_.find('\n', searched);
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      auto j = ParseJson(line);
      if (!j) return MakeError("ckprofd sent a malformed answer: " + j.error());
      return std::move(*j);
    }
    searched = buffer_.size();
    if (deadline_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *deadline_ - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      const int ready =
          left.count() > 0 ? poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)))
                           : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        timed_out_ = true;
        return MakeError("no answer from ckprofd at " + path_ + " before the deadline");
      }
    }
    char buf[65536];
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      lost_ = true;
      return MakeError("ckprofd at " + path_ + " closed the connection" +
                       (n < 0 ? std::string(": ") + std::strerror(errno) : std::string()));
    }
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

Status Connection::CheckFeature(const Request& request) const {
  // An older daemon ignores the fields it does not know: refuse here what it would misread.
  const std::string need = RequiredFeature(request);
  if (need.empty() || hello_.is_null()) return Status::Ok();
  const auto features = hello_.value("features", nlohmann::json::array());
  if (std::find(features.begin(), features.end(), need) != features.end()) return Status::Ok();
  const std::string what = need == "repeat"         ? "repeats (--repeat, --runs)"
                           : need == "task_control" ? "task control (JOB#N, retry of tasks or "
                                                      "with new settings)"
                           : need == "on_end"       ? "submit --on-end"
                                                    : "'ckprof " + need + "'";
  return MakeError(std::string(RequestTypeName(request.type())) + ": " +
                   hello_.value("server", std::string("ckprofd")) + " at " + path_ +
                   " is older than this ckprof and does not know " + what +
                   ": restart it with this version, then try again");
}

Result<nlohmann::json> Connection::CallJson(Request request, nlohmann::json* refusal) {
  if (Status s = CheckFeature(request); !s) return Error{s.error()};
  request.id = next_id_++;
  Status sent = Send(RequestToJson(request));
  auto answer = Receive();
  if (!sent) {
    // A daemon that turns a connection away ("serving too many clients") answers and closes
    // without reading: a request written after that fails (EPIPE), but the answer is still
    // there to read and says more than "Broken pipe".
    if (!answer || !answer->is_object() || answer->value("ok", true)) return Error{sent.error()};
  }
  if (!answer) return answer;
  const auto& j = *answer;
  if (!j.is_object()) return MakeError("ckprofd sent an answer that is not an object");
  if (!j.value("ok", false)) {
    if (refusal) *refusal = j;
    return MakeError(j.value("error", std::string("ckprofd refused the request")));
  }
  return answer;
}

Status Connection::Stream(Request request,
                          const std::function<bool(const nlohmann::json&)>& on_frame) {
  if (Status s = CheckFeature(request); !s) return s;
  request.id = next_id_++;
  if (Status s = Send(RequestToJson(request)); !s) return s;
  bool first = true;
  for (;;) {
    auto frame = Receive();
    if (!frame) return Error{frame.error()};
    const auto& j = *frame;
    if (first) {
      first = false;
      if (!j.value("ok", false)) {
        return MakeError(j.value("error", std::string("ckprofd refused the request")));
      }
    }
    if (j.value("type", "") == "end") return Status::Ok();
    if (!on_frame(j)) return Status::Ok();
  }
}

Status Connection::Watch(int64_t job_id, const std::function<bool(const nlohmann::json&)>& on_frame,
                         bool end_only) {
  WatchRequest r;
  r.job_id = job_id;
  r.end_only = end_only;
  return Stream(std::move(r), on_frame);
}

Status Connection::Watch(int64_t job_id, const std::function<bool(const WatchReply&)>& on_start,
                         const std::function<bool(const JobEventFrame&)>& on_event, bool end_only) {
  bool first = true;
  std::string bad;
  Status s = Watch(
      job_id,
      [&](const nlohmann::json& frame) {
        if (first) {
          first = false;
          auto start = ReadReply<WatchReply>(frame);
          if (!start) bad = start.error();
          return start && on_start(*start);
        }
        auto event = ReadReply<JobEventFrame>(frame);
        if (!event) bad = event.error();
        return event && on_event(*event);
      },
      end_only);
  if (s && !bad.empty()) return MakeError("ckprofd sent a watch frame that cannot be read: " + bad);
  return s;
}

}  // namespace ckprof
