// Helpers shared by the tests: paths of test data and built binaries, temp dirs, running
// commands and capturing their output.
#pragma once

#include <string>
#include <vector>

namespace ckprof::testing {

// Path of a file under tests/data.
std::string DataPath(const std::string& name);
// Path of a built binary under build/bin.
std::string BinPath(const std::string& name);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& content);

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal; see term_signal.
  int term_signal = 0;
  std::string out;
  std::string err;
};

// Runs argv (no shell) with extra environment entries "K=V", in `cwd` when not empty, and
// feeds `input` to its stdin. Waits for it to exit.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env = {}, const std::string& cwd = "",
                         const std::string& input = "");

}  // namespace ckprof::testing

namespace ckprof::testing {

// A real ckprofd started for a test: on a socket in its own temp dir, with the emulator as
// profiler. Start() waits for its READY=1 (sd_notify on a private socket): no sleeps.
class DaemonProcess {
 public:
  struct Options {
    std::string gpus = "0-3";
    std::vector<std::string> extra_args;  // more ckprofd flags
    std::vector<std::string> env;         // "K=V" for the daemon (and so its profilers)
    std::string config_json;              // written to a file and passed with --config
  };
  explicit DaemonProcess(const std::string& dir) : dir_(dir) {}
  ~DaemonProcess();

  // Starts ckprofd; false (and `error`) when it exits or is not ready within 30 s.
  bool Start(const Options& options, std::string* error);
  // Sends a signal and, unless sig is 0, waits for the exit; returns the wait status.
  int Signal(int sig);
  int pid() const { return pid_; }
  std::string socket() const { return dir_ + "/ckprofd.sock"; }
  std::string state_dir() const { return dir_ + "/state"; }
  std::string log_path() const { return dir_ + "/ckprofd.log"; }

 private:
  std::string dir_;
  int pid_ = -1;
};

// Processes whose environment holds `needle` ("CKPROFD_STATE=/dir").
std::vector<int> ProcessesWithEnv(const std::string& needle);

}  // namespace ckprof::testing
