// Issue 30.9: other users' text reaches a terminal escaped. Real users (root only; skipped
// otherwise) and a real root ckprofd: alice names a job with an OSC 52 clipboard write, a
// screen clear, BEL and a C1 CSI, and runs a "profiler" (a script at a path holding an OSC
// title sequence) that writes such bytes to stdout and stderr. bob's views, through the real
// client with stdout a pipe, hold none of those bytes raw, only their escaped form. Also the
// on_job_end environment (30.9), wait --timeout --json (31.7), the format by --output's name
// (31.5) and one JSON shape per command (31.8).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "common/json_util.h"
#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/multi_user.h"
#include "tests/util/users.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::CommandResult;
using testing::SystemUser;

// An OSC 52 clipboard write ("rm -rf ~"), a screen clear, BEL and U+009B (CSI on terminals
// that take C1 controls): all valid UTF-8, as the protocol's JSON requires.
const std::string kEvil =
    "evil\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\a\xc2\x9b"
    "31mred";
// What every view shows of it.
const std::string kShown = "evil\\e]52;c;cm0gLXJmIH4=\\x07\\e[2J\\x07\\u009b31mred";

// The bytes a terminal would act on, named, or "" when there is none.
std::string RawControl(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f) {
      return "byte " + std::to_string(b) + " at " + std::to_string(i) + ": ..." +
             text.substr(i > 20 ? i - 20 : 0, 40);
    }
    if (b == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      return "C1 control at " + std::to_string(i);
    }
  }
  return "";
}

class SecurityTextTest : public testing::MultiUserDaemonTest {
 protected:
  void SetUp() override {
    MultiUserDaemonTest::SetUp();
    ckprof_env_ = {"COLUMNS=200"};
  }

  // The daemon on GPUs 0-1, its socket open to every user, with `extra` config keys.
  void StartShared(const std::string& extra = "") {
    Start(EmulatorOptions("0-1",
                          R"({"socket_mode": "0666")" + (extra.empty() ? "" : ", " + extra) + "}"));
  }
};

TEST_F(SecurityTextTest, AnotherUsersNamesPathsAndOutputReachTheTerminalEscaped) {
  SystemUser alice(testing::UniqueName("cks", "a")), bob(testing::UniqueName("cks", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  StartShared();
  // alice's "profiler": in a directory whose name retitles the window, writing escapes to
  // stdout and stderr, then waiting on a FIFO (so that bob's watch sees it run and end).
  const std::string bin = dir_.File("ck\x1b]0;pwned\x07");
  ASSERT_TRUE(std::filesystem::create_directory(bin));
  chmod(bin.c_str(), 0755);
  const std::string fifo = dir_.File("go.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0666), 0);
  chmod(fifo.c_str(), 0666);
  const std::string profiler = bin + "/ckProfiler";
  testing::WriteFile(
      profiler, "#!/bin/sh\nprintf 'out " + std::string("\\033]52;c;aGk=\\007\\033[2J") +
                    "\\n'\nprintf 'err \\033[2J\\007\\n' >&2\nread line < " + fifo + "\nexit 3\n");
  chmod(profiler.c_str(), 0755);
  const int64_t id =
      SubmitAs(&alice, testing::FwdConfigsText(1), {"--name", kEvil, "--profiler-path", profiler});
  ASSERT_GT(id, 0);
  const std::string job = std::to_string(id);

  // bob watches it to its end (stdout a pipe: a line per event).
  testing::BackgroundCommand watch(CkprofArgv(&bob, {"watch", job}));
  ASSERT_TRUE(watch.WaitForOutput("job " + job + " \"")) << "the watch did not begin";
  testing::BackgroundCommand go({"/bin/sh", "-c", "echo go > '" + fifo + "'"});
  EXPECT_EQ(go.Finish(60).exit_code, 0);
  CommandResult watched = watch.Finish(60);
  EXPECT_EQ(watched.exit_code, 1) << watched.err;  // the task failed

  struct View {
    std::string name;
    CommandResult r;
    std::string expected;  // the escaped form it must show
  };
  std::vector<View> views = {
      {"watch", watched, kShown},
      {"status", Ckprof(&bob, {"status"}), "evil\\e]52"},  // the name column may be cut
      {"status JOB", Ckprof(&bob, {"status", job}),
       "profiler: ckProfiler " + dir_.File("ck\\e]0;pwned\\x07/ckProfiler")},
      {"status JOB --wide", Ckprof(&bob, {"status", job, "--wide"}), kShown},
      {"list --all --wide", Ckprof(&bob, {"list", "--all", "--wide"}), kShown},
      {"results", Ckprof(&bob, {"results", job, "--wide"}), "#1"},
      {"results --format csv", Ckprof(&bob, {"results", job, "--format", "csv"}),
       "ck\\e]0;pwned\\x07"},
      {"report --format md", Ckprof(&bob, {"report", job, "--format", "md", "-o", "-"}),
       "ck\\e]0;pwned\\x07"},
      {"report --format html", Ckprof(&bob, {"report", job, "-o", "-"}), kShown},
      {"log", Ckprof(&alice, {"log", job + "#1"}), "out \\e]52;c;aGk=\\x07\\e[2J"},
      {"log --stderr", Ckprof(&alice, {"log", job + "#1", "--stderr"}), "err \\e[2J\\x07"},
      {"log of the job", Ckprof(&alice, {"log", job}), "out \\e]52;c;aGk=\\x07\\e[2J"},
  };
  for (const View& v : views) {
    SCOPED_TRACE(v.name);
    EXPECT_EQ(RawControl(v.r.out), "") << v.r.out;
    EXPECT_EQ(RawControl(v.r.err), "") << v.r.err;
    EXPECT_NE((v.r.out + v.r.err).find(v.expected), std::string::npos)
        << "expected " << v.expected << " in:\n"
        << v.r.out << v.r.err;
  }
  // --raw is asked for: the bytes as written.
  CommandResult raw = Ckprof(&alice, {"log", job + "#1", "--raw"});
  EXPECT_NE(raw.out.find("out \x1b]52;c;aGk=\x07\x1b[2J"), std::string::npos) << raw.out;
  // JSON escapes controls itself (\u001b), so it carries the name exactly.
  CommandResult st = Ckprof(&bob, {"status", job, "--json"});
  EXPECT_EQ(RawControl(st.out), "") << st.out;
  auto parsed = ParseJson(st.out);
  ASSERT_TRUE(parsed.ok() && (*parsed)["jobs"].size() == 1) << st.out;
  EXPECT_EQ((*parsed)["jobs"][0]["name"], kEvil);
}

// on_job_end gets the submitter's job name escaped in CKPROF_JOB_NAME: an admin's command that
// echoes it into a terminal or a mail acts on nothing.
TEST_F(SecurityTextTest, OnJobEndSeesTheNameEscaped) {
  SystemUser alice(testing::UniqueName("cks", "a"));
  ASSERT_TRUE(alice.ok());
  const std::string fifo = dir_.File("name.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0666), 0);
  StartShared(R"("on_job_end": "printf '%s|%s' \"$CKPROF_JOB_NAME\" \"$CKPROF_JOB_OWNER\" > )" +
              fifo + R"(")");
  ASSERT_GT(SubmitAs(&alice, testing::FwdConfigsText(1), {"--name", kEvil}), 0);
  testing::BackgroundCommand cat({"/bin/cat", fifo});
  const std::string seen = cat.Finish(60).out;
  EXPECT_EQ(seen, kShown + "|" + alice.name());
}

// Issue 31.7: wait J1 J2 --timeout S --json lists both jobs, in the order named, whichever was
// still running when the time ran out.
TEST_F(SecurityTextTest, WaitTimeoutJsonListsEveryJob) {
  SystemUser alice(testing::UniqueName("cks", "a"));
  ASSERT_TRUE(alice.ok());
  StartShared();
  const int64_t quick = SubmitAs(&alice, testing::FwdConfigsText(1));
  const int64_t hung = SubmitAs(&alice, testing::FwdConfigsText(1, 9001));  // hangs
  ASSERT_GT(quick, 0);
  ASSERT_GT(hung, 0);
  ASSERT_EQ(Ckprof(&alice, {"wait", std::to_string(quick)}).exit_code, 0);
  for (const auto& order : {std::vector<int64_t>{quick, hung}, std::vector<int64_t>{hung, quick}}) {
    SCOPED_TRACE("wait " + std::to_string(order[0]) + " " + std::to_string(order[1]));
    CommandResult r = Ckprof(&alice, {"wait", std::to_string(order[0]), std::to_string(order[1]),
                                      "--timeout", "1", "--json"});
    EXPECT_EQ(r.exit_code, 124) << r.err;
    auto j = ParseJson(r.out);
    ASSERT_TRUE(j.ok() && j->is_array()) << r.out;
    ASSERT_EQ(j->size(), 2u) << r.out;
    EXPECT_EQ((*j)[0]["id"], order[0]) << r.out;
    EXPECT_EQ((*j)[1]["id"], order[1]) << r.out;
    EXPECT_EQ((*j)[order[0] == quick ? 0 : 1]["state"], "finished") << r.out;
    EXPECT_EQ((*j)[order[0] == hung ? 0 : 1]["state"], "running") << r.out;
  }
  EXPECT_EQ(Ckprof(&alice, {"cancel", std::to_string(hung)}).exit_code, 0);
}

// Issue 31.5 and 31.8: the format is what was asked (--format, --json, --output's name), never
// where stdout goes; status JOB --json is a list as for several jobs; no GPU list is null.
TEST_F(SecurityTextTest, FormatsAndShapesAreWhatWasAsked) {
  SystemUser alice(testing::UniqueName("cks", "a"));
  ASSERT_TRUE(alice.ok());
  StartShared();
  const int64_t a = SubmitAs(&alice, testing::FwdConfigsText(2));
  const int64_t b = SubmitAs(&alice, testing::FwdConfigsText(1), {"--gpus", "1"});
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  const std::string ja = std::to_string(a), jb = std::to_string(b);
  const std::string out = dir_.File("out");  // where alice writes
  ASSERT_TRUE(std::filesystem::create_directory(out));
  chmod(out.c_str(), 0777);
  auto in_out = [&](const std::string& name) { return out + "/" + name; };
  ASSERT_EQ(Ckprof(&alice, {"wait", ja, jb}).exit_code, 0);

  // Piped, no --format: the table, as on a terminal.
  CommandResult piped = Ckprof(&alice, {"results", ja});
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out.rfind("task", 0), 0u) << piped.out;
  EXPECT_NE(piped.out.find("2 task(s)"), std::string::npos) << piped.out;
  // --json is --format json.
  auto as_json = ParseJson(Ckprof(&alice, {"results", ja, "--json"}).out);
  ASSERT_TRUE(as_json.ok());
  EXPECT_EQ((*as_json)["results"].size(), 2u);
  // The extension of --output names the format; another is refused, naming the choices.
  for (const auto& [file, head] : {std::pair<std::string, std::string>{"res.csv", "job_id,task_id"},
                                   {"res.json", "{"},
                                   {"res.txt", "task"}}) {
    CommandResult w = Ckprof(&alice, {"results", ja, "--output", in_out(file)});
    EXPECT_EQ(w.exit_code, 0) << w.err;
    EXPECT_EQ(testing::ReadFile(in_out(file)).rfind(head, 0), 0u) << file;
  }
  CommandResult unknown = Ckprof(&alice, {"results", ja, "--output", in_out("res.dat")});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("name it .json, .csv, .txt, or say --format table, json or csv"),
            std::string::npos)
      << unknown.err;
  EXPECT_FALSE(std::filesystem::exists(in_out("res.dat")));
  CommandResult md = Ckprof(&alice, {"report", ja, "-o", in_out("rep.md")});
  EXPECT_EQ(md.exit_code, 0) << md.err;
  EXPECT_EQ(testing::ReadFile(in_out("rep.md")).rfind("# ckprof report", 0), 0u);
  auto report_json = ParseJson(Ckprof(&alice, {"report", ja, "--json", "-o", "-"}).out);
  EXPECT_TRUE(report_json.ok() && report_json->contains("tasks"));
  CommandResult best_csv = Ckprof(&alice, {"best", "--output", in_out("best.csv")});
  EXPECT_EQ(best_csv.exit_code, 0) << best_csv.err;
  const std::string csv = testing::ReadFile(in_out("best.csv"));
  EXPECT_EQ(csv.rfind("operation,problem", 0), 0u) << csv;
  // Times as ISO 8601: 2026-12-03T09:24:33+00:00.
  EXPECT_TRUE(
      std::regex_search(csv, std::regex(R"(,\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d,)")))
      << csv;
  auto best = ParseJson(Ckprof(&alice, {"best", "--json"}).out);
  ASSERT_TRUE(best.ok() && (*best)["rows"].is_array() && !(*best)["rows"].empty());
  EXPECT_TRUE((*best)["rows"][0]["split_k"].is_null() || (*best)["rows"][0]["split_k"].is_number());

  // status --json: one object, {"jobs": [...], "you": ...}, of one job as of two.
  auto one_json = ParseJson(Ckprof(&alice, {"status", ja, "--json"}).out);
  auto two_json = ParseJson(Ckprof(&alice, {"status", ja, jb, "--json"}).out);
  ASSERT_TRUE(one_json.ok() && one_json->is_object());
  ASSERT_TRUE(two_json.ok() && two_json->is_object());
  const json one = (*one_json)["jobs"], two = (*two_json)["jobs"];
  ASSERT_TRUE(one.is_array() && one.size() == 1) << one_json->dump();
  ASSERT_TRUE(two.is_array() && two.size() == 2) << two_json->dump();
  EXPECT_EQ(two[1]["id"], b);
  // No --gpus: null, as README says; --gpus 1: [1].
  EXPECT_TRUE(one[0]["allowed_gpus"].is_null()) << one.dump();
  EXPECT_EQ(two[1]["allowed_gpus"], json({1})) << two.dump();
}

}  // namespace
}  // namespace ckprof
