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
