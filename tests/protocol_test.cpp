// The wire protocol: request parsing and validation, framing helpers, content encoding.
#include "common/protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "common/base64.h"
#include "common/file_util.h"
#include "common/results_file.h"

namespace ckprof {
namespace {

// The daemon writes its events without the DOM: the same objects as ToJson, field for field.
TEST(Protocol, SummariesAndResultsWrittenDirectlyEqualTheDom) {
  JobSummary s;
  s.id = 7;
  s.owner_uid = 4000000000u;
  s.owner = "ana \"the\" admin";
  s.name = "resnet\tsweep \xc2\xb5";
  s.state = JobState::kRunning;
  s.priority = -3;
  s.total = 100;
  s.counts.at(TaskState::kQueued) = 40;
  s.counts.at(TaskState::kRunning) = 2;
  s.counts.at(TaskState::kSucceeded) = 50;
  s.counts.at(TaskState::kFailed) = 8;
  s.gpus_in_use = {0, 5};
  s.submitted_at = 1764500000.123456;
  s.started_at = 1764500001.0;
  s.eta_s = std::numeric_limits<double>::quiet_NaN();
  s.profiler = "/opt/ck/ckProfiler";
  std::string text;
  AppendJson(text, s);
  EXPECT_EQ(nlohmann::json::parse(text), ToJson(s)) << text;

  TaskResult t;
  t.task_id = 12;
  t.job_id = 7;
  t.position = 3;
  t.priority_rank = 1;
  t.operation = "profile_grouped_conv_fwd";
  t.description = "N=8 C=64";
  t.command = "ckProfiler grouped_conv_fwd 1 3 ...";
  t.state = TaskState::kCrashed;
  t.gpu = 5;
  t.attempts = 2;
  t.returncode = -11;
  t.elapsed_s = 0.25;
  t.avg_ms = 1e-5;
  t.tflops = std::numeric_limits<double>::infinity();
  t.split_k = "all";
  t.error = "SIGSEGV\n";
  text.clear();
  AppendJson(text, t);
  EXPECT_EQ(nlohmann::json::parse(text), ToJson(t)) << text;
  t.stdout_text = "Perf: 0.1 ms\n";
  t.stderr_text = "\x1b[31m";
  t.config = nlohmann::ordered_json::parse(R"({"z": 1, "a": {"b": [1.5, "x"]}})");
  text.clear();
  AppendJson(text, t);
  EXPECT_EQ(nlohmann::json::parse(text), ToJson(t)) << text;
  EXPECT_EQ(ToJson(t)["config"]["a"]["b"][0], 1.5);
  // A merged result of a repeated config, and one of its runs.
  t.repeats = RepeatStats{3, 2, 3, 1.5, 1.0, 2.0, 0.47, 0.05, true, 2, {1.0, 2.0}, {0, 1}};
  text.clear();
  AppendJson(text, t);
  EXPECT_EQ(nlohmann::json::parse(text), ToJson(t)) << text;
  auto merged = TaskResultFromJson(ToJson(t));
  ASSERT_TRUE(merged.ok()) << merged.error();
  ASSERT_TRUE(merged->repeats.has_value());
  EXPECT_EQ(merged->repeats->times_ms, (std::vector<double>{1.0, 2.0}));
  EXPECT_TRUE(merged->noisy());
  EXPECT_TRUE(ToJson(t)["run"].is_null());
  t.repeats.reset();
  t.run = 2;
  EXPECT_EQ(ToJson(t)["run"], 2);
  EXPECT_TRUE(ToJson(t)["repeats"].is_null());
}

// Issue 17.20: a value that is not there is null, never a 0 that reads as one (uid 0 is root,
// time 0 is 1970), and the readers take the null back as "not there".
TEST(Protocol, AbsentValuesAreNullAndReadBack) {
  GpuInfo idle;
  idle.index = 1;
  idle.tasks_run = 4;
  nlohmann::json g = ToJson(idle);
  for (const char* key : {"task_id", "position", "job_id", "owner_uid", "busy_since"}) {
    EXPECT_TRUE(g[key].is_null()) << key << ": " << g;
  }
  EXPECT_EQ(g["tasks_run"], 4);
  auto back = GpuInfoFromJson(g);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->task_id, 0);
  EXPECT_EQ(back->owner_uid, 0u);
  GpuInfo busy = idle;
  busy.task_id = 9;
  busy.position = 3;
  busy.job_id = 2;
  busy.owner_uid = 0;  // root's job: 0 here is a uid, not "none"
  busy.busy_since = 1764500000.5;
  g = ToJson(busy);
  EXPECT_EQ(g["owner_uid"], 0);
  EXPECT_EQ(g["position"], 3);
  EXPECT_EQ(g["busy_since"], 1764500000.5);

  JobSummary s;  // queued, never started, nothing known
  s.id = 3;
  s.state = JobState::kWaiting;
  s.allowed_gpus = {1, 2};
  s.not_before = 1764500000;
  std::string text;
  AppendJson(text, s);
  nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j, ToJson(s));
  for (const char* key : {"started_at", "finished_at", "eta_s", "max_gpus", "timeout_s"}) {
    EXPECT_TRUE(j[key].is_null()) << key << ": " << j;
  }
  EXPECT_EQ(j["not_before"], 1764500000.0);
  EXPECT_EQ(j["allowed_gpus"], nlohmann::json({1, 2}));
  EXPECT_EQ(j["timed_out"], 0);
  EXPECT_EQ(j["crashed"], 0);
  auto js = JobSummaryFromJson(j);
  ASSERT_TRUE(js.ok());
  EXPECT_EQ(js->eta_s, -1);
  EXPECT_EQ(js->started_at, 0);
  EXPECT_EQ(js->not_before, 1764500000);
  EXPECT_EQ(js->allowed_gpus, (std::vector<int>{1, 2}));

  TaskResult t;  // queued: no GPU, no times, valid instances unknown
  t.task_id = 5;
  t.state = TaskState::kQueued;
  j = ToJson(t);
  for (const char* key : {"gpu", "started_at", "ended_at", "valids"}) {
    EXPECT_TRUE(j[key].is_null()) << key << ": " << j;
  }
  auto tr = TaskResultFromJson(j);
  ASSERT_TRUE(tr.ok());
  EXPECT_EQ(tr->gpu, -1);
  EXPECT_EQ(tr->valids, -1);
}

// Issue 17.8: one vocabulary, each task counted once.
TEST(Protocol, TaskCountsCountEachTaskOnceInOneVocabulary) {
  TaskCounts c;
  using S = TaskState;
  for (S state :
       {S::kSucceeded, S::kSucceeded, S::kFailed, S::kSpawnFailed, S::kInterrupted, S::kUnsupported,
        S::kTimedOut, S::kCrashed, S::kCancelled, S::kQueued, S::kRunning}) {
    c.Add(state);
  }
  EXPECT_EQ(c.total(), 11);
  EXPECT_EQ(c.ran(), 8);
  EXPECT_EQ(c.Describe(),
            "2 succeeded, 3 failed, 1 unsupported, 1 timed out, 1 crashed, 1 cancelled, "
            "1 queued, 1 running");
  EXPECT_EQ(TaskCounts{}.Describe(), "0 succeeded, 0 failed");
}

// Issue 32.2: one table says, per outcome, its name, state, failure, retry and column.
// A result's returncode follows its kind's row: the exit code, minus the signal, -1 when no
// signal ended a stopped run, -1 when no process ran.
TEST(Protocol, ReturnCodeFollowsTheOutcomeTable) {
  using Kind = Outcome::Kind;
  EXPECT_EQ(ReturnCodeOf(Kind::kSucceeded, 0, 0), 0);
  EXPECT_EQ(ReturnCodeOf(Kind::kFailed, 3, 0), 3);
  EXPECT_EQ(ReturnCodeOf(Kind::kCrashed, 0, 11), -11);
  EXPECT_EQ(ReturnCodeOf(Kind::kTimedOut, 0, 9), -9);
  EXPECT_EQ(ReturnCodeOf(Kind::kCancelled, 0, 0), -1);
  EXPECT_EQ(ReturnCodeOf(Kind::kInterrupted, 0, 0), -1);
  EXPECT_EQ(ReturnCodeOf(Kind::kSpawnFailed, 127, 0), -1);
  EXPECT_EQ(ReturnCodeOf(std::nullopt, 5, 0), 5);
}

TEST(Protocol, OutcomeTableIsTheOneVocabulary) {
  using K = Outcome::Kind;
  struct Row {
    K kind;
    const char* name;
    bool failure, retryable;
    TaskState column;
  };
  const Row rows[] = {
      {K::kSucceeded, "succeeded", false, false, TaskState::kSucceeded},
      {K::kUnsupported, "unsupported", false, false, TaskState::kUnsupported},
      {K::kFailed, "failed", true, true, TaskState::kFailed},
      {K::kCrashed, "crashed", true, true, TaskState::kCrashed},
      {K::kTimedOut, "timed_out", true, true, TaskState::kTimedOut},
      {K::kCancelled, "cancelled", false, true, TaskState::kCancelled},
      {K::kInterrupted, "interrupted", true, true, TaskState::kFailed},
      {K::kSpawnFailed, "spawn_failed", true, true, TaskState::kFailed},
  };
  ASSERT_EQ(AllOutcomeKinds().size(), std::size(rows));
  for (const Row& r : rows) {
    EXPECT_EQ(OutcomeKindName(r.kind), r.name);
    EXPECT_EQ(ParseOutcomeKindName(r.name), r.kind) << r.name;
    EXPECT_EQ(EnumName(StateOf(r.kind)), r.name);
    EXPECT_EQ(ParseTaskState(r.name), StateOf(r.kind)) << r.name;
    EXPECT_EQ(OutcomeOf(StateOf(r.kind)), r.kind) << r.name;
    EXPECT_EQ(IsFailure(r.kind), r.failure) << r.name;
    EXPECT_EQ(Retryable(r.kind), r.retryable) << r.name;
    TaskCounts c;
    c.Add(StateOf(r.kind));
    EXPECT_EQ(c.of(r.column), 1) << r.name;
  }
  EXPECT_EQ(ParseTaskState("queued"), TaskState::kQueued);
  EXPECT_EQ(ParseTaskState("oom"), std::nullopt);  // no fallback to failed
  EXPECT_EQ(OutcomeOf(TaskState::kRunning), std::nullopt);
  EXPECT_EQ(Label(TaskState::kTimedOut), "timed out");
  // The JSON of a summary names each column as before.
  JobSummary s;
  s.counts.Add(TaskState::kTimedOut);
  s.counts.Add(TaskState::kSpawnFailed);
  const nlohmann::json j = ToJson(s);
  for (const char* key : {"succeeded", "failed", "unsupported", "timed_out", "crashed", "cancelled",
                          "queued", "running", "done", "total"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["timed_out"], 1);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_FALSE(j.contains("spawn_failed"));
}

// Five tasks, one in each state a results file may hold.
std::vector<TaskResult> TasksInEveryState() {
  std::vector<TaskResult> tasks(5);
  const TaskState states[] = {TaskState::kSucceeded, TaskState::kFailed, TaskState::kCancelled,
                              TaskState::kRunning, TaskState::kQueued};
  for (size_t i = 0; i < tasks.size(); ++i) {
    tasks[i].position = static_cast<int64_t>(i) + 1;
    tasks[i].priority_rank = tasks[i].position;
    tasks[i].state = states[i];
  }
  tasks[0].best_name = "Inst<1>";
  tasks[0].split_k = "4 (best occupancy)";
  tasks[0].valids = 3;
  tasks[0].gpu = 0;
  tasks[1].best_name = "Inst<2>";  // printed before the profiler failed: no result
  tasks[1].split_k = "2";
  tasks[1].gpu = 1;
  return tasks;
}

// Issue 17.7: the results of a job still running count its queued and running tasks as such,
// not as skipped, and say they are partial.
TEST(ResultsFile, PartialResultsCountQueuedAndRunningNotSkipped) {
  const std::vector<TaskResult> tasks = TasksInEveryState();
  auto file = ResultsFileJson(tasks, "ana", "2026-12-01T09:19:00");
  const auto& stats = file["stats"];
  EXPECT_EQ(stats["total"], 5);
  EXPECT_EQ(stats["success"], 1);
  EXPECT_EQ(stats["failed"], 1);
  EXPECT_EQ(stats["skipped"], 1);
  EXPECT_EQ(stats["cancelled"], 1);
  EXPECT_EQ(stats["running"], 1);
  EXPECT_EQ(stats["queued"], 1);
  EXPECT_EQ(stats["partial"], true);
  const std::string table = ResultsTable(tasks);
  EXPECT_NE(table.find("5 task(s): 1 succeeded, 1 failed, 1 cancelled, 1 queued, 1 running\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("skipped"), std::string::npos) << table;
}

// Issue 17.20: in the results file numbers are numbers, only a success has a best instance,
// and what is unknown is null.
TEST(ResultsFile, NumbersAreNumbersAndOnlyASuccessHasABestInstance) {
  const std::vector<TaskResult> tasks = TasksInEveryState();
  auto file = ResultsFileJson(tasks, "ana", "2026-12-01T09:19:00");
  const auto& rows = file["results"];
  EXPECT_EQ(rows[0]["split_k"], 4);
  EXPECT_EQ(rows[0]["valid_instances"], 3);
  EXPECT_EQ(rows[0]["best_instance"], "Inst<1>");
  EXPECT_TRUE(rows[1]["best_instance"].is_null()) << rows[1];
  EXPECT_TRUE(rows[1]["split_k"].is_null()) << rows[1];
  EXPECT_TRUE(rows[1]["valid_instances"].is_null()) << rows[1];
  EXPECT_TRUE(rows[4]["gpu"].is_null()) << rows[4];
  const std::string csv = ResultsCsv(tasks);
  EXPECT_EQ(csv.find("Inst<2>"), std::string::npos) << csv;
}

// Each request's typed struct, through its frame and back.
template <typename T>
T RoundTrip(const T& body, int64_t id = 0) {
  Request r = body;
  r.id = id;
  auto back = ParseRequest(RequestToJson(r).dump());
  EXPECT_TRUE(back.ok()) << back.error();
  if (!back.ok()) return T{};
  EXPECT_EQ(back->type(), T::kType);
  EXPECT_EQ(back->id, id);
  return back->template as<T>();
}

TEST(Protocol, RequestsRoundTrip) {
  SubmitRequest r;
  r.submit.content = "[]";
  r.submit.name = "sweep";
  r.submit.priority = 3;
  r.submit.gpus = {0, 2};
  r.submit.max_gpus = 1;
  r.submit.order = TaskOrder::kLongestFirst;
  r.submit.timeout_s = 30;
  r.submit.dry_run = true;
  r.submit.repeat = 5;
  const SubmitRequest back = RoundTrip(r, 7);
  EXPECT_EQ(back.submit.name, "sweep");
  EXPECT_EQ(back.submit.gpus, (std::vector<int>{0, 2}));
  EXPECT_TRUE(back.submit.dry_run);
  EXPECT_EQ(back.submit.order, TaskOrder::kLongestFirst);
  EXPECT_DOUBLE_EQ(back.submit.timeout_s, 30);
  EXPECT_EQ(back.submit.repeat, 5);

  ResultsRequest results;
  results.job_id = 4;
  results.runs = true;
  EXPECT_TRUE(RoundTrip(results).runs);

  WatchRequest watch;
  watch.job_id = 12;
  EXPECT_FALSE(RoundTrip(watch).end_only);
  watch.end_only = true;
  const WatchRequest end_only = RoundTrip(watch);
  EXPECT_EQ(end_only.job_id, 12);
  EXPECT_TRUE(end_only.end_only);

  // An edit carries only what it changes: an absent field stays unset, not 0.
  EditRequest edit;
  edit.job_id = 3;
  edit.edit.priority = -2;
  edit.edit.gpus = std::vector<int>{};
  edit.edit.not_before = 0;
  const EditRequest e = RoundTrip(edit);
  EXPECT_EQ(e.edit.priority, -2);
  EXPECT_EQ(e.edit.gpus, std::vector<int>{});
  EXPECT_EQ(e.edit.not_before, 0.0);
  EXPECT_FALSE(e.edit.max_gpus.has_value());
  EXPECT_FALSE(e.edit.timeout_s.has_value());
  EXPECT_FALSE(e.edit.name.has_value());
  EXPECT_FALSE(e.edit.empty());
  auto none = ParseRequest(R"({"type":"edit","job_id":3,"priority":null})");
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_TRUE(none->as<EditRequest>().edit.empty());

  LogRequest log;
  log.job_id = 5;
  log.tasks = {2};
  log.follow = true;
  log.lines = 20;
  const LogRequest l = RoundTrip(log);
  EXPECT_EQ(l.tasks, std::vector<int>{2});
  EXPECT_TRUE(l.follow);
  EXPECT_EQ(l.lines, 20);

  CleanRequest clean;
  clean.older_than_s = 86400;
  clean.all = true;
  const CleanRequest c = RoundTrip(clean);
  EXPECT_EQ(c.older_than_s, 86400);
  EXPECT_TRUE(c.all);

  // The wire is as it was: the same names, the same JSON.
  CancelRequest cancel;
  cancel.job_id = 9;
  cancel.tasks = {1, 4};
  Request framed = cancel;
  framed.id = 3;
  EXPECT_EQ(RequestToJson(framed).dump(), R"({"id":3,"job_id":9,"tasks":[1,4],"type":"cancel"})");
  ListRequest list;
  list.all = true;
  EXPECT_EQ(RequestToJson(list).dump(), R"({"all":true,"id":0,"job_id":0,"type":"list"})");
}

// Only watch and log --follow are answered by a stream; the request says so, not the server.
TEST(Protocol, AStreamingRequestDeclaresIt) {
  WatchRequest watch;
  watch.end_only = true;
  ASSERT_TRUE(StreamOf(watch).has_value());
  EXPECT_TRUE(StreamOf(watch)->end_only);
  LogRequest log;
  EXPECT_FALSE(StreamOf(log).has_value());
  log.follow = true;
  EXPECT_TRUE(StreamOf(log).has_value());
  EXPECT_FALSE(StreamOf(StatusRequest{}).has_value());
  for (int t = 0; t < static_cast<int>(std::variant_size_v<RequestBody>); ++t) {
    const std::string_view name = RequestTypeName(static_cast<RequestType>(t));
    EXPECT_EQ(ParseRequestTypeName(name), static_cast<RequestType>(t)) << name;
  }
}

// What an older daemon would misread (it ignores fields it does not know) needs a feature.
TEST(Protocol, RequestsThatAnOlderDaemonWouldMisreadNeedAFeature) {
  CancelRequest cancel;
  cancel.job_id = 7;
  EXPECT_EQ(RequiredFeature(cancel), "");
  cancel.tasks = {3};
  EXPECT_EQ(RequiredFeature(cancel), "task_control");
  RetryRequest retry;
  EXPECT_EQ(RequiredFeature(retry), "");
  retry.timeout_s = 60;
  EXPECT_EQ(RequiredFeature(retry), "task_control");
  SubmitRequest submit;
  EXPECT_EQ(RequiredFeature(submit), "");
  submit.submit.repeat = 3;
  EXPECT_EQ(RequiredFeature(submit), "repeat");
  submit.submit.env = "A=1";  // an older daemon would run the job without it
  EXPECT_EQ(RequiredFeature(submit), "env");
  EXPECT_EQ(RequiredFeature(LogRequest{}), "log");
  EXPECT_EQ(RequiredFeature(EditRequest{}), "edit");
  EXPECT_EQ(RequiredFeature(CleanRequest{}), "clean");
  for (const char* f : {"repeat", "task_control", "log", "edit", "clean", "on_end", "env"}) {
    EXPECT_NE(std::find(kFeatures.begin(), kFeatures.end(), f), kFeatures.end()) << f;
  }
}

TEST(Protocol, BadRequestsNameTheProblem) {
  struct Case {
    const char* frame;
    const char* expect;
  } cases[] = {
      {"{", "malformed request: not valid JSON at line 1"},
      {"[1,2]", "a request must be a JSON object"},
      {R"({"id":1})", "field 'type' is missing"},
      {R"({"type":"explode"})", "unknown request type 'explode'"},
      {R"({"type":"cancel"})", "field 'job_id' is missing"},
      {R"({"type":"cancel","job_id":-4})", "field 'job_id' must be between 1"},
      {R"({"type":"cancel","job_id":"4"})", "field 'job_id' must be an integer"},
      {R"({"type":"status","job_id":9223372036854775808})", "field 'job_id'"},
      {R"({"type":"submit"})", "field 'content'"},
      {R"({"type":"submit","content":"x","gpus":[0,-1]})", "field 'gpus'"},
      {R"({"type":"submit","content":"x","priority":1e9})", "field 'priority'"},
      {R"({"type":"submit","content":"x","content_encoding":"zip"})", "content_encoding"},
      {R"({"type":"submit","content":"x","order":"shortest"})",
       "order must be \"rank\" or \"longest-first\", got 'shortest'"},
      {R"({"type":"submit","content":"x","repeat":0})", "field 'repeat' must be between 1"},
      {R"({"type":"submit","content":"x","repeat":1001})", "field 'repeat' must be between 1"},
      {R"({"type":"drain"})", "field 'gpu' is missing"},
      {R"({"type":"watch","job_id":3,"end_only":"yes"})", "field 'end_only'"},
      {R"({"type":"edit","job_id":3,"priority":5000})", "field 'priority' must be between"},
      {R"({"type":"edit","job_id":3,"gpus":"0-3"})", "field 'gpus' must be a list"},
      {R"({"type":"edit","job_id":3,"name":7})", "field 'name' must be a string"},
      {R"({"type":"log"})", "field 'job_id' is missing"},
      {R"({"type":"log","job_id":1,"lines":-1})", "field 'lines' must be between 0"},
      {R"({"type":"clean","older_than_s":-5})", "field 'older_than_s' is out of range"},
  };
  for (const auto& c : cases) {
    auto r = ParseRequest(c.frame);
    ASSERT_FALSE(r.ok()) << c.frame;
    EXPECT_NE(r.error().find(c.expect), std::string::npos) << c.frame << " -> " << r.error();
  }
  std::string deep(100000, '[');
  auto r = ParseRequest(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("nested deeper"), std::string::npos) << r.error();
}

TEST(Protocol, FrameReplacesInvalidUtf8) {
  nlohmann::json j = {{"error", std::string("bad \xff byte")}};
  std::string f = Frame(j);
  EXPECT_EQ(f.back(), '\n');
  EXPECT_EQ(f.find('\n'), f.size() - 1);
  EXPECT_FALSE(nlohmann::json::parse(f, nullptr, false).is_discarded());
}

TEST(Protocol, Base64RoundTripAndErrors) {
  for (const std::string& s :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto back = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(Base64Encode("Man"), "TWFu");
  EXPECT_EQ(Base64Encode("Ma"), "TWE=");
  EXPECT_FALSE(Base64Decode("TW*u").ok());
}

TEST(Protocol, SubmitContentTravelsCompressedWhenLarge) {
  SubmitOptions s;
  ASSERT_TRUE(EncodeSubmitContent("[1]", &s).ok());
  EXPECT_EQ(s.content, "[1]");
  EXPECT_TRUE(s.content_encoding.empty());
  std::string big(3u << 20, ' ');
  big[0] = '[';
  big.back() = ']';
  ASSERT_TRUE(EncodeSubmitContent(big, &s).ok());
  EXPECT_EQ(s.content_encoding, "gzip+base64");
  EXPECT_LT(s.content.size(), big.size() / 10);
  auto decoded = DecodeSubmitContent(s);
  ASSERT_TRUE(decoded.ok());
  auto plain = Gunzip(*decoded);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, big);
  s.content = Base64Encode("not gzip");
  EXPECT_FALSE(DecodeSubmitContent(s).ok());
  // From bytes the caller keeps (a mapped file): the same encodings.
  SubmitOptions from;
  ASSERT_TRUE(EncodeSubmitContentFrom(big, &from).ok());
  EXPECT_EQ(from.content_encoding, "gzip+base64");
  EXPECT_EQ(*Gunzip(*DecodeSubmitContent(from)), big);
  ASSERT_TRUE(EncodeSubmitContentFrom("[1]", &from).ok());
  EXPECT_EQ(from.content, "[1]");
  EXPECT_TRUE(from.content_encoding.empty());
  const std::string gz = *Gzip("[2]");
  ASSERT_TRUE(EncodeSubmitContentFrom(gz, &from).ok());
  EXPECT_EQ(from.content_encoding, "gzip+base64");
  EXPECT_EQ(*DecodeSubmitContent(from), gz);
}

}  // namespace
}  // namespace ckprof
