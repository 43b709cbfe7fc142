// Security: the admin's limits hold against plain users (issue 30 items 7 and 8, issue 31
// items 9 and 14). Real users drive a root ckprofd with the real client: a plain user cannot
// lift the time limit (submit, edit, retry, run --timeout) nor queue without bound (runs, jobs,
// also through retry), her tasks run on at most max_gpus_per_user GPUs at once while another
// user's run beside them, submit and edit take one priority rule, and a daemon without a
// config has a 1800 s timeout. Another user's `status` is measured during each attack
// (VictimProbe).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/multi_user.h"
#include "tests/util/requests.h"
#include "tests/util/users.h"
#include "tests/util/victim_probe.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::CommandResult;
using testing::SystemUser;
using testing::VictimFigures;
using testing::VictimProbe;

// A config that lets every local user reach the socket, with `keys` ("" = nothing else).
std::string Config(const std::string& keys = "") {
  return R"({"socket_mode": "0666")" + (keys.empty() ? "" : ", " + keys) + "}";
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class SecurityLimitsTest : public testing::MultiUserDaemonTest {
 protected:
  // `status --json` of the jobs named: the first of them; of none: the whole answer (the
  // jobs and "you").
  json StatusJson(const SystemUser* user, const std::vector<std::string>& jobs = {}) {
    std::vector<std::string> args = {"status", "--json"};
    args.insert(args.end(), jobs.begin(), jobs.end());
    CommandResult r = Ckprof(user, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    if (jobs.empty() || j.is_discarded()) return j;
    EXPECT_EQ(j["jobs"].size(), 1u) << r.out;
    return j["jobs"].empty() ? json() : j["jobs"][0];
  }
};

// 30.7: a plain user's --timeout is at most max_timeout and never none; an admin's is anything.
TEST_F(SecurityLimitsTest, PlainUserCannotLiftTheTimeLimit) {
  SystemUser alice(testing::UniqueName("ckl", "a")), bob(testing::UniqueName("ckl", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0-1", Config(R"("timeout": 600, "max_timeout": 3600)")));
  VictimProbe probe(bob, daemon_.socket());
  const std::string configs = testing::FwdConfigsText(2);
  const std::string later = "+2h";  // the jobs wait: their settings are looked at, not run
  std::string err;
  EXPECT_EQ(SubmitAs(&alice, configs, {"--timeout", "0"}, &err), 0);
  EXPECT_TRUE(Has(err,
                  "--timeout 0 (no limit) is for admins only; this daemon's max_timeout is "
                  "3600 s"))
      << err;
  EXPECT_EQ(SubmitAs(&alice, configs, {"--timeout", "10000000"}, &err), 0);
  EXPECT_TRUE(Has(err, "--timeout 10000000 is above this daemon's max_timeout of 3600 s")) << err;
  // run passes its --timeout through submit: the same rule.
  CommandResult run = Ckprof(&alice, {"run", ReadableFile(configs), "--timeout", "0", "--no-save"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(Has(run.err, "--timeout 0 (no limit) is for admins only")) << run.err;
  EXPECT_TRUE(testing::ReadEmuRuns(emu_log_).empty()) << "a refused run ran";

  const int64_t job = SubmitAs(&alice, configs, {"--timeout", "3600", "--not-before", later}, &err);
  ASSERT_GT(job, 0) << err;
  const std::string id = std::to_string(job);
  EXPECT_EQ(StatusJson(&alice, {id})["timeout_s"], 3600);
  CommandResult edit = Ckprof(&alice, {"edit", id, "--timeout", "10000000"});
  EXPECT_EQ(edit.exit_code, 1);
  EXPECT_TRUE(Has(edit.err, "--timeout 10000000 is above this daemon's max_timeout of 3600 s"))
      << edit.err;
  edit = Ckprof(&alice, {"edit", id, "--timeout", "0"});
  EXPECT_EQ(edit.exit_code, 1);
  EXPECT_TRUE(Has(edit.err, "--timeout 0 (no limit) is for admins only")) << edit.err;
  CommandResult retry = Ckprof(&alice, {"retry", id, "--timeout", "0"});
  EXPECT_EQ(retry.exit_code, 1);
  EXPECT_TRUE(Has(retry.err, "--timeout 0 (no limit) is for admins only")) << retry.err;
  EXPECT_EQ(StatusJson(&alice, {id})["timeout_s"], 3600) << "a refused edit changed the job";
  edit = Ckprof(&alice, {"edit", id, "--timeout", "default"});
  EXPECT_EQ(edit.exit_code, 0) << edit.err;
  EXPECT_EQ(StatusJson(&alice, {id})["timeout_s"], 600);

  // An admin (root) may lift it: on her job, and on his own.
  edit = Ckprof(nullptr, {"edit", id, "--timeout", "10000000"});
  EXPECT_EQ(edit.exit_code, 0) << edit.err;
  EXPECT_EQ(StatusJson(&alice, {id})["timeout_s"], 10000000);
  const int64_t own = SubmitAs(nullptr, configs, {"--timeout", "0", "--not-before", later}, &err);
  ASSERT_GT(own, 0) << err;
  EXPECT_TRUE(StatusJson(nullptr, {std::to_string(own)})["timeout_s"].is_null());
  // The limit is shown to the user.
  EXPECT_EQ(StatusJson(&alice)["you"]["max_timeout_s"], 3600);
  testing::ExpectVictimServed(probe.Stop(), "the timeout attempts");
}

// 31.14: without a timeout in the config it is 1800 s, and a plain user may not exceed it.
TEST_F(SecurityLimitsTest, DefaultTimeoutIs1800WithoutAConfig) {
  SystemUser alice(testing::UniqueName("ckl", "a"));
  ASSERT_TRUE(alice.ok());
  Start(EmulatorOptions("0", Config()));
  std::string err;
  const int64_t job = SubmitAs(&alice, testing::FwdConfigsText(1), {"--not-before", "+2h"}, &err);
  ASSERT_GT(job, 0) << err;
  EXPECT_EQ(StatusJson(&alice, {std::to_string(job)})["timeout_s"], 1800);
  CommandResult text = Ckprof(&alice, {"status", std::to_string(job)});
  EXPECT_TRUE(Has(text.out, "\ntimeout: 30:00 per task\n")) << text.out;
  EXPECT_EQ(StatusJson(&alice)["you"]["max_timeout_s"], 1800);
  EXPECT_EQ(SubmitAs(&alice, testing::FwdConfigsText(1), {"--timeout", "1801"}, &err), 0);
  EXPECT_TRUE(Has(err, "--timeout 1801 is above this daemon's max_timeout of 1800 s")) << err;
  CommandResult help = testing::RunCommand({testing::SharedBinPath("ckprofd"), "--help"});
  EXPECT_TRUE(Has(help.out, "(default 1800)")) << help.out;
}

// 30.8: the default run cap refuses a 2,000,000-run submit before its runs are made; the
// victim's status is served meanwhile and nothing was queued.
TEST_F(SecurityLimitsTest, HugeSubmitIsRefusedByTheDefaultRunCap) {
  SystemUser alice(testing::UniqueName("ckl", "a")), bob(testing::UniqueName("ckl", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0", Config()));
  VictimProbe probe(bob, daemon_.socket());
  std::string err;
  // 2,000 configs x --repeat 1000: 2,000,000 runs.
  EXPECT_EQ(SubmitAs(&alice, testing::FwdConfigsText(2000), {"--repeat", "1000"}, &err), 0);
  EXPECT_TRUE(Has(err, "submit refused: " + alice.name() +
                           " would have 2,000,000 queued runs (0 now, 2,000,000 more asked); "
                           "this daemon allows 1,000,000 per user (max_queued_runs_per_user)"))
      << err;
  testing::ExpectVictimServed(probe.Stop(), "a 2,000,000-run submit");
  json status = StatusJson(&alice);
  EXPECT_TRUE(status["jobs"].empty()) << status.dump();
  EXPECT_EQ(status["you"]["queued_runs"], 0);
  EXPECT_EQ(status["you"]["max_queued_runs"], 1000000);
  EXPECT_EQ(status["you"]["max_jobs"], 1000);
  EXPECT_TRUE(status["you"]["max_gpus"].is_null());
}

// 30.8: a user at her run or job cap is refused with the limit named (retry of a cancelled job
// too); an admin is exempt; status and list show her use against the limits.
TEST_F(SecurityLimitsTest, QueueCapsNameTheLimitAndSpareAdmins) {
  SystemUser alice(testing::UniqueName("ckl", "a")), bob(testing::UniqueName("ckl", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0", Config(R"("max_queued_runs_per_user": 10, "max_jobs_per_user": 3)")));
  VictimProbe probe(bob, daemon_.socket());
  const std::vector<std::string> later = {"--not-before", "+2h"};
  std::string err;
  const int64_t first = SubmitAs(&alice, testing::FwdConfigsText(6), later, &err);
  ASSERT_GT(first, 0) << err;
  EXPECT_EQ(SubmitAs(&alice, testing::FwdConfigsText(6), later, &err), 0);
  EXPECT_TRUE(Has(err, "submit refused: " + alice.name() +
                           " would have 12 queued runs (6 now, 6 more asked); this daemon allows "
                           "10 per user (max_queued_runs_per_user)"))
      << err;
  // --repeat counts: 2 configs x 3 runs.
  EXPECT_EQ(
      SubmitAs(&alice, testing::FwdConfigsText(2), {"--repeat", "3", "--not-before", "+2h"}, &err),
      0);
  EXPECT_TRUE(Has(err, "would have 12 queued runs")) << err;
  ASSERT_GT(SubmitAs(&alice, testing::FwdConfigsText(2), later, &err), 0) << err;
  ASSERT_GT(SubmitAs(&alice, testing::FwdConfigsText(1), later, &err), 0) << err;
  EXPECT_EQ(SubmitAs(&alice, testing::FwdConfigsText(1), later, &err), 0);
  EXPECT_TRUE(Has(err, "submit refused: " + alice.name() +
                           " has 3 jobs that have not ended; this daemon allows 3 per user "
                           "(max_jobs_per_user)"))
      << err;
  // Her use against the limits: status (text and JSON) and list.
  json you = StatusJson(&alice)["you"];
  EXPECT_EQ(you["jobs"], 3);
  EXPECT_EQ(you["queued_runs"], 9);
  EXPECT_EQ(you["gpus_in_use"], 0);
  EXPECT_EQ(you["max_jobs"], 3);
  EXPECT_EQ(you["max_queued_runs"], 10);
  EXPECT_EQ(you["admin"], false);
  const std::string line =
      "you: 3 active jobs, 9 queued runs, 0 GPUs in use\nlimits: 3 active jobs, 10 runs, no GPU "
      "cap, --timeout "
      "up to 1,800 s\n";
  CommandResult status = Ckprof(&alice, {"status"});
  EXPECT_TRUE(Has(status.out, line)) << status.out;
  CommandResult list = Ckprof(&alice, {"list"});
  EXPECT_TRUE(Has(list.out, line)) << list.out;
  // bob's use is his own.
  EXPECT_EQ(StatusJson(&bob)["you"]["jobs"], 0);

  // Cancelled, her first job's 6 runs no longer count; a retry would queue them again.
  ASSERT_EQ(Ckprof(&alice, {"cancel", std::to_string(first)}).exit_code, 0);
  ASSERT_TRUE(testing::WaitJobEnd(daemon_.socket(), first).ok());
  ASSERT_GT(SubmitAs(&alice, testing::FwdConfigsText(4), later, &err), 0) << err;  // 7 runs
  CommandResult retry = Ckprof(&alice, {"retry", std::to_string(first)});
  EXPECT_EQ(retry.exit_code, 1);
  EXPECT_TRUE(Has(retry.err, "retry refused: " + alice.name() + " has 3 jobs that have not ended"))
      << retry.err;
  EXPECT_EQ(StatusJson(&alice, {std::to_string(first)})["state"], "cancelled");

  // An admin is exempt: 20 runs at once, and the line says so.
  ASSERT_GT(SubmitAs(nullptr, testing::FwdConfigsText(20), later, &err), 0) << err;
  EXPECT_TRUE(Has(Ckprof(nullptr, {"status"}).out,
                  "you: 1 active job, 20 queued runs, 0 GPUs in use\nlimits (admin): no job or run "
                  "cap, no GPU cap, any --timeout\n"));
  testing::ExpectVictimServed(probe.Stop(), "submits at the caps");
}

// 30.8: retry counts runs too (jobs cap out of the way).
TEST_F(SecurityLimitsTest, RetryCannotQueuePastTheRunCap) {
  SystemUser alice(testing::UniqueName("ckl", "a"));
  ASSERT_TRUE(alice.ok());
  Start(EmulatorOptions("0", Config(R"("max_queued_runs_per_user": 10)")));
  std::string err;
  const int64_t first = SubmitAs(&alice, testing::FwdConfigsText(6), {"--not-before", "+2h"}, &err);
  ASSERT_GT(first, 0) << err;
  ASSERT_EQ(Ckprof(&alice, {"cancel", std::to_string(first)}).exit_code, 0);
  ASSERT_TRUE(testing::WaitJobEnd(daemon_.socket(), first).ok());
  ASSERT_GT(SubmitAs(&alice, testing::FwdConfigsText(6), {"--not-before", "+2h"}, &err), 0) << err;
  CommandResult retry = Ckprof(&alice, {"retry", std::to_string(first)});
  EXPECT_EQ(retry.exit_code, 1);
  EXPECT_TRUE(Has(retry.err, "retry refused: " + alice.name() +
                                 " would have 12 queued runs (6 now, 6 more asked); this daemon "
                                 "allows 10 per user (max_queued_runs_per_user)"))
      << retry.err;
  EXPECT_EQ(StatusJson(&alice, {std::to_string(first)})["state"], "cancelled");
  // Within the cap it is taken: one task.
  retry = Ckprof(&alice, {"retry", std::to_string(first), "1"});
  EXPECT_EQ(retry.exit_code, 0) << retry.err;
}

// 30.8: with max_gpus_per_user 1 on 4 GPUs, alice's 8 tasks run one at a time while bob's use
// the other GPUs, and `status J` says why hers wait.
TEST_F(SecurityLimitsTest, GpuCapRunsAUsersTasksOneAtATime) {
  SystemUser alice(testing::UniqueName("ckl", "a")), bob(testing::UniqueName("ckl", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0-3", Config(R"("max_gpus_per_user": 1)")));
  VictimProbe probe(bob, daemon_.socket());
  std::string err;
  // Her first task hangs (the emulator's batch size 9001) until she cancels it.
  auto configs = json::parse(testing::FwdConfigsText(8));
  configs[0]["profiler_args"]["N"] = 9001;
  const int64_t hers = SubmitAs(&alice, configs.dump(2), {}, &err);
  ASSERT_GT(hers, 0) << err;
  const std::string id = std::to_string(hers);
  auto running = testing::WatchUntil(daemon_.socket(), hers,
                                     [](const JobSummary& s) { return s.counts.running() > 0; });
  ASSERT_TRUE(running.ok()) << running.error();
  // The emulator logs its start a moment after the daemon reports the task running: bob submits
  // once it has, so that his runs' starts come after it in the log (CI once saw one before).
  ASSERT_EQ(testing::WaitForEmuRuns(emu_log_, 1).size(), 1u);
  // bob's 6 tasks run beside it, on the other GPUs, and end.
  const int64_t his = SubmitAs(&bob, testing::FwdConfigsText(6), {}, &err);
  ASSERT_GT(his, 0) << err;
  auto his_end = testing::WaitJobEnd(daemon_.socket(), his);
  ASSERT_TRUE(his_end.ok()) << his_end.error();
  EXPECT_EQ(his_end->counts.succeeded(), 6);
  json status = StatusJson(&alice, {id});
  EXPECT_EQ(status["running"], 1) << status.dump();
  EXPECT_EQ(status["queued"], 7) << status.dump();
  const std::string reason = status.value("waiting_reason", "");
  EXPECT_TRUE(Has(reason, alice.name() + " is at this daemon's per-user GPU limit: 1 of " +
                              alice.name() +
                              "'s tasks running, at most 1 at once (max_gpus_per_user)"))
      << reason;
  EXPECT_EQ(StatusJson(&alice)["you"]["gpus_in_use"], 1);
  EXPECT_TRUE(Has(Ckprof(&alice, {"status", id}).out, "reason: " + reason)) << reason;
  // (The emulator logs microseconds since the epoch; a cancelled run logs no end: it ended
  // after this.)
  const double cancelled_at =
      std::chrono::duration<double, std::micro>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  ASSERT_EQ(Ckprof(&alice, {"cancel", id + "#1"}).exit_code, 0);
  auto end = testing::WaitJobEnd(daemon_.socket(), hers);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->counts.succeeded(), 7);
  testing::ExpectVictimServed(probe.Stop(), "a capped user's 8 tasks");

  // From the emulator's log: hers never overlap; each of his overlaps her hung one.
  std::vector<testing::EmuRun> runs = testing::ReadEmuRuns(emu_log_), mine, theirs;
  for (const auto& r : runs) {
    if (r.uid == static_cast<int>(alice.uid())) mine.push_back(r);
    if (r.uid == static_cast<int>(bob.uid())) theirs.push_back(r);
  }
  ASSERT_EQ(mine.size(), 8u);
  ASSERT_EQ(theirs.size(), 6u);
  const testing::EmuRun& hung = mine.front();
  ASSERT_EQ(hung.end, 0) << "her first run was to hang until cancelled";
  auto end_of = [&](const testing::EmuRun& r) { return r.end > 0 ? r.end : cancelled_at; };
  int most = 0;
  for (const auto& a : mine) {
    int at_once = 0;
    for (const auto& b : mine) {
      if (b.start <= a.start && a.start < end_of(b)) ++at_once;
    }
    most = std::max(most, at_once);
  }
  std::cout << "alice's tasks at once, at most: " << most << "\n";
  EXPECT_EQ(most, 1) << "alice ran more than max_gpus_per_user tasks at once";
  for (const auto& b : theirs) {
    EXPECT_GT(b.start, hung.start);
    EXPECT_LT(b.start, cancelled_at) << "bob's task waited for alice's";
    EXPECT_NE(b.gpu, hung.gpu);
  }
}

// 31.9: one priority rule: any owner may set any priority -1000..1000 at submit and at edit
// (it orders her own jobs only); outside it both refuse alike; another user may not edit it.
TEST_F(SecurityLimitsTest, PriorityRuleIsTheSameForSubmitAndEdit) {
  SystemUser alice(testing::UniqueName("ckl", "a")), bob(testing::UniqueName("ckl", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0", Config()));
  std::string err;
  const int64_t job = SubmitAs(&alice, testing::FwdConfigsText(1),
                               {"--priority", "10", "--not-before", "+2h"}, &err);
  ASSERT_GT(job, 0) << err;
  const std::string id = std::to_string(job);
  EXPECT_EQ(StatusJson(&alice, {id})["priority"], 10);
  for (const char* p : {"5", "20", "-7", "1000"}) {
    CommandResult edit = Ckprof(&alice, {"edit", id, "--priority", p});
    EXPECT_EQ(edit.exit_code, 0) << p << ": " << edit.err;
    EXPECT_EQ(StatusJson(&alice, {id})["priority"], std::stoi(p));
  }
  CommandResult submit =
      Ckprof(&alice, {"submit", ReadableFile(testing::FwdConfigsText(1)), "--priority", "1001"});
  CommandResult edit = Ckprof(&alice, {"edit", id, "--priority", "1001"});
  EXPECT_EQ(submit.exit_code, 2);
  EXPECT_EQ(edit.exit_code, 2);
  EXPECT_TRUE(Has(submit.err, "--priority must be an integer from -1000 to 1000")) << submit.err;
  EXPECT_TRUE(Has(edit.err, "--priority must be an integer from -1000 to 1000")) << edit.err;
  CommandResult by_bob = Ckprof(&bob, {"edit", id, "--priority", "-1"});
  EXPECT_EQ(by_bob.exit_code, 1);
  EXPECT_TRUE(Has(by_bob.err, "only its owner or an admin may edit it")) << by_bob.err;
  EXPECT_EQ(StatusJson(&alice, {id})["priority"], 1000);
}

}  // namespace
}  // namespace ckprof
