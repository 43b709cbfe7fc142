// MultiUserDaemonTest: the fixture of the integration tests that run ckprof as several real
// Linux users against one root ckprofd (who may do what, and what one user's attack does to
// another's service). Test threads only; root only (a test is skipped otherwise).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/users.h"
#include "tests/util/victim_probe.h"

namespace ckprof::testing {

// A short name for a throwaway user or group, unique per test program: `prefix` + `role` +
// the pid (tests of several programs create users at the same time; names stay under 32).
std::string UniqueName(const std::string& prefix, const std::string& role);

// Prints the victim's figures for `what` (test output and a recorded property), then checks
// that it was served all along: answered each time, at least once, and never stalled (a
// request of 5 s or more; a bound on a stall, not on speed).
void ExpectVictimServed(const VictimFigures& f, const std::string& what);

class MultiUserDaemonTest : public EmulatorDaemonTest {
 protected:
  // Skips the test unless it runs as root (users are created with useradd).
  void SetUp() override;

  // Where and how Ckprof runs (each empty: the default).
  struct Where {
    std::string cwd;     // default: dir_
    std::string socket;  // default: daemon_'s
    static Where Dir(const std::string& cwd) { return {cwd, ""}; }
    static Where Socket(const std::string& socket) { return {"", socket}; }
  };

  // ckprof as `user` (nullptr: as root, an admin) against the daemon, with ckprof_env_ in its
  // environment.
  CommandResult Ckprof(const SystemUser* user, const std::vector<std::string>& args,
                       const Where& where = {});
  // That command line, to run by other means (a terminal, the background).
  std::vector<std::string> CkprofArgv(const SystemUser* user, const std::vector<std::string>& args,
                                      const std::string& socket = "") const;

  // A file in dir_ with `text` that every user may read, named `name` (default: a new
  // "configs-N.json"); its path.
  std::string ReadableFile(const std::string& text, const std::string& name = "");

  // Submits a configs text as `user` (with `extra` options, from `cwd`); the job id. A refusal
  // returns 0 with ckprof's stderr in *error; with no `error` to take it, it fails the test.
  int64_t SubmitAs(const SystemUser* user, const std::string& text,
                   const std::vector<std::string>& extra = {}, std::string* error = nullptr,
                   const std::string& cwd = "");

  std::vector<std::string> ckprof_env_;  // e.g. {"COLUMNS=200"}

 private:
  int files_ = 0;
};

}  // namespace ckprof::testing
