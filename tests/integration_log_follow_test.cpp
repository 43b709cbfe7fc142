// `ckprof log J -f` (issue 33.8): a whole job followed as `tail -f` follows several files, with
// the real client as real users against a real ckprofd. The profilers are small shell scripts
// that write a line and half of the next, then wait on a FIFO of their GPU: the test decides
// when each task goes on, and every wait is on an event (a line the follower printed, a job's
// end), never on time.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "common/json_util.h"
#include "tests/util/commands.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/multi_user.h"
#include "tests/util/users.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::BackgroundCommand;
using testing::CommandResult;
using testing::SystemGroup;
using testing::SystemUser;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The end of CK's output that makes a run a success: its best instance.
constexpr const char* kSummary =
    "Best configuration parameters:\\nname: emu\\navg_time: 0.01\\ntflops: 1\\nGB/s: 1\\n";

// Waits until `c` has printed `needle`; else the failure shows what it printed.
::testing::AssertionResult Printed(BackgroundCommand& c, const std::string& needle) {
  if (c.WaitForOutput(needle)) return ::testing::AssertionSuccess();
  CommandResult r = c.Finish(5);
  return ::testing::AssertionFailure() << "no '" << needle << "' (exit " << r.exit_code << ") in:\n"
                                       << r.out << r.err;
}

class LogFollowTest : public testing::MultiUserDaemonTest {
 protected:
  void SetUp() override {
    MultiUserDaemonTest::SetUp();
    if (IsSkipped()) return;
    lab_ = std::make_unique<SystemGroup>(testing::UniqueName("ckl", "g"));
    ASSERT_TRUE(lab_->ok());
    alice_ = std::make_unique<SystemUser>(testing::UniqueName("ckl", "a"),
                                          std::vector<std::string>{lab_->name()});
    ASSERT_TRUE(alice_->ok());
  }

  // The daemon on GPUs 0-1, its socket open to the lab group only (as ckprofd.socket makes it).
  void StartLab(const std::vector<std::string>& env = {}) {
    auto o = EmulatorOptions(
        "0-1", R"({"socket_mode": "0660", "socket_group": ")" + lab_->name() + R"("})");
    for (const auto& e : env) o.env.push_back(e);
    Start(o);
  }

  // A profiler that writes "first G\npartial-G" in one write (G: its GPU), waits for a line on
  // the FIFO go.G, then writes " rest\nsecond G\n", runs `then`, and succeeds (kSummary: CK's
  // best instance).
  std::string GatedProfiler(const std::string& then = "") {
    for (const char* gpu : {"0", "1"}) {
      const std::string fifo = dir_.File(std::string("go.") + gpu);
      EXPECT_EQ(mkfifo(fifo.c_str(), 0666), 0) << fifo;
      chmod(fifo.c_str(), 0666);
    }
    const std::string profiler = dir_.File("ckProfiler");
    testing::WriteFile(profiler,
                       "#!/bin/sh\ng=$HIP_VISIBLE_DEVICES\n"
                       "printf 'first %s\\npartial-%s' \"$g\" \"$g\"\n"
                       "read x < '" +
                           dir_.File("go.") + "'\"$g\"\nprintf ' rest\\nsecond %s\\n' \"$g\"\n" +
                           then + "printf '" + kSummary + "'\nexit 0\n");
    chmod(profiler.c_str(), 0755);
    return profiler;
  }

  // Lets the task that waits on GPU `gpu`'s FIFO go on (waits until one reads it).
  void Release(int gpu) {
    BackgroundCommand go(
        {"/bin/sh", "-c", "echo go > '" + dir_.File("go.") + std::to_string(gpu) + "'"});
    EXPECT_EQ(go.Finish(60).exit_code, 0);
  }

  std::unique_ptr<SystemGroup> lab_;
  std::unique_ptr<SystemUser> alice_;
};

// (a) and (b): two tasks on two GPUs at once, and a third that starts once one ends; followers
// begun before and while they run see every task's lines, each whole and headed by its #N,
// a line at each start and end, and exit 0 with the job's end. --json gives the frames.
TEST_F(LogFollowTest, AJobsFollowShowsEveryTasksWholeLinesUntilTheJobEnds) {
  StartLab();
  const int64_t id =
      SubmitAs(alice_.get(), testing::FwdConfigsText(3), {"--profiler-path", GatedProfiler()});
  ASSERT_GT(id, 0);
  const std::string job = std::to_string(id);
  // Begun at once: the tasks start before or after it; either way it sees their first lines.
  BackgroundCommand early(CkprofArgv(alice_.get(), {"log", job, "-f"}));
  ASSERT_TRUE(Printed(early, " first 0\n"));
  ASSERT_TRUE(Printed(early, " first 1\n"));
  // Begun while both run (each has written half of its second line).
  BackgroundCommand late(CkprofArgv(alice_.get(), {"log", job, "-f"}));
  BackgroundCommand as_json(CkprofArgv(alice_.get(), {"log", job, "--follow", "--json"}));
  ASSERT_TRUE(Printed(late, " first 0\n"));
  ASSERT_TRUE(Printed(late, " first 1\n"));
  ASSERT_TRUE(Printed(as_json, "\"tasks\""));
  ASSERT_TRUE(Printed(late, "running on GPU 0\n"));
  ASSERT_TRUE(Printed(late, "running on GPU 1\n"));
  // GPU 1's task ends; the third task starts there (after both follows began).
  Release(1);
  ASSERT_TRUE(Printed(late, " partial-1 rest\n"));
  ASSERT_TRUE(Printed(late, " started on GPU 1\n"));
  // The rest: GPU 0's task, then the third (which opens go.1 once it has started: each Release
  // waits for its reader).
  Release(0);
  ASSERT_TRUE(Printed(late, " partial-0 rest\n"));
  Release(1);
  CommandResult a = early.Finish(60), b = late.Finish(60), j = as_json.Finish(60);
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(j.exit_code, 0) << j.err;

  // Which task ran on which GPU when the late follower began.
  static const std::regex running(R"(^(#\d) running on GPU (\d)$)");
  std::map<int, std::string> on_gpu;  // GPU: "#N"
  for (const auto& line : Lines(b.out)) {
    std::smatch m;
    if (std::regex_match(line, m, running)) on_gpu[std::stoi(m[2])] = m[1];
  }
  ASSERT_EQ(on_gpu.size(), 2u) << b.out;
  std::set<std::string> all = {"#1", "#2", "#3"};
  all.erase(on_gpu[0]);
  all.erase(on_gpu[1]);
  ASSERT_EQ(all.size(), 1u) << b.out;
  const std::string third = *all.begin();

  // Every line is a task's line, whole, headed by its #N: no two tasks' text in one line.
  static const std::regex shape(
      R"(^#[123] (running on GPU [01]|started on GPU [01]|first [01]|partial-[01] rest|second [01]|succeeded|)"
      R"(Best configuration parameters:|name: emu|avg_time: 0.01|tflops: 1|GB/s: 1)$)");
  for (const CommandResult* r : {&a, &b}) {
    for (const auto& line : Lines(r->out)) {
      EXPECT_TRUE(std::regex_match(line, shape)) << "line '" << line << "' in:\n" << r->out;
    }
  }
  // The late follower: each running task's line so far, its half line completed when the rest
  // came (GPU 1's first, though GPU 0's half was written before it), the third's start on the
  // GPU that freed, and each end.
  auto at = [&](const std::string& line) { return b.out.find(line + "\n"); };
  const std::string t0 = on_gpu[0], t1 = on_gpu[1];
  for (const std::string& line :
       {t0 + " first 0", t1 + " first 1", t1 + " partial-1 rest", t1 + " second 1",
        t1 + " succeeded", third + " started on GPU 1", third + " first 1", t0 + " partial-0 rest",
        t0 + " second 0", t0 + " succeeded", third + " partial-1 rest", third + " second 1",
        third + " succeeded"}) {
    EXPECT_NE(at(line), std::string::npos) << "no line '" << line << "' in:\n" << b.out;
  }
  EXPECT_LT(at(t1 + " partial-1 rest"), at(t0 + " partial-0 rest")) << b.out;
  EXPECT_LT(at(t1 + " succeeded"), at(third + " started on GPU 1")) << b.out;
  EXPECT_LT(at(third + " started on GPU 1"), at(third + " first 1")) << b.out;
  // The early follower saw every task's whole output too.
  for (const std::string& t : {t0, t1, third}) {
    EXPECT_NE(a.out.find(t + " second "), std::string::npos) << a.out;
    EXPECT_NE(a.out.find(t + " succeeded\n"), std::string::npos) << a.out;
  }

  // --json: one frame a line: the first answer (the two running tasks), the log events, and the
  // job's end as `watch` has it.
  std::vector<json> frames;
  for (const auto& line : Lines(j.out)) {
    auto f = ParseJson(line);
    ASSERT_TRUE(f.ok()) << "not one JSON object per line: " << line;
    frames.push_back(*f);
  }
  ASSERT_GE(frames.size(), 4u) << j.out;
  EXPECT_EQ(frames.front()["tasks"].size(), 2u) << j.out;
  std::set<std::string> ended;
  bool started_third = false;
  for (const auto& f : frames) {
    if (f.value("type", "") != "log" || f.contains("tasks")) continue;  // not a log event
    EXPECT_EQ(f.value("job_id", int64_t{0}), id) << f.dump();
    const std::string label = "#" + std::to_string(f.value("position", 0));
    if (f["event"] == "started" && label == third) started_third = true;
    if (f["event"] == "ended") {
      EXPECT_EQ(f["state"], "succeeded") << f.dump();
      ended.insert(label);
    }
  }
  EXPECT_TRUE(started_third) << j.out;
  EXPECT_EQ(ended, (std::set<std::string>{"#1", "#2", "#3"})) << j.out;
  EXPECT_EQ(frames.back()["type"], "event") << j.out;
  EXPECT_EQ(frames.back()["event"], "job_finished") << j.out;
  EXPECT_EQ(frames.back()["job"]["state"], "finished") << j.out;
}

// A repeated config's runs are told apart as the other views tell them: "#1 run 2 ".
TEST_F(LogFollowTest, EachRunOfARepeatedConfigHasItsOwnLines) {
  StartLab();
  const int64_t id = SubmitAs(alice_.get(), testing::FwdConfigsText(1),
                              {"--repeat", "2", "--gpus", "0", "--profiler-path", GatedProfiler()});
  ASSERT_GT(id, 0);
  BackgroundCommand follow(CkprofArgv(alice_.get(), {"log", std::to_string(id), "-f"}));
  ASSERT_TRUE(Printed(follow, " first 0\n"));
  Release(0);
  ASSERT_TRUE(Printed(follow, " succeeded\n"));
  Release(0);
  CommandResult r = follow.Finish(60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"#1 run 1 first 0", "#1 run 1 partial-0 rest", "#1 run 1 succeeded",
                           "#1 run 2 started on GPU 0", "#1 run 2 first 0",
                           "#1 run 2 partial-0 rest", "#1 run 2 succeeded"}) {
    EXPECT_NE(r.out.find(std::string(line) + "\n"), std::string::npos)
        << "no line '" << line << "' in:\n"
        << r.out;
  }
}

// (c): who may follow a job is who may follow one of its tasks: a stranger (not in the socket's
// group) gets the same refusal for both; another lab member (`log` shows every member's jobs)
// is served by both.
TEST_F(LogFollowTest, AStrangerIsRefusedAsForATasksFollow) {
  SystemUser bob(testing::UniqueName("ckl", "b"), {lab_->name()}),
      stranger(testing::UniqueName("ckl", "s"));
  ASSERT_TRUE(bob.ok() && stranger.ok());
  StartLab();
  const int64_t id = SubmitAs(alice_.get(), testing::FwdConfigsText(2));
  ASSERT_GT(id, 0);
  const std::string job = std::to_string(id);
  ASSERT_EQ(Ckprof(alice_.get(), {"wait", job}).exit_code, 0);
  CommandResult task = Ckprof(&stranger, {"log", job + "#1", "-f"});
  CommandResult whole = Ckprof(&stranger, {"log", job, "-f"});
  EXPECT_EQ(task.exit_code, 2) << task.err;
  EXPECT_EQ(whole.exit_code, task.exit_code) << whole.err;
  EXPECT_NE(whole.err.find("Permission denied"), std::string::npos) << whole.err;
  EXPECT_EQ(whole.err, task.err);
  EXPECT_EQ(whole.out, "");
  CommandResult theirs_task = Ckprof(&bob, {"log", job + "#1", "-f"});
  CommandResult theirs = Ckprof(&bob, {"log", job, "-f"});
  EXPECT_EQ(theirs_task.exit_code, 0) << theirs_task.err;
  EXPECT_EQ(theirs.exit_code, 0) << theirs.err;
  EXPECT_NE(theirs.out.find("==> job " + job + " #2 "), std::string::npos) << theirs.out;
}

// (d): a job that has ended is shown as `log J` shows it, at once, and the exit status is the
// job's end (0: every task succeeded, 1 otherwise), as a finished task's follow gives its own.
TEST_F(LogFollowTest, AnEndedJobIsShownAsLogShowsItAndTheFollowExits) {
  StartLab();
  const std::string ok = std::to_string(SubmitAs(alice_.get(), testing::FwdConfigsText(2)));
  const std::string failed =
      std::to_string(SubmitAs(alice_.get(), testing::FwdConfigsText(2, 9003, 2)));
  ASSERT_EQ(Ckprof(alice_.get(), {"wait", ok}).exit_code, 0);
  ASSERT_EQ(Ckprof(alice_.get(), {"wait", failed}).exit_code, 1);
  struct Case {
    std::string job;
    int exit_code;
  } cases[] = {{ok, 0}, {failed, 1}};
  for (const auto& c : cases) {
    SCOPED_TRACE("job " + c.job);
    CommandResult shown = Ckprof(alice_.get(), {"log", c.job});
    CommandResult followed = Ckprof(alice_.get(), {"log", c.job, "-f"});
    EXPECT_EQ(followed.exit_code, c.exit_code) << followed.err;
    EXPECT_EQ(followed.out, shown.out);
    EXPECT_NE(followed.out.find("==> job " + c.job + " #2 "), std::string::npos) << followed.out;
    CommandResult as_json = Ckprof(alice_.get(), {"log", c.job, "-f", "--json"});
    EXPECT_EQ(as_json.exit_code, c.exit_code) << as_json.err;
    auto j = ParseJson(as_json.out);  // one frame: the answer
    ASSERT_TRUE(j.ok()) << as_json.out;
    EXPECT_EQ((*j)["tasks"].size(), 2u) << as_json.out;
  }
  CommandResult f = Ckprof(alice_.get(), {"log", failed, "-f"});
  EXPECT_NE(f.err.find("ckprof log: job " + failed + " finished: 1 succeeded, 1 failed"),
            std::string::npos)
      << f.err;
}

// A follower whose daemon stops is told so, names the job that goes on and exits 2 (no hang);
// after the restart a follow finds the job again. Ctrl-C ends a follow at once.
TEST_F(LogFollowTest, AFollowerWhoseDaemonStopsIsToldAndCtrlCEndsAFollow) {
  StartLab();
  const int64_t id = SubmitAs(alice_.get(), testing::FwdConfigsText(1, 9001));  // hangs
  ASSERT_GT(id, 0);
  const std::string job = std::to_string(id);
  BackgroundCommand interrupted(CkprofArgv(alice_.get(), {"log", job, "-f"}));
  BackgroundCommand follower(CkprofArgv(alice_.get(), {"log", job, "-f"}));
  ASSERT_TRUE(Printed(interrupted, " on GPU "));
  ASSERT_TRUE(Printed(follower, " on GPU "));
  interrupted.Signal(SIGINT);
  CommandResult i = interrupted.Finish(30);
  EXPECT_EQ(i.term_signal, SIGINT) << i.exit_code << " " << i.err;
  EXPECT_EQ(i.err, "");
  daemon_.Stop(SIGTERM);
  CommandResult gone = follower.Finish(30);
  EXPECT_EQ(gone.exit_code, 2) << gone.err;
  EXPECT_NE(gone.err.find("closed the connection; job " + job + " is kept: 'ckprof log " + job +
                          " -f' follows it again once ckprofd is back"),
            std::string::npos)
      << gone.err;
  StartLab();  // the task runs again (interrupted by the stop)
  BackgroundCommand again(CkprofArgv(alice_.get(), {"log", job, "-f"}));
  ASSERT_TRUE(Printed(again, " on GPU "));
  ASSERT_EQ(Ckprof(alice_.get(), {"cancel", job}).exit_code, 0);
  CommandResult cancelled = again.Finish(60);
  EXPECT_EQ(cancelled.exit_code, 1) << cancelled.err;
  EXPECT_NE(cancelled.out.find("\n#1 cancelled\n"), std::string::npos) << cancelled.out;
  EXPECT_NE(cancelled.err.find("job " + job + " cancelled: 0 succeeded"), std::string::npos)
      << cancelled.err;
}

// A follower that stops reading (SIGSTOP) while two tasks write 120 MB each loses their
// output, not the daemon's memory: it is told how much was dropped, and still gets every
// task's end and the job's.
TEST_F(LogFollowTest, ASlowFollowerLosesOutputNotTheDaemonsMemory) {
  StartLab();
  // (5,000,000 lines of 24 bytes: whole lines, so that CK's summary after them is read.)
  const std::string profiler = GatedProfiler("yes 'a line of a long output' | head -n 5000000\n");
  const int64_t id =
      SubmitAs(alice_.get(), testing::FwdConfigsText(2), {"--profiler-path", profiler});
  ASSERT_GT(id, 0);
  const std::string job = std::to_string(id);
  BackgroundCommand slow(CkprofArgv(alice_.get(), {"log", job, "-f"}));
  ASSERT_TRUE(Printed(slow, " first 0\n"));
  ASSERT_TRUE(Printed(slow, " first 1\n"));
  const int64_t before = daemon_.PeakRssBytes();
  slow.Signal(SIGSTOP);
  Release(0);
  Release(1);
  ASSERT_EQ(Ckprof(alice_.get(), {"wait", job}).exit_code, 0)
      << Ckprof(alice_.get(), {"results", job, "--wide"}).out;
  const int64_t growth = daemon_.PeakRssBytes() - before;
  std::cout << "daemon peak RSS growth with a stopped follower of 2 x 120 MB: " << (growth >> 20)
            << " MiB\n";
  RecordProperty("daemon_peak_rss_growth_bytes", std::to_string(growth));
  slow.Signal(SIGCONT);
  CommandResult r = slow.Finish(60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("output dropped: this client read more slowly than the profiler wrote"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("#1 succeeded\n"), std::string::npos);
  EXPECT_NE(r.out.find("#2 succeeded\n"), std::string::npos);
  if (testing::kMemoryIsMeasurable) {
    EXPECT_LT(growth, int64_t{64} << 20) << "the daemon's memory followed the output";
  }
}

}  // namespace
}  // namespace ckprof
