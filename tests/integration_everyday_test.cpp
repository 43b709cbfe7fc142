// The everyday path as a lab member walks it (issue 31), each step run as they would run it:
// the real client against a real ckprofd, real users where ownership matters, a real terminal
// (util-linux `script`, a pty of 80 columns) where the terminal matters. Ctrl-C, SIGTERM and
// SIGHUP on `run --local` keep what finished; `watch` fits the terminal; a job whose tasks hold
// all its GPUs says so; `clean` takes job ids, --dry-run and asks on a terminal; `status` shows
// how the job's --on-end ended. Every wait is on an event: a line of output, a job's state.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/json_util.h"
#include "common/text_table.h"
#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/multi_user.h"
#include "tests/util/processes.h"
#include "tests/util/requests.h"
#include "tests/util/users.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::BackgroundCommand;
using testing::BinPath;
using testing::CommandResult;
using testing::SystemUser;
using testing::TempDir;

// `word` quoted for sh.
std::string ShellQuote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs argv on a terminal of `cols` columns (util-linux script: a pty), `input` typed into it.
// What the terminal showed is the result's out; the exit code is argv's.
CommandResult RunOnTerminal(const std::vector<std::string>& prefix,
                            const std::vector<std::string>& argv, int cols,
                            const std::string& input = "", const std::string& cwd = "",
                            const std::vector<std::string>& env = {}) {
  std::string line = "stty cols " + std::to_string(cols) + " rows 50; exec";
  for (const auto& a : argv) line += " " + ShellQuote(a);
  std::vector<std::string> cmd = prefix;
  cmd.insert(cmd.end(), {"script", "-qfec", line, "/dev/null"});
  return testing::RunCommand(cmd, env, cwd, input);
}

// What a terminal shows, as the pieces between line breaks and carriage returns with the
// escape sequences (cursor moves, clears) taken out: a piece wider than the terminal wrapped.
std::vector<std::string> ScreenPieces(const std::string& out) {
  std::vector<std::string> pieces(1);
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (c == '\033' && i + 1 < out.size() && out[i + 1] == '[') {
      i += 2;
      while (i < out.size() && !(out[i] >= 0x40 && out[i] <= 0x7e)) ++i;
      continue;
    }
    if (c == '\n' || c == '\r') {
      pieces.emplace_back();
      continue;
    }
    pieces.back() += c;
  }
  return pieces;
}

size_t WidestPiece(const std::string& out, std::string* widest) {
  size_t most = 0;
  for (const auto& p : ScreenPieces(out)) {
    if (DisplayWidth(p) > most) {
      most = DisplayWidth(p);
      *widest = p;
    }
  }
  return most;
}

// ---------------------------------------------------------------------------------------------
// run --local stopped by a signal keeps what finished (31.2).

class EverydayRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);
    mkdir(Tmp().c_str(), 0700);
  }
  void TearDown() override { testing::KillMarkedProcesses("CKPROFD_STATE=" + Tmp()); }
  std::string Tmp() const { return dir_.File("tmp"); }

  TempDir dir_;
};

TEST_F(EverydayRunTest, SignalOnRunLocalSavesWhatFinished) {
  // One GPU: configs 1-3 succeed, 4 hangs (the emulator's batch size 9001), 5 waits for it.
  testing::WriteFile(dir_.File("sweep.json"), testing::FwdConfigsText(5, 9001, 4));
  struct Case {
    int sig, exit_code;
  } cases[] = {{SIGINT, 130}, {SIGTERM, 143}, {SIGHUP, 129}};
  for (const auto& c : cases) {
    SCOPED_TRACE(strsignal(c.sig));
    const std::string output = dir_.File("res-" + std::to_string(c.sig) + ".json");
    BackgroundCommand run(
        {BinPath("ckprof"), "run", "sweep.json", "--local", "--gpus", "0", "--profiler-path",
         BinPath("ckprofiler-emu"), "--output", output, "--lock-dir", dir_.File("locks")},
        {"TMPDIR=" + Tmp(), "CKEMU_TIME_SCALE=0"}, dir_.path());
    // The third config's line, as the user sees it.
    ASSERT_TRUE(run.WaitForOutput("[3/5] ✓")) << "no third result";
    run.Signal(c.sig);
    CommandResult r = run.Finish(60);
    std::cout << "run --local after " << strsignal(c.sig) << ": exit " << r.exit_code
              << ", stderr:\n"
              << r.err;
    EXPECT_EQ(r.exit_code, c.exit_code) << r.out << r.err;
    EXPECT_NE(r.err.find("3 results saved to " + output + " (partial: 2 cancelled)"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("stopped the private ckprofd and its profilers"), std::string::npos)
        << r.err;
    ASSERT_TRUE(std::filesystem::exists(output)) << r.err;
    auto file = ParseJson(testing::ReadFile(output));
    ASSERT_TRUE(file.ok()) << file.error();
    const json& stats = (*file)["stats"];
    EXPECT_EQ(stats["partial"], true) << stats;
    EXPECT_EQ(stats["total"], 5) << stats;
    EXPECT_EQ(stats["success"], 3) << stats;
    EXPECT_EQ(stats["failed"], 0) << stats;
    EXPECT_EQ(stats["skipped"], 2) << stats;
    ASSERT_EQ((*file)["results"].size(), 5u);
    for (int i = 0; i < 3; ++i) EXPECT_EQ((*file)["results"][i]["success"], true) << i;
    EXPECT_EQ((*file)["results"][3]["status"], "cancelled");
    EXPECT_TRUE(std::filesystem::is_empty(Tmp())) << "the private state dir is removed after";
  }
}

// Through the system daemon the same: the job is cancelled, what ended is saved.
TEST_F(EverydayRunTest, CtrlCOnRunThroughTheDaemonSavesWhatFinished) {
  testing::WriteFile(dir_.File("sweep.json"), testing::FwdConfigsText(5, 9001, 4));
  testing::LaunchedDaemon d;
  testing::LaunchedDaemon::Options o;
  o.dir = dir_.path();
  o.gpus = "0";
  o.args = {"--profiler-path", BinPath("ckprofiler-emu")};
  o.env = {"CKEMU_TIME_SCALE=0"};
  std::string error;
  ASSERT_TRUE(d.Start(o, &error)) << error;
  const std::string output = dir_.File("res.json");
  BackgroundCommand run(
      {BinPath("ckprof"), "--socket", d.socket(), "run", "sweep.json", "--output", output}, {},
      dir_.path());
  ASSERT_TRUE(run.WaitForOutput("[3/5] ✓")) << "no third result";
  run.Signal(SIGINT);
  CommandResult r = run.Finish(60);
  EXPECT_EQ(r.exit_code, 130) << r.out << r.err;
  EXPECT_NE(r.err.find("interrupted: cancelled job 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("3 results saved to " + output + " (partial: 2 cancelled)"),
            std::string::npos)
      << r.err;
  auto file = ParseJson(testing::ReadFile(output));
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ((*file)["stats"]["partial"], true);
  EXPECT_EQ((*file)["stats"]["success"], 3);
  EXPECT_EQ((*file)["stats"]["skipped"], 2);
  auto end = testing::WaitJobEnd(d.socket(), 1);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->state, JobState::kCancelled);
  EXPECT_EQ(d.StopGracefully(30), "");
}

// ---------------------------------------------------------------------------------------------
// The daemon-side steps: watch on a terminal (31.4), the waiting reason (31.6), clean (31.12),
// on-end (31.13).

class EverydayTest : public testing::EmulatorDaemonTest {
 protected:
  // Runs ckprof as `user` (nullptr: as root) against the daemon.
  CommandResult Ckprof(const SystemUser* user, const std::vector<std::string>& args,
                       const std::string& input = "") {
    std::vector<std::string> argv = user ? user->As() : std::vector<std::string>{};
    argv.insert(argv.end(), {testing::SharedBinPath("ckprof"), "--socket", daemon_.socket()});
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunCommand(argv, {}, dir_.path(), input);
  }
  std::vector<std::string> CkprofArgv(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {testing::SharedBinPath("ckprof"), "--socket",
                                     daemon_.socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  // Submits a configs text as `user`; the job id, or 0.
  int64_t SubmitAs(const SystemUser* user, const std::string& text,
                   std::vector<std::string> extra = {}) {
    const std::string file = dir_.File("configs-" + std::to_string(++files_) + ".json");
    testing::WriteFile(file, text);
    chmod(file.c_str(), 0644);
    std::vector<std::string> args = {"submit", file};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = Ckprof(user, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? std::stoll(r.out) : 0;
  }
  bool Exists(int64_t job) {
    return Ckprof(nullptr, {"status", std::to_string(job)}).exit_code == 0;
  }

  int files_ = 0;
};

TEST_F(EverydayTest, WatchFitsAnEightyColumnTerminal) {
  for (const char* gpus : {"0-3", "0-7"}) {
    SCOPED_TRACE(std::string("GPUs ") + gpus);
    const int n = gpus[2] == '3' ? 4 : 8;
    auto o = EmulatorOptions(gpus);
    o.env.push_back("CKEMU_TIME_SCALE=400");  // tasks of a few hundred milliseconds
    Start(o);
    const int64_t job = SubmitAs(nullptr, testing::FwdConfigsText(6 * n));
    ASSERT_GT(job, 0);
    CommandResult w =
        RunOnTerminal({}, CkprofArgv({"watch", std::to_string(job)}), 80, "", dir_.path());
    EXPECT_EQ(w.exit_code, 0) << w.out << w.err;
    std::string widest;
    EXPECT_LE(WidestPiece(w.out, &widest), 79u) << "a line wrapped: [" << widest << "]";
    // Each GPU's task was drawn, on a line of its own (they do not fit beside the bar).
    bool own_line = false;
    for (const auto& p : ScreenPieces(w.out)) {
      own_line = own_line || p.rfind("  GPU" + std::to_string(n - 1) + " #", 0) == 0;
    }
    EXPECT_TRUE(own_line) << w.out;
    EXPECT_EQ(w.out.find("0.00/s"), std::string::npos) << w.out;
    EXPECT_NE(w.out.find("job " + std::to_string(job) + " finished: " + std::to_string(6 * n) +
                         " succeeded"),
              std::string::npos)
        << w.out;
    std::cout << "watch on 80 columns, " << n << " GPUs: widest line "
              << WidestPiece(w.out, &widest) << " columns, " << w.out.size() << " bytes drawn\n";
    EXPECT_EQ(daemon_.StopGracefully(30), "");
  }
}

TEST_F(EverydayTest, AJobWhoseTasksHoldAllItsGpusSaysSo) {
  Start();  // GPUs 0-3
  const int64_t job = SubmitAs(nullptr, testing::FwdConfigsText(8, /*hang*/ 9001));
  ASSERT_GT(job, 0);
  ASSERT_TRUE(testing::WatchUntil(daemon_.socket(), job, [](const JobSummary& s) {
                return s.counts.running() == 4;
              }).ok());
  CommandResult s = Ckprof(nullptr, {"status", std::to_string(job)});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("reason: GPUs 0,1,2,3 busy with its own tasks"), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("no GPU it may use"), std::string::npos) << s.out;
  EXPECT_EQ(Ckprof(nullptr, {"cancel", std::to_string(job)}).exit_code, 0);
}

// Issue 31.15's small ones: the log of a queued task, list with nothing active, a user that
// does not exist.
TEST_F(EverydayTest, SmallAnswersSayWhatIsMeant) {
  Start(EmulatorOptions("0"));
  const int64_t hang = SubmitAs(nullptr, testing::FwdConfigsText(2, /*hang*/ 9001));
  ASSERT_GT(hang, 0);
  ASSERT_TRUE(testing::WatchUntil(daemon_.socket(), hang, [](const JobSummary& s) {
                return s.counts.running() == 1;
              }).ok());
  CommandResult queued = Ckprof(nullptr, {"log", std::to_string(hang) + "#2"});
  EXPECT_NE(queued.err.find("has not started yet (queued)"), std::string::npos) << queued.err;
  EXPECT_EQ(queued.err.find("wrote nothing"), std::string::npos) << queued.err;
  EXPECT_EQ(Ckprof(nullptr, {"cancel", std::to_string(hang)}).exit_code, 0);
  ASSERT_TRUE(testing::WaitJobEnd(daemon_.socket(), hang).ok());

  CommandResult mine = Ckprof(nullptr, {"list", "--mine"});
  EXPECT_EQ(mine.exit_code, 0) << mine.err;
  EXPECT_NE(mine.out.find("(no jobs)\n(jobs that ended are listed with --all"), std::string::npos)
      << mine.out;
  CommandResult nobody = Ckprof(nullptr, {"list", "--user", "ckprof-no-such-user"});
  EXPECT_EQ(nobody.exit_code, 1);
  EXPECT_NE(nobody.err.find("--user ckprof-no-such-user: no such user"), std::string::npos)
      << nobody.err;
}

TEST_F(EverydayTest, CleanTakesJobsDryRunAndAsksOnATerminal) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create users";
  SystemUser alice(testing::UniqueName("cke", "a")), bob(testing::UniqueName("cke", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0-3", R"({"socket_mode": "0666"})"));
  std::vector<int64_t> mine;
  for (int i = 0; i < 3; ++i) mine.push_back(SubmitAs(&alice, testing::FwdConfigsText(2 + i)));
  const int64_t bobs = SubmitAs(&bob, testing::FwdConfigsText(1));
  const int64_t waiting = SubmitAs(&alice, testing::FwdConfigsText(1), {"--not-before", "+2h"});
  for (int64_t j : mine) ASSERT_TRUE(testing::WaitJobEnd(daemon_.socket(), j).ok());
  ASSERT_TRUE(testing::WaitJobEnd(daemon_.socket(), bobs).ok());
  const std::string j1 = std::to_string(mine[0]), j2 = std::to_string(mine[1]),
                    j3 = std::to_string(mine[2]);

  // A job not ended, or another user's, is refused by name, and nothing goes.
  CommandResult not_ended = Ckprof(&alice, {"clean", j1, std::to_string(waiting)});
  EXPECT_EQ(not_ended.exit_code, 1);
  EXPECT_NE(not_ended.err.find("job " + std::to_string(waiting) + " has not ended"),
            std::string::npos)
      << not_ended.err;
  CommandResult foreign = Ckprof(&alice, {"clean", std::to_string(bobs)});
  EXPECT_EQ(foreign.exit_code, 1);
  EXPECT_NE(foreign.err.find("belongs to " + bob.name()), std::string::npos) << foreign.err;
  EXPECT_TRUE(Exists(mine[0]));
  EXPECT_TRUE(Exists(bobs));

  // --dry-run lists what would go (alice's three ended jobs: 2 + 3 + 4 results).
  CommandResult dry = Ckprof(&alice, {"clean", "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("would remove 3 ended jobs (9 results)"), std::string::npos) << dry.out;
  for (int f : {1, 2, 3}) {  // the jobs' names: their files
    EXPECT_NE(dry.out.find("configs-" + std::to_string(f) + ".json"), std::string::npos) << f;
  }
  EXPECT_EQ(dry.out.find("configs-4.json"), std::string::npos) << "bob's";
  EXPECT_EQ(dry.out.find("configs-5.json"), std::string::npos) << "not ended";
  EXPECT_TRUE(Exists(mine[0]));

  // clean JOB: that one only.
  CommandResult one = Ckprof(&alice, {"clean", j1});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, "removed 1 ended job (2 results): " + j1 + "\n");
  EXPECT_FALSE(Exists(mine[0]));
  EXPECT_TRUE(Exists(mine[1]));

  // On a terminal clean asks: "n" keeps everything, "y" removes what it listed.
  CommandResult no = RunOnTerminal(alice.As(), CkprofArgv({"clean"}), 80, "n\n", dir_.path());
  EXPECT_EQ(no.exit_code, 1) << no.out;
  EXPECT_NE(no.out.find("remove 2 ended jobs (7 results)? [y/N]"), std::string::npos) << no.out;
  EXPECT_NE(no.out.find("nothing removed"), std::string::npos) << no.out;
  EXPECT_TRUE(Exists(mine[1]));
  EXPECT_TRUE(Exists(mine[2]));
  CommandResult yes = RunOnTerminal(alice.As(), CkprofArgv({"clean"}), 80, "y\n", dir_.path());
  EXPECT_EQ(yes.exit_code, 0) << yes.out;
  EXPECT_NE(yes.out.find("removed 2 ended jobs (7 results): " + j2 + " " + j3), std::string::npos)
      << yes.out;
  EXPECT_FALSE(Exists(mine[1]));
  EXPECT_FALSE(Exists(mine[2]));
  EXPECT_TRUE(Exists(waiting));
  EXPECT_TRUE(Exists(bobs));

  // An admin (root) may name anyone's ended job.
  CommandResult admin = Ckprof(nullptr, {"clean", std::to_string(bobs)});
  EXPECT_EQ(admin.exit_code, 0) << admin.err;
  EXPECT_FALSE(Exists(bobs));
}

TEST_F(EverydayTest, StatusShowsHowTheOnEndCommandEnded) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create users";
  SystemUser alice(testing::UniqueName("cke", "o"));
  ASSERT_TRUE(alice.ok());
  const auto options = EmulatorOptions("0-3", R"({"socket_mode": "0666"})");
  Start(options);
  const int64_t failing =
      SubmitAs(&alice, testing::FwdConfigsText(1),
               {"--on-end", "echo 'notify-send: Permission denied' >&2; echo more >&2; exit 3"});
  const int64_t fine = SubmitAs(&alice, testing::FwdConfigsText(1), {"--on-end", "true"});
  const int64_t escaping = SubmitAs(&alice, testing::FwdConfigsText(1),
                                    {"--on-end", "printf 'a\\033[2Jb\\n' >&2; exit 1"});
  ASSERT_GT(failing, 0);
  ASSERT_GT(fine, 0);
  ASSERT_GT(escaping, 0);
  // The on-end command runs after the job's end: its end is the event waited for.
  auto on_end_of = [&](int64_t job) {
    json j;
    for (int i = 0; i < 3000; ++i) {
      CommandResult s = Ckprof(&alice, {"status", std::to_string(job), "--json"});
      auto parsed = ParseJson(s.out);
      if (parsed.ok()) {
        j = (*parsed)["jobs"][0];
        if (j.contains("on_end")) return j["on_end"];
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return json();
  };
  const json failed = on_end_of(failing);
  ASSERT_TRUE(failed.is_object()) << "no on_end in status";
  EXPECT_EQ(failed["exit_code"], 3) << failed;
  EXPECT_EQ(failed["outcome"], "exited 3") << failed;
  EXPECT_EQ(failed["stderr"], "notify-send: Permission denied") << failed;
  CommandResult s = Ckprof(&alice, {"status", std::to_string(failing)});
  EXPECT_NE(s.out.find("on-end: exited 3: notify-send: Permission denied\n"), std::string::npos)
      << s.out;
  EXPECT_EQ(on_end_of(fine)["outcome"], "exited 0");
  // What it wrote cannot act on the owner's terminal.
  EXPECT_EQ(on_end_of(escaping)["stderr"], "a\\x1b[2Jb");
  // Kept with the job: a restarted daemon still says it.
  EXPECT_EQ(daemon_.StopGracefully(30), "");
  Start(options);
  CommandResult again = Ckprof(&alice, {"status", std::to_string(failing)});
  EXPECT_NE(again.out.find("on-end: exited 3: notify-send: Permission denied\n"), std::string::npos)
      << again.out;
}

}  // namespace
}  // namespace ckprof
