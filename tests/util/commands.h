// Commands for the tests, run without a shell: to their end with their output captured
// (RunCommand), or in the background while the test acts and waits on what they print
// (BackgroundCommand, Spawned). Test threads only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace ckprof::testing {

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal; see term_signal.
  int term_signal = 0;
  std::string out;
  std::string err;
};

// `base` ("K=V" entries) with each "K=V" of `entries` in place of base's entry for K, or added
// at the end: a later entry for the same K wins.
std::vector<std::string> WithEnvironment(std::vector<std::string> base,
                                         const std::vector<std::string>& entries);

// Runs argv (no shell) with extra environment entries "K=V", in `cwd` when not empty, and
// feeds `input` to its stdin. Waits for it to exit.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env = {}, const std::string& cwd = "",
                         const std::string& input = "");

// A command running in the background (no shell), its stdout and stderr read as they come:
// for tests that act while it runs (send Ctrl-C, kill it) and wait on what it prints.
class BackgroundCommand {
 public:
  // Starts argv with extra environment entries "K=V" in `cwd` (when not empty), stdin from
  // /dev/null. Throws when it cannot.
  BackgroundCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                    const std::string& cwd = "");
  ~BackgroundCommand();  // SIGKILLs it when still running
  BackgroundCommand(const BackgroundCommand&) = delete;
  BackgroundCommand& operator=(const BackgroundCommand&) = delete;

  pid_t pid() const { return pid_; }
  // Reads its output until stdout or stderr holds `needle` (true), it closes both or timeout_s
  // passes (false).
  bool WaitForOutput(const std::string& needle, double timeout_s = 30);
  void Signal(int sig);
  // Reads to the end and reaps it; a command still running after timeout_s is SIGKILLed.
  CommandResult Finish(double timeout_s = 30);

 private:
  bool ReadSome(int timeout_ms);  // false once both streams are closed
  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;
  CommandResult result_;
};

// A command left running while the test reads its stdout (a pipe) line by line as it is
// written; stderr goes to a file. argv[0] is a path (not looked up in PATH); the environment is
// this process's. Killed on destruction if still running.
class Spawned {
 public:
  Spawned(const std::vector<std::string>& argv, const std::string& cwd,
          const std::string& err_path);
  ~Spawned();
  Spawned(const Spawned&) = delete;
  Spawned& operator=(const Spawned&) = delete;

  pid_t pid() const { return pid_; }
  // Reads stdout until a line holding `needle` has arrived; false at its end or after
  // timeout_s (a deadline for a broken build, not a pause: the line is waited on).
  bool WaitForLine(const std::string& needle, double timeout_s = 60);
  // True while the process has not exited (it is not reaped here).
  bool Running() const;
  // Reads the rest of stdout and waits for the exit; the exit code (-1 when killed, or not
  // ended within timeout_s).
  int Wait(double timeout_s = 60);
  const std::string& out() const { return out_; }
  // What it has written to stderr so far.
  std::string err() const;

 private:
  using Clock = std::chrono::steady_clock;
  // Waits for more of stdout; false at its end or at the deadline.
  bool ReadSome(Clock::time_point deadline);

  std::string err_path_;
  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  std::string out_;
};

}  // namespace ckprof::testing
