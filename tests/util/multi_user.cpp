#include "tests/util/multi_user.h"

#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include "tests/util/files.h"

namespace ckprof::testing {

std::string UniqueName(const std::string& prefix, const std::string& role) {
  return prefix + role + std::to_string(getpid() % 1000000);
}

void ExpectVictimServed(const VictimFigures& f, const std::string& what) {
  std::cout << "[ info ] victim status during " << what << ": " << f.requests
            << " requests, p50/p99/max ms: " << f.p50_ms << "/" << f.p99_ms << "/" << f.max_ms
            << ", errors " << f.errors << "\n";
  ::testing::Test::RecordProperty("victim_p99_ms_" + what, std::to_string(f.p99_ms));
  ::testing::Test::RecordProperty("victim_max_ms_" + what, std::to_string(f.max_ms));
  EXPECT_EQ(f.errors, 0) << f.first_error << "\n" << f.text;
  EXPECT_GT(f.requests, 0) << f.text;
  EXPECT_LT(f.max_ms, 5000) << "the victim's status stalled during " << what << ": " << f.text;
}

void MultiUserDaemonTest::SetUp() {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create users and groups";
  EmulatorDaemonTest::SetUp();
}

std::vector<std::string> MultiUserDaemonTest::CkprofArgv(const SystemUser* user,
                                                         const std::vector<std::string>& args,
                                                         const std::string& socket) const {
  std::vector<std::string> argv = user ? user->As() : std::vector<std::string>{};
  argv.insert(argv.end(),
              {SharedBinPath("ckprof"), "--socket", socket.empty() ? daemon_.socket() : socket});
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

CommandResult MultiUserDaemonTest::Ckprof(const SystemUser* user,
                                          const std::vector<std::string>& args,
                                          const Where& where) {
  return RunCommand(CkprofArgv(user, args, where.socket), ckprof_env_,
                    where.cwd.empty() ? dir_.path() : where.cwd);
}

std::string MultiUserDaemonTest::ReadableFile(const std::string& text, const std::string& name) {
  const std::string file =
      dir_.File(name.empty() ? "configs-" + std::to_string(++files_) + ".json" : name);
  WriteFile(file, text);
  chmod(file.c_str(), 0644);
  return file;
}

int64_t MultiUserDaemonTest::SubmitAs(const SystemUser* user, const std::string& text,
                                      const std::vector<std::string>& extra, std::string* error,
                                      const std::string& cwd) {
  std::vector<std::string> args = {"submit", ReadableFile(text)};
  args.insert(args.end(), extra.begin(), extra.end());
  CommandResult r = Ckprof(user, args, Where::Dir(cwd));
  if (error) {
    *error = r.err;
  } else {
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  return r.exit_code == 0 ? std::stoll(r.out) : 0;
}

}  // namespace ckprof::testing
