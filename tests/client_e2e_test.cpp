// End-to-end tests of the ckprof client through a real ckprofd (and through its own private
// daemon with --local): submit → watch → results for each input format, the original run
// workflow's output and exit codes, dry-run command lines, and the documented errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/ck_config.h"
#include "common/file_util.h"
#include "common/gpu_list.h"
#include "common/json_util.h"
#include "common/terminal_text.h"
#include "common/text_table.h"
#include "tests/util/commands.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/processes.h"
#include "tests/util/requests.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::BinPath;
using testing::CommandResult;
using testing::DataPath;
using testing::LaunchedDaemon;
using testing::RunCommand;
using testing::Spawned;
using testing::TempDir;

// `status JOB --json` prints {"jobs": [...], "you": ...}, the jobs named (one job: a list of
// one): its first.
Result<json> FirstJob(const std::string& out) {
  auto j = ParseJson(out);
  if (!j) return j;
  if (!j->is_object() || !(*j)["jobs"].is_array() || (*j)["jobs"].size() != 1) {
    return MakeError("not {\"jobs\": [one job]}: " + out);
  }
  return (*j)["jobs"][0];
}

// The sample config of conversion.md, and its exact ckProfiler command line.
constexpr const char* kSampleConfig = R"([{"operation_type": "profile_grouped_conv_fwd",
 "profiler_args": {"data_type": 1, "layout": 3, "index_type": 0, "verify": 0, "init": 1, "log": 0,
   "time": 1, "num_dim_spatial": 2, "G": 32, "N": 32, "K": 4, "C": 4, "filter_spatial": [3, 3],
   "input_spatial": [200, 200], "strides": [1, 1], "dilations": [1, 1], "left_pads": [1, 1],
   "right_pads": [1, 1]},
 "metadata": {"priority_rank": 1, "pytorch_op": "aten::miopen_convolution",
   "description": "Forward conv: G=32, N=32, K=4, C=4, [3, 3] kernel, [200, 200] input"}},
 {"operation_type": "grouped_conv_bwd_data",
 "profiler_args": {"data_type": 2, "layout": 3, "verify": 0, "init": 1, "log": 0,
   "time": 1, "num_dim_spatial": 2, "G": 1, "N": 10, "K": 64, "C": 64, "filter_spatial": [3, 3],
   "input_spatial": [56, 56], "strides": [1, 1], "dilations": [1, 1], "left_pads": [1, 1],
   "right_pads": [1, 1], "split_k": "all"},
 "metadata": {"priority_rank": 2}}])";
constexpr const char* kSampleCommand =
    "./build/bin/ckProfiler grouped_conv_fwd 1 3 0 0 1 0 1 2 32 32 4 4 3 3 200 200 1 1 1 1 1 1 "
    "1 1";
// bwd_data: no index_type, split_k last, "all" passed as -1 (real CK aborts on "all").
constexpr const char* kSampleBwdCommand =
    "./build/bin/ckProfiler grouped_conv_bwd_data 2 3 0 1 0 1 2 1 10 64 64 3 3 56 56 1 1 1 1 1 "
    "1 1 1 -1";

// True once the process holds a connected Unix socket (its fds' inodes, state 03 in
// /proc/net/unix): a client that has connected to the daemon.
bool HasConnectedUnixSocket(pid_t pid) {
  std::set<std::string> inodes;
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const std::string& name : ckprof::ListDir(fd_dir)) {
    char target[256];
    ssize_t n = readlink((fd_dir + "/" + name).c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    std::string link(target, static_cast<size_t>(n));
    if (link.rfind("socket:[", 0) == 0) inodes.insert(link.substr(8, link.size() - 9));
  }
  std::ifstream unix_table("/proc/net/unix");
  std::string line;
  std::getline(unix_table, line);  // the header
  while (std::getline(unix_table, line)) {
    std::istringstream fields(line);
    std::string num, refs, protocol, flags, type, state, inode;
    fields >> num >> refs >> protocol >> flags >> type >> state >> inode;
    if (state == "03" && inodes.count(inode)) return true;
  }
  return false;
}

// A PyTorch profiler trace recorded without record_shapes=True: a convolution and its kernel,
// but no argument shapes.
constexpr const char* kShapelessTrace =
    R"({"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::cudnn_convolution", "pid": 7, "tid": 1, "ts": 100,
   "dur": 10, "args": {"External id": 5}},
  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 101, "dur": 1,
   "args": {"device": 0, "stream": 7, "External id": 5}}]})";

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A build/bin with the emulator linked as ckProfiler, like a CK build tree.
    mkdir(dir_.File("build").c_str(), 0755);
    mkdir(dir_.File("build/bin").c_str(), 0755);
    ASSERT_EQ(symlink(BinPath("ckprofiler-emu").c_str(), dir_.File("build/bin/ckProfiler").c_str()),
              0);
    testing::WriteFile(dir_.File("configs.json"), kSampleConfig);
  }

  void StartDaemon() {
    daemon_ = std::make_unique<LaunchedDaemon>();
    daemon_->ExpectCleanStop();
    LaunchedDaemon::Options o;
    o.dir = dir_.path();
    o.gpus = "0-1";
    o.env = {"CKEMU_TIME_SCALE=0"};
    // The site's default profiler (profiler_path): the emulator as ckProfiler in a build tree.
    o.args = {"--profiler-path", dir_.File("build/bin")};
    std::string error;
    ASSERT_TRUE(daemon_->Start(o, &error)) << error;
  }

  // Runs ckprof in the test's directory, against the test daemon when one runs.
  CommandResult Ckprof(std::vector<std::string> args, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {BinPath("ckprof")};
    if (daemon_) argv.insert(argv.end(), {"--socket", daemon_->socket()});
    argv.insert(argv.end(), args.begin(), args.end());
    env.push_back("CKEMU_TIME_SCALE=0");
    return RunCommand(argv, env, dir_.path());
  }

  // Runs ckprof in the test's directory without the daemon's socket option, with stdin.
  CommandResult Plain(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), BinPath("ckprof"));
    return RunCommand(args, {"CKEMU_TIME_SCALE=0"}, dir_.path(), input);
  }

  // Starts ckprof with its stdout on a pipe the test reads as it is written.
  std::unique_ptr<Spawned> Start(std::vector<std::string> args, const std::string& name) {
    args.insert(args.begin(), {BinPath("ckprof"), "--socket", daemon_->socket()});
    return std::make_unique<Spawned>(args, dir_.path(), dir_.File(name + ".err"));
  }

  // Submits a configs text; the job id ("" after a failed assertion).
  std::string Submit(const std::string& text, std::vector<std::string> extra = {}) {
    const std::string file = dir_.File("job-" + std::to_string(++files_) + ".json");
    testing::WriteFile(file, text);
    std::vector<std::string> args = {"submit", file, "--profiler-path", "build/bin"};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult sub = Ckprof(args);
    EXPECT_EQ(sub.exit_code, 0) << sub.err;
    return sub.exit_code == 0 ? sub.out.substr(0, sub.out.find('\n')) : "";
  }

  // kSampleConfig with the emulator's fault sizes: the fwd config's N and the bwd_data one's
  // (0 = as is). 9001 hangs until cancelled, 9003 fails.
  static std::string SampleWithFaults(int fwd_n, int bwd_n) {
    std::string text = kSampleConfig;
    if (fwd_n) text.replace(text.find("\"N\": 32"), 7, "\"N\": " + std::to_string(fwd_n));
    if (bwd_n) text.replace(text.find("\"N\": 10"), 7, "\"N\": " + std::to_string(bwd_n));
    return text;
  }

  TempDir dir_;
  std::unique_ptr<LaunchedDaemon> daemon_;  // null until StartDaemon
  int files_ = 0;
};

TEST_F(ClientTest, SubmitWatchResultsForEveryInputFormat) {
  StartDaemon();
  struct Case {
    const char* name;
    std::string input;
    int configs;
  } cases[] = {
      {"replay IR", DataPath("conv_repros_ir.json"), 32},
      {"gzipped trace", DataPath("resnet_mi300_trace.json.gz"), 32},
      {"configs file", dir_.File("configs.json"), 2},
  };
  for (const auto& c : cases) {
    CommandResult sub =
        Ckprof({"submit", c.input, "--profiler-path", "build/bin", "--name", c.name});
    ASSERT_EQ(sub.exit_code, 0) << c.name << ": " << sub.err;
    const std::string job = sub.out.substr(0, sub.out.find('\n'));
    CommandResult watch = Ckprof({"watch", job});
    EXPECT_EQ(watch.exit_code, 0) << c.name << ": " << watch.out << watch.err;
    EXPECT_NE(watch.out.find("finished: " + std::to_string(c.configs) + " succeeded"),
              std::string::npos)
        << c.name << ": " << watch.out;
    CommandResult res = Ckprof({"results", job, "--format", "json"});
    ASSERT_EQ(res.exit_code, 0) << res.err;
    auto j = ParseJson(res.out);
    ASSERT_TRUE(j.ok()) << j.error();
    EXPECT_EQ((*j)["stats"]["total"], c.configs) << c.name;
    EXPECT_EQ((*j)["stats"]["success"], c.configs) << c.name;
    const json& first = (*j)["results"][0];
    for (const char* key : {"operation", "description", "priority_rank", "success", "returncode",
                            "elapsed_time", "command", "error", "stdout"}) {
      EXPECT_TRUE(first.contains(key)) << c.name << " lacks " << key;
    }
    EXPECT_TRUE(first["error"].is_null());
    EXPECT_GT(first["tflops"].get<double>(), 0);
    EXPECT_NE(first["stdout"].get<std::string>().find("Best configuration parameters:"),
              std::string::npos);
    CommandResult csv = Ckprof({"results", job, "--format", "csv"});
    EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), c.configs + 1) << csv.out;
    CommandResult table = Ckprof({"results", job, "--format", "table"});
    EXPECT_NE(table.out.find(std::to_string(c.configs) + " task(s): " + std::to_string(c.configs) +
                             " succeeded"),
              std::string::npos)
        << table.out;
  }
}

TEST_F(ClientTest, JsonOutputsParse) {
  StartDaemon();
  CommandResult sub = Ckprof({"submit", "configs.json", "--profiler-path", "build/bin", "--json",
                              "--order", "longest-first"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  auto answer = ParseJson(sub.out);
  ASSERT_TRUE(answer.ok()) << sub.out;
  const std::string job = std::to_string((*answer)["job_id"].get<int64_t>());
  ASSERT_EQ(Ckprof({"wait", job}).exit_code, 0);
  for (std::vector<std::string> args : {std::vector<std::string>{"status", job, "--json"},
                                        {"list", "--all", "--json"},
                                        {"gpus", "--json"}}) {
    CommandResult r = Ckprof(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(ParseJson(r.out).ok()) << args[0] << ": " << r.out;
  }
  auto status = FirstJob(Ckprof({"status", job, "--json"}).out);
  EXPECT_EQ((*status)["state"], "finished");
  EXPECT_EQ((*status)["succeeded"], 2);
  EXPECT_EQ((*status)["order"], "longest-first");
  CommandResult text = Ckprof({"status", job});
  EXPECT_NE(text.out.find("order: longest-first (the most FLOPs first)"), std::string::npos)
      << text.out;
}

TEST_F(ClientTest, RunThroughTheDaemonReproducesTheOriginalWorkflow) {
  StartDaemon();
  CommandResult r = Ckprof({"run", "configs.json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[1/2] ✓"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Total configs:      2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Results saved to: profiler_results.json"), std::string::npos) << r.out;
  auto saved = ParseJson(testing::ReadFile(dir_.File("profiler_results.json")));
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ((*saved)["stats"]["success"], 2);
  // The command recorded is the one that ran: the absolute profiler, CK's argument order.
  std::string cmd = (*saved)["results"][0]["command"];
  EXPECT_NE(cmd.find("ckProfiler grouped_conv_fwd 1 3 0 0 1 0 1 2 32 32 4 4 3 3 200 200"),
            std::string::npos)
      << cmd;
  // --quiet prints only the summary; --no-save writes nothing.
  unlink(dir_.File("profiler_results.json").c_str());
  CommandResult q = Ckprof({"run", "configs.json", "--quiet", "--no-save"});
  EXPECT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.out.find("[1/2]"), std::string::npos) << q.out;
  EXPECT_NE(q.out.find("Profiling summary"), std::string::npos);
  EXPECT_NE(access(dir_.File("profiler_results.json").c_str(), F_OK), 0);
}

// One rule for the profiler of `run` and `submit`: --profiler-path, else the daemon's default,
// whatever the client's directory holds; a path with no profiler is refused at once.
TEST_F(ClientTest, RunAndSubmitUseTheDaemonsProfilerAndRefuseAMissingOne) {
  StartDaemon();
  const std::string elsewhere = dir_.File("elsewhere");
  mkdir(elsewhere.c_str(), 0755);
  testing::WriteFile(elsewhere + "/configs.json", testing::ReadFile(dir_.File("configs.json")));
  CommandResult r = RunCommand(
      {BinPath("ckprof"), "--socket", daemon_->socket(), "run", "configs.json", "--no-save"},
      {"CKEMU_TIME_SCALE=0"}, elsewhere);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("✓ Successful:     2"), std::string::npos) << r.out;

  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"run", "configs.json", "--no-save"},
        std::vector<std::string>{"submit", "configs.json"}}) {
    std::vector<std::string> args = cmd;
    args.insert(args.end(), {"--profiler-path", "nowhere/bin"});
    CommandResult bad = Ckprof(args);
    EXPECT_EQ(bad.exit_code, 1) << cmd[0] << ": " << bad.out << bad.err;
    EXPECT_NE(bad.err.find(dir_.File("nowhere/bin")), std::string::npos) << bad.err;
  }
  auto list = ParseJson(Ckprof({"list", "--all", "--json"}).out);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->dump().find("\"job_id\":3"), std::string::npos)
      << "a refused submit makes no job: " << list->dump();
}

TEST_F(ClientTest, RunExitsOneWhenAConfigFails) {
  StartDaemon();
  std::string text = kSampleConfig;
  text.replace(text.find("\"N\": 32"), 7, "\"N\": 9003");  // the emulator's "fail" fault
  testing::WriteFile(dir_.File("failing.json"), text);
  CommandResult r = Ckprof({"run", "failing.json", "--output", "out.json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("✗ fwd (rank 1)"), std::string::npos) << r.out;
  auto saved = ParseJson(testing::ReadFile(dir_.File("out.json")));
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ((*saved)["stats"]["failed"], 1);
  EXPECT_EQ((*saved)["results"][0]["success"], false);
  EXPECT_EQ((*saved)["results"][0]["returncode"], 1);
  EXPECT_NE((*saved)["results"][0]["error"].get<std::string>().find("exit"), std::string::npos);
}

TEST_F(ClientTest, RunLocalNeedsNoDaemon) {
  // (Host locks of the test's own: tests run side by side, each on "GPUs" 0 and 1.)
  const std::string locks = dir_.File("locks");
  CommandResult r = Ckprof(
      {"run", "configs.json", "--local", "--gpus", "0,1", "--max-ops", "1", "--lock-dir", locks});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("private ckprofd"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Total configs:      1"), std::string::npos) << r.out;
  auto saved = ParseJson(testing::ReadFile(dir_.File("profiler_results.json")));
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ((*saved)["results"].size(), 1u);
  // Replay IR works too (converted first).
  CommandResult ir = Ckprof({"run", DataPath("conv_repros_ir.json"), "--local", "--quiet",
                             "--no-save", "--max-ops", "4", "--lock-dir", locks});
  EXPECT_EQ(ir.exit_code, 0) << ir.out << ir.err;
  EXPECT_NE(ir.out.find("Total configs:      4"), std::string::npos) << ir.out;
}

TEST_F(ClientTest, DryRunPrintsExactlyTheCkCommandLines) {
  CommandResult r = Ckprof({"run", "configs.json", "--dry-run", "--quiet"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // No ckProfiler under ./build/bin? Then the default path is assumed as given.
  unlink(dir_.File("build/bin/ckProfiler").c_str());
  r = Ckprof({"run", "configs.json", "--dry-run", "--quiet"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string(kSampleCommand) + "\n" + kSampleBwdCommand + "\n");
  CommandResult one = Ckprof({"run", "configs.json", "--dry-run", "--max-ops", "1"});
  EXPECT_NE(one.out.find(std::string("    ") + kSampleCommand + "\n"), std::string::npos)
      << one.out;
  EXPECT_EQ(one.out.find("grouped_conv_bwd_data"), std::string::npos) << one.out;
}

TEST_F(ClientTest, BadArgumentsGiveTheDocumentedMessagesAndCodes) {
  struct Case {
    std::vector<std::string> args;
    int code;
    const char* message;
  } cases[] = {
      {{"frobnicate"}, 2, "unknown command 'frobnicate'"},
      {{"run"}, 2, "missing CONFIG_FILE"},
      {{"run", "configs.json", "--bogus"}, 2, "unknown option --bogus"},
      {{"run", "configs.json", "--max-ops", "many"}, 2, "--max-ops must be an integer >= 1"},
      {{"run", "configs.json", "--max-ops", "0"}, 2, "--max-ops must be an integer >= 1"},
      {{"run", "configs.json", "--gpus", "0-x"}, 2, "--gpus"},
      {{"run", "missing.json", "--dry-run"}, 1, "missing.json"},
      {{"submit", "configs.json", "--priority", "9999"}, 2, "--priority must be an integer"},
      {{"submit", "configs.json", "--order", "shortest"},
       2,
       "--order must be rank or longest-first, got 'shortest'"},
      // 0 would mean "no limit" to the daemon: as a flag it is refused, saying what to do.
      {{"submit", "configs.json", "--max-ops", "0"},
       2,
       "--max-ops must be an integer from 1 to 1099511627776, got '0' (leave it out to profile "
       "every config)"},
      {{"submit", "configs.json", "--max-gpus", "0"},
       2,
       "--max-gpus must be an integer from 1 to 1024, got '0' (leave it out for no limit)"},
      {{"submit", "configs.json", "--layout", "nchwc"}, 2, "--layout must be auto, nchw or nhwc"},
      {{"watch", "abc"}, 2, "JOB must be a job id"},
      {{"wait", "12", "abc"}, 2, "JOB must be a job id"},
      {{"results", "1", "--format", "xml"}, 2, "--format must be table, json or csv"},
      {{"--socket", dir_.File("none.sock"), "status"}, 2, "cannot reach ckprofd"},
  };
  for (const auto& c : cases) {
    CommandResult r = Ckprof(c.args);
    EXPECT_EQ(r.exit_code, c.code) << c.args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args[0] << ": " << r.err;
  }
  // Every command has --help with an example, and says how to name the daemon's socket.
  for (const char* cmd :
       {"convert", "run", "submit", "status", "list", "watch", "wait", "results", "compare",
        "cancel", "retry", "boost", "gpus", "drain", "resume", "ping"}) {
    CommandResult h = Ckprof({cmd, "--help"});
    EXPECT_EQ(h.exit_code, 0) << cmd;
    EXPECT_NE(h.out.find("usage: ckprof " + std::string(cmd)), std::string::npos) << cmd;
    EXPECT_NE(h.out.find("ckprof " + std::string(cmd) + " "), h.out.rfind("usage:", 0)) << cmd;
    EXPECT_NE(h.out.find("--socket PATH"), std::string::npos) << cmd << ": " << h.out;
    EXPECT_NE(h.out.find("$CKPROF_SOCKET"), std::string::npos) << cmd << ": " << h.out;
  }
}

TEST_F(ClientTest, CancelAndRetry) {
  StartDaemon();
  std::string text = kSampleConfig;
  text.replace(text.find("\"N\": 32"), 7, "\"N\": 9001");  // both hang until cancelled
  text.replace(text.find("\"N\": 10"), 7, "\"N\": 9001");
  testing::WriteFile(dir_.File("hang.json"), text);
  CommandResult sub = Ckprof({"submit", "hang.json", "--profiler-path", "build/bin"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string job = sub.out.substr(0, sub.out.find('\n'));
  CommandResult c = Ckprof({"cancel", job});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  CommandResult w = Ckprof({"wait", job});
  EXPECT_EQ(w.exit_code, 1);
  auto status = FirstJob(Ckprof({"status", job, "--json"}).out);
  EXPECT_EQ((*status)["state"], "cancelled");
  EXPECT_EQ((*status)["cancelled"], 2);
  CommandResult r = Ckprof({"retry", job});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 task(s) requeued"), std::string::npos) << r.out;
  EXPECT_EQ(Ckprof({"cancel", job}).exit_code, 0);
}

// Issue 17.5: cancel of a job that has ended says so, exits 1 and leaves the job as it was.
TEST_F(ClientTest, CancelOfAFinishedOrCancelledJobIsRefused) {
  StartDaemon();
  const std::string done = Submit(kSampleConfig);
  ASSERT_FALSE(done.empty());
  ASSERT_EQ(Ckprof({"wait", done}).exit_code, 0);
  CommandResult c = Ckprof({"cancel", done});
  EXPECT_EQ(c.exit_code, 1);
  EXPECT_EQ(c.out, "");
  EXPECT_EQ(c.err, "ckprof cancel: job " + done + " already finished: nothing to cancel\n");
  auto status = FirstJob(Ckprof({"status", done, "--json"}).out);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ((*status)["state"], "finished");
  EXPECT_EQ((*status)["cancelled"], 0);
  EXPECT_EQ((*status)["succeeded"], 2);

  const std::string hung = Submit(SampleWithFaults(9001, 9001));
  ASSERT_FALSE(hung.empty());
  ASSERT_EQ(Ckprof({"cancel", hung}).exit_code, 0);
  ASSERT_EQ(Ckprof({"wait", hung}).exit_code, 1);
  CommandResult again = Ckprof({"cancel", hung});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(again.err, "ckprof cancel: job " + hung + " already cancelled: nothing to cancel\n");
}

// Issue 17.7: the results of a job still running say they are partial, and count its queued and
// running tasks as such, not as skipped.
TEST_F(ClientTest, ResultsOfAJobStillRunningArePartial) {
  StartDaemon();
  // The fwd config hangs on GPU 1; the bwd_data one waits for it (one GPU at most).
  const std::string job = Submit(SampleWithFaults(9001, 0), {"--gpus", "1", "--max-gpus", "1"});
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(testing::WatchUntil(daemon_->socket(), std::stoll(job), [](const JobSummary& s) {
                return s.counts.running() == 1;
              }).ok());
  const std::string note =
      "ckprof results: partial: job " + job + " still running (1 queued, 1 running)\n";
  CommandResult table = Ckprof({"results", job, "--format", "table"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.err, note);
  EXPECT_NE(table.out.find("2 task(s): 0 succeeded, 0 failed, 1 queued, 1 running\n"),
            std::string::npos)
      << table.out;
  CommandResult file = Ckprof({"results", job, "--format", "json"});
  EXPECT_EQ(file.exit_code, 0) << file.err;
  EXPECT_EQ(file.err, note);
  auto results = ParseJson(file.out);
  ASSERT_TRUE(results.ok()) << file.out;
  const json& stats = (*results)["stats"];
  EXPECT_EQ(stats["skipped"], 0) << stats;
  EXPECT_EQ(stats["queued"], 1) << stats;
  EXPECT_EQ(stats["running"], 1) << stats;
  EXPECT_EQ(stats["partial"], true) << stats;
  ASSERT_EQ(Ckprof({"cancel", job}).exit_code, 0);
  ASSERT_EQ(Ckprof({"wait", job}).exit_code, 1);
  CommandResult ended = Ckprof({"results", job, "--format", "table"});
  EXPECT_EQ(ended.err, "");  // ended: nothing partial about it
  EXPECT_NE(ended.out.find("2 task(s): 0 succeeded, 0 failed, 2 cancelled\n"), std::string::npos)
      << ended.out;
  CommandResult status = Ckprof({"status", job});
  EXPECT_NE(status.out.find("tasks: 0 of 2 ran: 0 succeeded, 0 failed, 2 cancelled\n"),
            std::string::npos)
      << status.out;
}

// Issue 17.12 and 17.20: status shows what a job was submitted with (table and JSON), a deferred
// job says until when it waits, and values not there are null; so are an idle GPU's.
TEST_F(ClientTest, StatusShowsTheJobsOptionsAndAbsentValuesAreNull) {
  StartDaemon();
  const std::string job = Submit(kSampleConfig, {"--not-before", "+2h", "--gpus", "1", "--max-gpus",
                                                 "1", "--timeout", "90", "--priority", "5"});
  ASSERT_FALSE(job.empty());
  CommandResult text = Ckprof({"status", job});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(std::regex_search(
      text.out, std::regex("\nwaiting until (\\d{4}-\\d\\d-\\d\\d )?\\d\\d:\\d\\d\n")))
      << text.out;
  EXPECT_NE(text.out.find("\npriority: 5\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\ngpus: 1, at most 1 at once\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\ntimeout: 1:30 per task\n"), std::string::npos) << text.out;
  auto status = FirstJob(Ckprof({"status", job, "--json"}).out);
  ASSERT_TRUE(status.ok());
  const json& s = *status;
  EXPECT_EQ(s["state"], "waiting");
  EXPECT_EQ(s["priority"], 5);
  EXPECT_EQ(s["allowed_gpus"], json({1}));
  EXPECT_EQ(s["max_gpus"], 1);
  EXPECT_EQ(s["timeout_s"], 90.0);
  EXPECT_GT(s["not_before"].get<double>(), s["submitted_at"].get<double>() + 7000) << s;
  for (const char* key : {"started_at", "finished_at", "eta_s"}) {
    EXPECT_TRUE(s[key].is_null()) << key << ": " << s;
  }
  auto gpus = ParseJson(Ckprof({"gpus", "--json"}).out);
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 2u);
  for (const auto& g : *gpus) {
    for (const char* key : {"task_id", "job_id", "owner_uid", "busy_since"}) {
      EXPECT_TRUE(g[key].is_null()) << key << ": " << g;
    }
  }
  ASSERT_EQ(Ckprof({"cancel", job}).exit_code, 0);
}

// Issue 33.2: --not-before takes the times sbatch --begin and at take; what is none is refused
// with the forms it takes.
TEST_F(ClientTest, NotBeforeTakesTheTimesUsersType) {
  StartDaemon();
  const std::string job = Submit(kSampleConfig, {"--not-before", "tomorrow 09:00"});
  ASSERT_FALSE(job.empty());
  auto status = FirstJob(Ckprof({"status", job, "--json"}).out);
  ASSERT_TRUE(status.ok());
  const double not_before = (*status)["not_before"].get<double>();
  const std::time_t t = static_cast<std::time_t>(not_before);
  std::tm local{};
  localtime_r(&t, &local);
  EXPECT_EQ(local.tm_hour, 9);
  EXPECT_EQ(local.tm_min, 0);
  EXPECT_GT(not_before, (*status)["submitted_at"].get<double>());
  CommandResult edit = Ckprof({"edit", job, "--not-before", "+1h30m"});
  EXPECT_EQ(edit.exit_code, 0) << edit.err;
  CommandResult bad = Ckprof({"edit", job, "--not-before", "25:00"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--not-before must be a time such as +30m, 09:00, tomorrow 09:00 or "
                         "2026-12-01T02:00 or now, got '25:00'"),
            std::string::npos)
      << bad.err;
  ASSERT_EQ(Ckprof({"cancel", job}).exit_code, 0);
}

// Issue 17.21: a finished job's ETA is "-", not 0:00; resume of a GPU that is not drained is
// refused; cancel and status take several jobs and exit with the worst.
TEST_F(ClientTest, EndedEtaResumeAndSeveralJobs) {
  StartDaemon();
  const std::string done = Submit(kSampleConfig);
  const std::string hung = Submit(SampleWithFaults(9001, 9001));
  ASSERT_FALSE(done.empty() || hung.empty());
  ASSERT_EQ(Ckprof({"wait", done}).exit_code, 0);
  CommandResult text = Ckprof({"status", done});
  const std::string row = text.out.substr(text.out.find('\n') + 1);
  EXPECT_EQ(row.substr(0, row.find('\n')).back(), '-') << text.out;  // no ETA once ended
  EXPECT_TRUE((*FirstJob(Ckprof({"status", done, "--json"}).out))["eta_s"].is_null());

  CommandResult resume = Ckprof({"resume", "1"});
  EXPECT_EQ(resume.exit_code, 1);
  EXPECT_EQ(resume.out, "");
  EXPECT_EQ(resume.err, "ckprof resume: GPU 1 is not drained: nothing to resume\n");

  CommandResult both = Ckprof({"status", done, hung, "999"});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_EQ(both.err, "ckprof status: no job 999\n");
  EXPECT_NE(both.out.find("\njob " + done + ":\n"), std::string::npos) << both.out;
  EXPECT_NE(both.out.find("\njob " + hung + ":\n"), std::string::npos) << both.out;
  auto list = ParseJson(Ckprof({"status", done, hung, "--json"}).out);
  ASSERT_TRUE(list.ok() && (*list)["jobs"].is_array());
  EXPECT_EQ((*list)["jobs"].size(), 2u);

  CommandResult cancel = Ckprof({"cancel", done, hung});
  EXPECT_EQ(cancel.exit_code, 1);
  EXPECT_EQ(cancel.out, "job " + hung + " cancelled\n");
  EXPECT_EQ(cancel.err, "ckprof cancel: job " + done + " already finished: nothing to cancel\n");
  EXPECT_EQ((*FirstJob(Ckprof({"status", done, "--json"}).out))["state"], "finished");
  EXPECT_EQ(Ckprof({"wait", hung}).exit_code, 1);
  EXPECT_EQ((*FirstJob(Ckprof({"status", hung, "--json"}).out))["state"], "cancelled");
}

// Issue 17.15: list and results fit the terminal (COLUMNS, as stdout is a pipe here): a long
// job name and the kernel name give way, the numbers do not; --wide shows them whole.
TEST_F(ClientTest, ListAndResultsFitTheWidthAndWideShowsEverything) {
  StartDaemon();
  const std::string name = "resnet50-channels-last-bf16-sweep-of-the-night-" + std::string(30, 'x');
  const std::string job = Submit(kSampleConfig, {"--name", name});
  ASSERT_FALSE(job.empty());
  ASSERT_EQ(Ckprof({"wait", job}).exit_code, 0);
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"list", "--all"}, {"results", job, "--format", "table"}}) {
    CommandResult fitted = Ckprof(cmd, {"COLUMNS=80"});
    ASSERT_EQ(fitted.exit_code, 0) << fitted.err;
    std::istringstream lines(fitted.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.find(" task(s)") != std::string::npos) continue;  // the summary line
      EXPECT_LE(DisplayWidth(line), 80u) << cmd[0] << ": " << line;
    }
    std::vector<std::string> wide_cmd = cmd;
    wide_cmd.push_back("--wide");
    CommandResult wide = Ckprof(wide_cmd, {"COLUMNS=80"});
    ASSERT_EQ(wide.exit_code, 0) << wide.err;
    if (cmd[0] == "list") {
      EXPECT_EQ(fitted.out.find(name), std::string::npos) << fitted.out;
      EXPECT_NE(wide.out.find(name), std::string::npos) << wide.out;
    } else {
      EXPECT_EQ(wide.out.find("..."), std::string::npos) << wide.out;
      EXPECT_NE(wide.out.find("#1"), std::string::npos) << wide.out;
    }
  }
}

// Issue 17.10: the global --socket goes before or after the command; without a value it says so.
TEST_F(ClientTest, GlobalOptionsGoBeforeOrAfterTheCommand) {
  StartDaemon();
  const std::string socket = daemon_->socket();
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--socket", socket, "list"},
                                             {"list", "--socket", socket},
                                             {"list", "--all", "--socket=" + socket},
                                             {"--socket=" + socket, "list", "--all"}}) {
    CommandResult r = Plain(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << " " << args[1] << ": " << r.err;
    EXPECT_NE(r.out.find("JOB"), std::string::npos) << r.out;
  }
  struct Case {
    std::vector<std::string> args;
    std::string error;
  } cases[] = {
      {{"list", "--socket"}, "ckprof list: --socket needs a value"},
      {{"list", "--socket", "--all"}, "ckprof list: --socket needs a value"},
      {{"list", "--socket="}, "ckprof list: --socket needs a value"},
      {{"--socket", "list"}, "ckprof: --socket needs a value"},
      {{"--socket"}, "ckprof: --socket needs a value"},
  };
  for (const auto& c : cases) {
    CommandResult r = Plain(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.error;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("unknown option"), std::string::npos) << r.err;
  }
  // A path after the command is the one used.
  CommandResult elsewhere = Plain({"ping", "--socket", dir_.File("none.sock")});
  EXPECT_EQ(elsewhere.exit_code, 2);
  EXPECT_NE(elsewhere.err.find("cannot reach ckprofd at " + dir_.File("none.sock")),
            std::string::npos)
      << elsewhere.err;
}

// Issue 17.4: into a pipe (or file), watch writes each event line as it happens, not at exit.
TEST_F(ClientTest, WatchIntoAPipeWritesEachLineAsItHappens) {
  StartDaemon();
  // GPU 0 is held by a hang, so that the watched job can only start once the watch is on.
  const std::string blocker = Submit(SampleWithFaults(9001, 0), {"--gpus", "0", "--max-ops", "1"});
  const std::string job = Submit(SampleWithFaults(0, 9001), {"--gpus", "0"});
  ASSERT_FALSE(blocker.empty() || job.empty());
  auto watch = Start({"watch", job}, "watch");
  ASSERT_TRUE(watch->WaitForLine("job " + job + " \"")) << watch->out() << watch->err();
  ASSERT_EQ(Ckprof({"cancel", blocker}).exit_code, 0);
  // The fwd config runs and ends; its line comes while the job still runs its hang.
  ASSERT_TRUE(watch->WaitForLine("finished #1 fwd (rank 1) on GPU 0")) << watch->out();
  ASSERT_TRUE(watch->WaitForLine("started  #2 bwd_data (rank 2) on GPU 0")) << watch->out();
  EXPECT_TRUE(watch->Running());
  ASSERT_EQ(Ckprof({"cancel", job}).exit_code, 0);
  EXPECT_EQ(watch->Wait(), 1) << watch->out() << watch->err();
  EXPECT_NE(watch->out().find("job " + job +
                              " cancelled: 1 of 2 ran: 1 succeeded, 0 failed, "
                              "1 cancelled"),
            std::string::npos)
      << watch->out();
}

// Issue 17.9: a daemon that dies under watch and wait is "unreachable" (2), not a failed task (1).
TEST_F(ClientTest, WatchAndWaitExitTwoWhenTheDaemonDies) {
  StartDaemon();
  const std::string job = Submit(SampleWithFaults(9001, 9001));
  ASSERT_FALSE(job.empty());
  auto watch = Start({"watch", job}, "watch");
  auto wait = Start({"wait", job}, "wait");
  ASSERT_TRUE(watch->WaitForLine("job " + job + " \"")) << watch->err();
  // wait prints nothing: once it has connected, the daemon's death is "went away" whether it
  // comes before the hello's answer or after the watch request.
  for (int i = 0; i < 3000 && !HasConnectedUnixSocket(wait->pid()) && wait->Running(); ++i) {
    usleep(10000);
  }
  ASSERT_TRUE(HasConnectedUnixSocket(wait->pid())) << wait->err();
  daemon_->Stop(SIGKILL);
  testing::KillMarkedProcesses("CKPROFD_STATE=" + daemon_->state_dir());
  for (Spawned* c : {watch.get(), wait.get()}) {
    EXPECT_EQ(c->Wait(), 2) << c->err();
    // "closed the connection" (a read: maybe with ": Connection reset by peer") or "lost the
    // connection" (a write: "Broken pipe"), then the hint.
    EXPECT_TRUE(c->err().find("closed the connection") != std::string::npos ||
                c->err().find("lost the connection") != std::string::npos)
        << c->err();
    EXPECT_NE(c->err().find("; job " + job + " is kept: see 'ckprof status " + job +
                            "' once ckprofd is back"),
              std::string::npos)
        << c->err();
    EXPECT_EQ(c->err().find("refused"), std::string::npos) << c->err();
    EXPECT_EQ(c->err().find("cannot reach"), std::string::npos) << c->err();
  }
}

// Issue 17.21: a watch begun after tasks failed lists them; each failure is shown once.
TEST_F(ClientTest, WatchBegunLateListsTheFailuresSoFar) {
  StartDaemon();
  // The fwd config fails at once; the bwd_data one hangs, so the job is still on.
  const std::string job = Submit(SampleWithFaults(9003, 9001), {"--max-gpus", "1"});
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(testing::WatchUntil(daemon_->socket(), std::stoll(job), [](const JobSummary& s) {
                return s.counts.of(TaskState::kFailed) == 1 && s.counts.running() == 1;
              }).ok());
  auto late = Start({"watch", job}, "late");
  ASSERT_TRUE(late->WaitForLine("1 task ended without success before this watch began:"))
      << late->out() << late->err();
  ASSERT_TRUE(late->WaitForLine("FAILED   #1 fwd (rank 1) on GPU ")) << late->out();
  ASSERT_EQ(Ckprof({"cancel", job}).exit_code, 0);
  EXPECT_EQ(late->Wait(), 1);
  size_t failed_lines = 0;
  for (size_t at = 0; (at = late->out().find("FAILED   #1 fwd", at)) != std::string::npos; ++at) {
    ++failed_lines;
  }
  EXPECT_EQ(failed_lines, 1u) << late->out();
  EXPECT_NE(late->out().find("cancelled #2 bwd_data (rank 2)"), std::string::npos) << late->out();
}

// Issue 17.21: wait takes several jobs; its exit code is the worst of theirs.
TEST_F(ClientTest, WaitTakesSeveralJobsAndExitsWithTheWorst) {
  StartDaemon();
  const std::string ok = Submit(kSampleConfig);
  const std::string failing = Submit(SampleWithFaults(9003, 0));
  ASSERT_FALSE(ok.empty() || failing.empty());
  CommandResult both_ok = Ckprof({"wait", ok, ok});
  EXPECT_EQ(both_ok.exit_code, 0) << both_ok.err;
  CommandResult one_failed = Ckprof({"wait", ok, failing});
  EXPECT_EQ(one_failed.exit_code, 1) << one_failed.err;
  CommandResult failed_first = Ckprof({"wait", failing, ok});
  EXPECT_EQ(failed_first.exit_code, 1) << failed_first.err;
  CommandResult missing = Ckprof({"wait", ok, "999"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("ckprof wait: job 999: no job 999"), std::string::npos) << missing.err;
  CommandResult none = Ckprof({"wait"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("missing JOB"), std::string::npos) << none.err;
  EXPECT_NE(Ckprof({"wait", "--help"}).out.find("usage: ckprof wait JOB..."), std::string::npos);
}

// Issue 17.17: "-" is stdin for submit, plain or gzipped.
TEST_F(ClientTest, SubmitReadsStdinPlainOrGzipped) {
  StartDaemon();
  const std::string ir = testing::ReadFile(DataPath("conv_repros_ir.json"));
  for (const std::string& input : {ir, *Gzip(ir)}) {
    CommandResult sub = Plain({"--socket", daemon_->socket(), "submit", "-", "--profiler-path",
                               "build/bin", "--max-ops", "3"},
                              input);
    ASSERT_EQ(sub.exit_code, 0) << sub.err;
    EXPECT_NE(sub.err.find("3 profiler run(s) from 22 record(s) of a replay-IR list"),
              std::string::npos)
        << sub.err;
    const std::string job = sub.out.substr(0, sub.out.find('\n'));
    EXPECT_EQ(Ckprof({"wait", job}).exit_code, 0);
    auto status = FirstJob(Ckprof({"status", job, "--json"}).out);
    ASSERT_TRUE(status.ok());
    EXPECT_EQ((*status)["name"], "stdin");
    EXPECT_EQ((*status)["succeeded"], 3);
  }
}

// Issue 17.14: a refused submit names the file once, with one "ckprof submit:" prefix.
TEST_F(ClientTest, SubmitErrorsNameTheFileOnce) {
  StartDaemon();
  testing::WriteFile(dir_.File("bad.json"), "[\n  oops\n]\n");
  CommandResult r = Ckprof({"submit", "bad.json", "--profiler-path", "build/bin"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "ckprof submit: bad.json: not valid JSON at line 2, column 3: syntax error while "
            "parsing value - invalid literal\n");
  CommandResult piped =
      Plain({"--socket", daemon_->socket(), "submit", "-", "--profiler-path", "build/bin"}, "{}");
  EXPECT_EQ(piped.exit_code, 1);
  EXPECT_EQ(piped.err.find("submit: submit:"), std::string::npos) << piped.err;
  EXPECT_NE(piped.err.find("ckprof submit: stdin: neither a replay-IR list"), std::string::npos)
      << piped.err;
  CommandResult gpus =
      Ckprof({"submit", "configs.json", "--gpus", "7", "--profiler-path", "build/bin"});
  EXPECT_EQ(gpus.exit_code, 1);
  EXPECT_EQ(gpus.err, "ckprof submit: this daemon drives no GPU 7\n");
}

// Issue 17.13: submit of an input with nothing to profile exits 1 with convert's reason, the
// record_shapes hint and each record's warning kept.
TEST_F(ClientTest, SubmitOfNoConvolutionKeepsTheHint) {
  StartDaemon();
  testing::WriteFile(dir_.File("shapeless.json"), kShapelessTrace);
  CommandResult r = Ckprof({"submit", "shapeless.json", "--profiler-path", "build/bin"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("record 1 (aten::cudnn_convolution) skipped: the trace has no argument "
                       "shapes (profile with record_shapes=True)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("ckprof submit: shapeless.json: no convolution to profile (its one record "
                       "was skipped); the trace may have been recorded without "
                       "record_shapes=True"),
            std::string::npos)
      << r.err;
  testing::WriteFile(dir_.File("addmm.json"), R"([{"op_name": "aten::addmm"}])");
  CommandResult ir = Ckprof({"submit", "addmm.json", "--profiler-path", "build/bin"});
  EXPECT_EQ(ir.exit_code, 1);
  EXPECT_NE(ir.err.find("ckprof submit: addmm.json: no convolution to profile (its one record "
                        "was skipped)\n"),
            std::string::npos)
      << ir.err;
  EXPECT_NE(ir.err.find("record 1 (aten::addmm) skipped: not a convolution"), std::string::npos);
}

// Issue 20.5: wait --timeout gives up with 124 and leaves the job running; wait --json prints
// the jobs as they ended.
TEST_F(ClientTest, WaitTimesOutWith124AndWaitJsonPrintsTheJobs) {
  StartDaemon();
  const std::string ok = Submit(kSampleConfig);
  const std::string hung = Submit(SampleWithFaults(9001, 0));
  ASSERT_FALSE(ok.empty() || hung.empty());
  CommandResult timed_out = Ckprof({"wait", ok, hung, "--timeout", "0.5"});
  EXPECT_EQ(timed_out.exit_code, 124) << timed_out.err;
  EXPECT_NE(timed_out.err.find("ckprof wait: job " + hung +
                               " has not ended within --timeout 0.5 s; it goes on"),
            std::string::npos)
      << timed_out.err;
  CommandResult status = Ckprof({"status", hung, "--json"});
  auto st = FirstJob(status.out);
  ASSERT_TRUE(st.ok()) << status.out;
  EXPECT_EQ((*st)["state"], "running") << status.out;
  for (const char* bad : {"0", "-2", "soon"}) {
    CommandResult r = Ckprof({"wait", ok, "--timeout", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--timeout must be a number of seconds > 0, got '"), std::string::npos)
        << r.err;
  }
  CommandResult waited = Ckprof({"wait", ok, "--json"});
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  auto w = ParseJson(waited.out);
  ASSERT_TRUE(w.ok()) << waited.out;
  ASSERT_EQ(w->size(), 1u);
  EXPECT_EQ((*w)[0]["id"], std::stoll(ok));
  EXPECT_EQ((*w)[0]["state"], "finished");
  EXPECT_EQ((*w)[0]["succeeded"], 2);
  EXPECT_EQ(Ckprof({"cancel", hung}).exit_code, 0);
}

// Issue 20.5: watch --json writes the daemon's frames, one JSON object per line, as they come.
TEST_F(ClientTest, WatchJsonWritesOneObjectPerEvent) {
  StartDaemon();
  const std::string job = Submit(kSampleConfig);
  ASSERT_FALSE(job.empty());
  CommandResult watch = Ckprof({"watch", job, "--json"});
  EXPECT_EQ(watch.exit_code, 0) << watch.err;
  std::istringstream lines(watch.out);
  std::vector<json> frames;
  for (std::string line; std::getline(lines, line);) {
    auto j = ParseJson(line);
    ASSERT_TRUE(j.ok()) << "not one JSON object per line: " << line;
    frames.push_back(*j);
  }
  ASSERT_GE(frames.size(), 1u) << watch.out;
  EXPECT_TRUE(frames.front()["ok"].get<bool>()) << watch.out;
  EXPECT_EQ(frames.front()["job"]["id"], std::stoll(job));
  // A job that had ended when the watch began has no more events; one still going ends with
  // job_finished.
  if (frames.size() > 1) {
    EXPECT_EQ(frames.back()["event"], "job_finished") << watch.out;
  }
  EXPECT_EQ(watch.out.find("\r"), std::string::npos);  // no progress bar
}

// Issue 20.5: the acting commands answer in JSON too.
TEST_F(ClientTest, ActingCommandsPrintJson) {
  StartDaemon();
  CommandResult ping = Ckprof({"ping", "--json"});
  EXPECT_EQ(ping.exit_code, 0) << ping.err;
  auto p = ParseJson(ping.out);
  ASSERT_TRUE(p.ok()) << ping.out;
  EXPECT_EQ((*p)["uid"], getuid());
  EXPECT_EQ((*p)["socket"], daemon_->socket());
  EXPECT_NE((*p)["server"].get<std::string>().find("ckprofd"), std::string::npos);
  EXPECT_EQ((*p)["features"], (json{"repeat", "task_control", "log", "edit", "clean", "on_end",
                                    "reuse", "best", "clean_jobs", "env", "hold", "after",
                                    "drain_reason", "job_timeout", "mail", "usage"}))
      << ping.out;

  const std::string hung = Submit(SampleWithFaults(9001, 9001));
  ASSERT_FALSE(hung.empty());
  CommandResult cancel = Ckprof({"cancel", hung, "999", "--json"});
  EXPECT_EQ(cancel.exit_code, 1) << cancel.err;
  auto c = ParseJson(cancel.out);
  ASSERT_TRUE(c.ok()) << cancel.out;
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ((*c)[0]["job_id"], std::stoll(hung));
  EXPECT_TRUE((*c)[0]["cancelled"].get<bool>());
  EXPECT_EQ((*c)[0]["job"]["id"], std::stoll(hung));
  EXPECT_FALSE((*c)[1]["cancelled"].get<bool>());
  EXPECT_NE((*c)[1]["error"].get<std::string>().find("no job 999"), std::string::npos);
  EXPECT_EQ(Ckprof({"wait", hung}).exit_code, 1);

  CommandResult retry = Ckprof({"retry", hung, "--json"});
  EXPECT_EQ(retry.exit_code, 0) << retry.err;
  auto r = ParseJson(retry.out);
  ASSERT_TRUE(r.ok()) << retry.out;
  EXPECT_EQ((*r)["job_id"], std::stoll(hung));
  EXPECT_EQ((*r)["requeued"], 2);
  EXPECT_EQ(Ckprof({"cancel", hung}).exit_code, 0);

  CommandResult drain = Ckprof({"drain", "1", "--json"});
  EXPECT_EQ(drain.exit_code, 0) << drain.err;
  auto d = ParseJson(drain.out);
  ASSERT_TRUE(d.ok()) << drain.out;
  EXPECT_EQ(*d, (json{{"gpu", 1}, {"drained", true}}));
  CommandResult resume = Ckprof({"resume", "1", "--json"});
  auto u = ParseJson(resume.out);
  ASSERT_TRUE(u.ok()) << resume.out;
  EXPECT_EQ(*u, (json{{"gpu", 1}, {"drained", false}}));
}

// Issue 20.2: cancel JOB#N stops one task and lets the job go on.
TEST_F(ClientTest, CancelOfOneTaskLeavesTheJobRunning) {
  StartDaemon();
  const std::string job = Submit(SampleWithFaults(9001, 9001), {"--max-gpus", "1"});
  ASSERT_FALSE(job.empty());
  CommandResult one = Ckprof({"cancel", job + "#2"});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, "job " + job + ": #2 cancelled\n");
  CommandResult status = Ckprof({"status", job, "--json"});
  auto st = FirstJob(status.out);
  ASSERT_TRUE(st.ok()) << status.out;
  EXPECT_EQ((*st)["cancelled"], 1) << status.out;
  EXPECT_EQ((*st)["state"], "running") << status.out;
  CommandResult again = Ckprof({"cancel", job + "#2"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("job " + job + " #2 already ended: nothing to cancel"),
            std::string::npos)
      << again.err;
  CommandResult missing = Ckprof({"cancel", job + "#5"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("job " + job + " has no task #5 (its tasks are #1 to #2)"),
            std::string::npos)
      << missing.err;
  CommandResult bad = Ckprof({"cancel", job + "#x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("TASK must be a task's #N"), std::string::npos) << bad.err;
  // The running one (#1), by the task too: then the job has ended.
  EXPECT_EQ(Ckprof({"cancel", job + "#1"}).exit_code, 0);
  CommandResult waited = Ckprof({"wait", job});
  EXPECT_EQ(waited.exit_code, 1);
  CommandResult ended = Ckprof({"status", job, "--json"});
  auto e = FirstJob(ended.out);
  ASSERT_TRUE(e.ok()) << ended.out;
  EXPECT_EQ((*e)["cancelled"], 2) << ended.out;
}

// Issue 20.2: retry takes the failures (--failed), named tasks however they ended, and new
// settings for the job.
TEST_F(ClientTest, RetryOfFailedOrNamedTasksWithNewSettings) {
  StartDaemon();
  const std::string job = Submit(SampleWithFaults(9003, 0));  // #1 fails, #2 succeeds
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(Ckprof({"wait", job}).exit_code, 1);
  CommandResult failed = Ckprof({"retry", job, "--failed", "--timeout", "120"});
  EXPECT_EQ(failed.exit_code, 0) << failed.err;
  EXPECT_EQ(failed.out, "job " + job + ": 1 task(s) requeued (timeout 120 s)\n");
  EXPECT_EQ(Ckprof({"wait", job}).exit_code, 1);
  CommandResult status = Ckprof({"status", job, "--json"});
  auto st = FirstJob(status.out);
  ASSERT_TRUE(st.ok()) << status.out;
  EXPECT_EQ((*st)["timeout_s"], 120) << status.out;
  EXPECT_EQ((*st)["failed"], 1) << status.out;
  // A named task runs again whatever its end: the success is measured again.
  CommandResult named = Ckprof({"retry", job, "#2", "--json"});
  EXPECT_EQ(named.exit_code, 0) << named.err;
  auto n = ParseJson(named.out);
  ASSERT_TRUE(n.ok()) << named.out;
  EXPECT_EQ((*n)["requeued"], 1) << named.out;
  EXPECT_EQ(Ckprof({"wait", job}).exit_code, 1);
  CommandResult results = Ckprof({"results", job, "--format", "json"});
  auto r = ParseJson(results.out);
  ASSERT_TRUE(r.ok()) << results.out;
  EXPECT_EQ((*r)["results"][1]["attempts"], 2) << results.out;
  EXPECT_TRUE((*r)["results"][1]["success"].get<bool>());
  // Nothing failed but #1: --failed with #2 named takes nothing.
  CommandResult none = Ckprof({"retry", job, "2", "--failed"});
  EXPECT_EQ(none.out, "job " + job + ": 0 task(s) requeued\n") << none.err;
  CommandResult missing = Ckprof({"retry", job, "3"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("has no task #3"), std::string::npos) << missing.err;
  CommandResult bad_timeout = Ckprof({"retry", job, "--timeout", "-1"});
  EXPECT_EQ(bad_timeout.exit_code, 2);
  CommandResult bad_profiler = Ckprof({"retry", job, "--profiler-path", "/nonexistent/ck"});
  EXPECT_EQ(bad_profiler.exit_code, 1);
  EXPECT_NE(bad_profiler.err.find("ckprof retry: "), std::string::npos) << bad_profiler.err;
  EXPECT_NE(bad_profiler.err.find("/nonexistent/ck"), std::string::npos) << bad_profiler.err;
}

// Issue 20.1: log shows what a task's profiler wrote (so far, while it runs); -f streams it live
// and ends with the task, also for a task that was still queued when the follow began.
TEST_F(ClientTest, LogShowsATasksOutputAndFollowStreamsItLive) {
  StartDaemon();
  // #1 hangs (what it wrote so far is there to read); #2 waits for the one GPU the job may use.
  const std::string job = Submit(SampleWithFaults(9001, 0), {"--max-gpus", "1"});
  ASSERT_FALSE(job.empty());
  auto first = Start({"log", job + "#1", "-f"}, "follow1");
  ASSERT_TRUE(first->WaitForLine("ckprofiler-emu: pid")) << first->out() << first->err();
  auto second = Start({"log", job, "2", "--follow", "--json"}, "follow2");
  ASSERT_TRUE(second->WaitForLine("\"tasks\"")) << second->err();
  CommandResult so_far = Ckprof({"log", job + "#1"});
  EXPECT_EQ(so_far.exit_code, 0) << so_far.err;
  EXPECT_NE(so_far.out.find("ckprofiler-emu: pid"), std::string::npos) << so_far.out;
  EXPECT_EQ(Ckprof({"cancel", job + "#1"}).exit_code, 0);
  EXPECT_EQ(first->Wait(), 1);  // the task did not succeed
  EXPECT_NE(first->err().find("ended cancelled"), std::string::npos) << first->err();
  // What was followed is all it wrote: what was there before, and the stored capture.
  EXPECT_EQ(first->out().rfind(so_far.out, 0), 0u) << first->out();
  EXPECT_EQ(Ckprof({"log", job + "#1"}).out, first->out());
  EXPECT_EQ(second->Wait(), 0) << second->err();
  // The stream: the queued task, its start, its output, its end.
  std::vector<json> frames;
  std::istringstream lines(second->out());
  for (std::string line; std::getline(lines, line);) {
    auto j = ParseJson(line);
    ASSERT_TRUE(j.ok()) << "not one JSON object per line: " << line;
    frames.push_back(*j);
  }
  ASSERT_GE(frames.size(), 3u) << second->out();
  EXPECT_EQ(frames.front()["tasks"][0]["state"], "queued") << second->out();
  std::string streamed = frames.front()["tasks"][0].value("stdout", "");
  bool started = false;
  for (const auto& f : frames) {
    if (f.value("event", "") == "started") started = true;
    if (f.value("event", "") == "output" && f["stream"] == "stdout") streamed += f["data"];
  }
  EXPECT_TRUE(started) << second->out();
  EXPECT_EQ(frames.back()["event"], "ended") << second->out();
  EXPECT_EQ(frames.back()["state"], "succeeded") << second->out();
  // Once ended: the stored capture, the same text as was streamed (--raw: byte for byte; by
  // default its control characters, the emulator's colours, escaped).
  CommandResult done = Ckprof({"log", job, "#2", "--raw"});
  EXPECT_EQ(done.exit_code, 0) << done.err;
  EXPECT_NE(done.out.find("avg_time"), std::string::npos) << done.out;
  EXPECT_EQ(done.out, streamed);
  CommandResult shown = Ckprof({"log", job, "#2"});
  EXPECT_EQ(shown.out, EscapeControl(streamed, LineBreaks::kKeep));
  EXPECT_NE(shown.out.find("\\e[36mvalids"), std::string::npos) << shown.out;
  CommandResult tail = Ckprof({"log", job + "#2", "--lines", "2"});
  EXPECT_EQ(tail.out, LastLines(shown.out, 2));
  EXPECT_EQ(std::count(tail.out.begin(), tail.out.end(), '\n'), 2) << tail.out;
  // A finished task followed: its output, at once, and its end as the exit status.
  CommandResult followed = Ckprof({"log", job + "#2", "-f"});
  EXPECT_EQ(followed.exit_code, 0) << followed.err;
  EXPECT_EQ(followed.out, shown.out);
  // The whole job: each task headed as tail heads files.
  CommandResult all = Ckprof({"log", job});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.out.find("==> job " + job + " #1 fwd (rank 1): cancelled"), std::string::npos)
      << all.out;
  EXPECT_NE(all.out.find("==> job " + job + " #2 bwd_data (rank 2): succeeded on GPU"),
            std::string::npos)
      << all.out;
  CommandResult as_json = Ckprof({"log", job + "#2", "--json"});
  auto j = ParseJson(as_json.out);
  ASSERT_TRUE(j.ok()) << as_json.out;
  EXPECT_EQ((*j)["tasks"][0]["stdout"], done.out);
  // Mistakes.
  CommandResult missing = Ckprof({"log", job + "#5"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("has no task #5"), std::string::npos) << missing.err;
  // The whole job followed once it has ended: as `log J` shows it, its end the exit status.
  CommandResult no_task = Ckprof({"log", job, "-f"});
  EXPECT_EQ(no_task.exit_code, 1) << no_task.err;
  EXPECT_EQ(no_task.out, all.out);
  EXPECT_EQ(Ckprof({"log", job + "#1", "3"}).exit_code, 2);
  EXPECT_EQ(Ckprof({"log", job, "x"}).exit_code, 2);
  EXPECT_EQ(Ckprof({"log", job, "--lines", "-3"}).exit_code, 2);
}

// Issue 20.4: list picks jobs as squeue and sacct do, and shows when each ended and how long
// it ran.
TEST_F(ClientTest, ListFiltersAndHistoryColumns) {
  StartDaemon();
  const std::string done = Submit(kSampleConfig);
  ASSERT_FALSE(done.empty());
  EXPECT_EQ(Ckprof({"wait", done}).exit_code, 0);
  const std::string later = Submit(kSampleConfig, {"--not-before", "+2h"});
  ASSERT_FALSE(later.empty());
  auto ids = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "list");
    args.push_back("--json");
    CommandResult r = Ckprof(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<int64_t> out;
    auto j = ParseJson(r.out);
    if (j.ok()) {
      for (const auto& job : *j) out.push_back(job["id"].get<int64_t>());
    }
    return out;
  };
  const int64_t a = std::stoll(done), b = std::stoll(later);
  EXPECT_EQ(ids({}), std::vector<int64_t>{b});  // active ones
  EXPECT_EQ(ids({"--state", "finished"}), std::vector<int64_t>{a});
  EXPECT_EQ(ids({"--state", "waiting,finished"}), (std::vector<int64_t>{a, b}));
  EXPECT_EQ(ids({"--mine", "--all"}), (std::vector<int64_t>{a, b}));
  CommandResult nobody = Ckprof({"list", "--user", "nobody-at-all", "--json"});
  EXPECT_EQ(nobody.exit_code, 1) << "a user that does not exist is said so, not an empty list";
  EXPECT_NE(nobody.err.find("no such user"), std::string::npos) << nobody.err;
  EXPECT_EQ(ids({"--since", "1h", "--limit", "1"}), std::vector<int64_t>{b});
  EXPECT_EQ(ids({"--since", "2020-01-01"}), (std::vector<int64_t>{a, b}));
  EXPECT_EQ(ids({"--since", "+1h"}), std::vector<int64_t>{});  // submitted in an hour: none
  CommandResult bad = Ckprof({"list", "--state", "done"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--state must be queued, waiting"), std::string::npos) << bad.err;
  EXPECT_EQ(Ckprof({"list", "--since", "yesterday"}).exit_code, 2);
  EXPECT_EQ(Ckprof({"list", "--limit", "0"}).exit_code, 2);
  CommandResult table = Ckprof({"list", "--all", "--wide"});
  EXPECT_NE(table.out.find("ELAPSED"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("ENDED"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("\x1b["), std::string::npos) << "colour into a pipe";
  std::istringstream rows(table.out);
  std::string header, row;
  std::getline(rows, header);
  const std::regex its_row("^ *" + done + " ");
  while (std::getline(rows, row) && !std::regex_search(row, its_row)) {
  }
  ASSERT_TRUE(std::regex_search(row, its_row)) << table.out;
  EXPECT_TRUE(std::regex_search(row, std::regex(R"( \d\d:\d\d +- *$)"))) << row;  // ended, no ETA
  EXPECT_EQ(Ckprof({"cancel", later}).exit_code, 0);
}

// Issue 20.7: 'ckprof help COMMAND' is the command's --help; states are coloured on a terminal
// unless NO_COLOR is set.
TEST_F(ClientTest, HelpCommandAndColourOnATerminal) {
  CommandResult help = Plain({"help", "submit"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_EQ(help.out, Plain({"submit", "--help"}).out);
  CommandResult top = Plain({"help"});
  for (const char* c : {"log", "edit", "clean", "help"}) {
    EXPECT_NE(top.out.find("\n  " + std::string(c) + " "), std::string::npos) << c;
  }
  CommandResult unknown = Plain({"help", "frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown command 'frobnicate'"), std::string::npos) << unknown.err;
  if (access("/usr/bin/script", X_OK) != 0) GTEST_SKIP() << "no script(1) to make a terminal";
  StartDaemon();
  const std::string job = Submit(kSampleConfig);
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(Ckprof({"wait", job}).exit_code, 0);
  const std::string list =
      BinPath("ckprof") + " --socket " + daemon_->socket() + " list --all --wide";
  CommandResult tty = RunCommand({"/usr/bin/script", "-qec", list, "/dev/null"}, {"TERM=xterm"});
  EXPECT_EQ(tty.exit_code, 0) << tty.err;
  EXPECT_NE(tty.out.find("\x1b[32mfinished\x1b[0m"), std::string::npos) << tty.out;
  CommandResult plain =
      RunCommand({"/usr/bin/script", "-qec", list, "/dev/null"}, {"TERM=xterm", "NO_COLOR=1"});
  EXPECT_NE(plain.out.find("finished"), std::string::npos) << plain.out;
  EXPECT_EQ(plain.out.find("\x1b[32m"), std::string::npos) << plain.out;
}

// Issue 20.4: status says why a job's tasks wait, as squeue's REASON does.
TEST_F(ClientTest, StatusSaysWhyAJobWaits) {
  StartDaemon();
  const std::string hung = Submit(SampleWithFaults(9001, 9001));  // both GPUs, until cancelled
  const std::string queued = Submit(kSampleConfig);
  const std::string later = Submit(kSampleConfig, {"--not-before", "+2h"});
  ASSERT_FALSE(hung.empty() || queued.empty() || later.empty());
  CommandResult q = Ckprof({"status", queued});
  const std::string me = (*ParseJson(Ckprof({"ping", "--json"}).out))["user"];
  EXPECT_NE(q.out.find("reason: waiting for GPUs 0,1, busy with job " + hung + " (" + me + ")"),
            std::string::npos)
      << q.out;
  auto l = FirstJob(Ckprof({"status", later, "--json"}).out);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ((*l)["waiting_reason"].get<std::string>().rfind("not before its start time (in ", 0),
            0u)
      << l->dump();
  EXPECT_EQ(Ckprof({"cancel", hung, later}).exit_code, 0);
  EXPECT_EQ(Ckprof({"wait", queued}).exit_code, 0);
  auto done = FirstJob(Ckprof({"status", queued, "--json"}).out);
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(done->contains("waiting_reason")) << done->dump();
}

// Issue 20.8: results show PyTorch's GPU time per call from the trace beside CK's best, and
// sort by the trace's total on request; gpus say who runs what.
TEST_F(ClientTest, ResultsShowTheTracesGpuTimeAndSortByIt) {
  StartDaemon();
  CommandResult sub = Ckprof({"submit", DataPath("conv_repros_ir.json"), "--max-ops", "6"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string job = sub.out.substr(0, sub.out.find('\n'));
  EXPECT_EQ(Ckprof({"wait", job}).exit_code, 0);
  auto j = ParseJson(Ckprof({"results", job, "--format", "json"}).out);
  ASSERT_TRUE(j.ok());
  const json& first = (*j)["results"][0];
  // The IR's first record: a backward call, 12 calls, 1164.007 us in all.
  EXPECT_DOUBLE_EQ(first["trace_gpu_time_us"].get<double>(), 1164.007) << first.dump();
  EXPECT_EQ(first["trace_count"], 12);
  CommandResult table = Ckprof({"results", job, "--format", "table", "--wide"});
  EXPECT_NE(table.out.find("trace ms calls"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" 0.097001    12 "), std::string::npos) << table.out;  // per call
  CommandResult sorted = Ckprof({"results", job, "--format", "table", "--sort", "trace"});
  EXPECT_EQ(sorted.exit_code, 0) << sorted.err;
  std::vector<double> totals;
  for (const auto& r : (*j)["results"]) totals.push_back(r["trace_gpu_time_us"].get<double>());
  std::sort(totals.rbegin(), totals.rend());
  std::istringstream rows(sorted.out);
  std::string line;
  std::getline(rows, line);  // header
  std::vector<double> shown;
  static const std::regex cells(R"(^ *#(\d+) )");
  while (std::getline(rows, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, cells)) break;
    const json& r = (*j)["results"][std::stoi(m[1]) - 1];
    shown.push_back(r["trace_gpu_time_us"].get<double>());
  }
  EXPECT_EQ(shown, totals) << sorted.out;
  EXPECT_EQ(Ckprof({"results", job, "--sort", "fastest"}).exit_code, 2);
  CommandResult csv = Ckprof({"results", job, "--format", "csv"});
  EXPECT_NE(
      csv.out.find(",trace_gpu_time_us,trace_count,reused_from_job,reused_from_task,executor,node,"
                   "executor_job_id\n"),
      std::string::npos);
  EXPECT_NE(csv.out.find(",1164.01,12,,,,,\n"), std::string::npos) << csv.out;
  // gpus: the table has the owner, model and utilisation columns (where known).
  CommandResult gpus = Ckprof({"gpus"});
  EXPECT_NE(gpus.out.find("MODEL"), std::string::npos) << gpus.out;
  EXPECT_NE(gpus.out.find("OWNER"), std::string::npos) << gpus.out;
  EXPECT_NE(gpus.out.find("UTIL"), std::string::npos) << gpus.out;
}

}  // namespace
}  // namespace ckprof
