#include "tests/util/commands.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "tests/util/files.h"

extern char** environ;

namespace ckprof::testing {

std::vector<std::string> WithEnvironment(std::vector<std::string> base,
                                         const std::vector<std::string>& entries) {
  for (const auto& kv : entries) {
    const std::string key = kv.substr(0, kv.find('=')) + "=";
    std::erase_if(base, [&](const std::string& e) { return e.rfind(key, 0) == 0; });
    base.push_back(kv);
  }
  return base;
}

namespace {

// This process's environment with the "K=V" entries of `env` in place.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& env) {
  std::vector<std::string> inherited;
  for (char** e = environ; *e; ++e) inherited.emplace_back(*e);
  return WithEnvironment(std::move(inherited), env);
}

// Pointers to `strings` for exec, null-terminated; valid while `strings` is unchanged.
std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         const std::string& cwd, const std::string& input) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC)) {
    throw std::runtime_error("pipe failed");
  }
  std::vector<std::string> env_strings = ChildEnvironment(env), argv_copy = argv;
  std::vector<char*> envp = CStrings(env_strings), args = CStrings(argv_copy);

  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  signal(SIGPIPE, SIG_IGN);
  size_t written = 0;
  if (input.empty()) {
    close(in_pipe[1]);
    in_pipe[1] = -1;
  }
  CommandResult r;
  int open_fds = 2;
  while (open_fds > 0 || in_pipe[1] >= 0) {
    pollfd fds[3];
    int n = 0;
    if (out_pipe[0] >= 0) fds[n++] = {out_pipe[0], POLLIN, 0};
    if (err_pipe[0] >= 0) fds[n++] = {err_pipe[0], POLLIN, 0};
    if (in_pipe[1] >= 0) fds[n++] = {in_pipe[1], POLLOUT, 0};
    if (poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == in_pipe[1]) {
        ssize_t w = write(in_pipe[1], input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 || written >= input.size()) {
          close(in_pipe[1]);
          in_pipe[1] = -1;
        }
        continue;
      }
      char buf[65536];
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        (fds[i].fd == out_pipe[0] ? r.out : r.err).append(buf, static_cast<size_t>(got));
      } else {
        close(fds[i].fd);
        if (fds[i].fd == out_pipe[0])
          out_pipe[0] = -1;
        else
          err_pipe[0] = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.term_signal = WTERMSIG(status);
  }
  return r;
}

BackgroundCommand::BackgroundCommand(const std::vector<std::string>& argv,
                                     const std::vector<std::string>& env, const std::string& cwd) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC)) {
    throw std::runtime_error("pipe failed");
  }
  std::vector<std::string> env_strings = ChildEnvironment(env), argv_copy = argv;
  std::vector<char*> envp = CStrings(env_strings), args = CStrings(argv_copy);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  out_ = out_pipe[0];
  err_ = err_pipe[0];
}

BackgroundCommand::~BackgroundCommand() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_ >= 0) close(out_);
  if (err_ >= 0) close(err_);
}

bool BackgroundCommand::ReadSome(int timeout_ms) {
  pollfd fds[2];
  int n = 0;
  if (out_ >= 0) fds[n++] = {out_, POLLIN, 0};
  if (err_ >= 0) fds[n++] = {err_, POLLIN, 0};
  if (n == 0) return false;
  int ready = poll(fds, n, timeout_ms);
  if (ready < 0 && errno != EINTR) return false;
  for (int i = 0; i < n && ready > 0; ++i) {
    if (!fds[i].revents) continue;
    char buf[65536];
    ssize_t got = read(fds[i].fd, buf, sizeof buf);
    const bool is_out = fds[i].fd == out_;
    if (got > 0) {
      (is_out ? result_.out : result_.err).append(buf, static_cast<size_t>(got));
    } else {
      close(fds[i].fd);
      (is_out ? out_ : err_) = -1;
    }
  }
  return out_ >= 0 || err_ >= 0;
}

bool BackgroundCommand::WaitForOutput(const std::string& needle, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  for (;;) {
    if (result_.out.find(needle) != std::string::npos ||
        result_.err.find(needle) != std::string::npos) {
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0 || !ReadSome(static_cast<int>(left))) return false;
  }
}

void BackgroundCommand::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

CommandResult BackgroundCommand::Finish(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      kill(pid_, SIGKILL);
      break;
    }
    if (!ReadSome(static_cast<int>(left))) break;
  }
  int status = 0;
  if (pid_ > 0) waitpid(pid_, &status, 0);
  pid_ = -1;
  if (WIFEXITED(status)) {
    result_.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result_.term_signal = WTERMSIG(status);
  }
  return result_;
}

Spawned::Spawned(const std::vector<std::string>& argv, const std::string& cwd,
                 const std::string& err_path)
    : err_path_(err_path) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(out[1], 1);
    dup2(err, 2);
    if (chdir(cwd.c_str()) != 0) _exit(127);
    std::vector<char*> args;
    std::vector<std::string> copy = argv;
    for (auto& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  fd_ = out[0];
}

Spawned::~Spawned() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0) close(fd_);
}

namespace {

std::chrono::steady_clock::time_point Deadline(double seconds) {
  using Clock = std::chrono::steady_clock;
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

bool Spawned::WaitForLine(const std::string& needle, double timeout_s) {
  const auto deadline = Deadline(timeout_s);
  for (;;) {
    for (size_t start = 0, nl; (nl = out_.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (out_.substr(start, nl - start).find(needle) != std::string::npos) return true;
    }
    if (!ReadSome(deadline)) return false;
  }
}

bool Spawned::Running() const {
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == 0;
}

int Spawned::Wait(double timeout_s) {
  const auto deadline = Deadline(timeout_s);
  while (ReadSome(deadline)) {
  }
  if (fd_ >= 0) return -1;  // still writing at the deadline: the destructor kills it
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Spawned::err() const { return ReadFile(err_path_); }

bool Spawned::ReadSome(Clock::time_point deadline) {
  while (fd_ >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p = {fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n > 0) {
      out_.append(buf, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    close(fd_);
    fd_ = -1;
  }
  return false;
}

}  // namespace ckprof::testing
