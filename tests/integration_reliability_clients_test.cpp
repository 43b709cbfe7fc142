// Reliability: clients that make mistakes or misbehave on purpose — malformed, truncated, huge,
// deeply nested, wrong-typed and invalid-UTF-8 frames; numbers out of range; broken submitted
// files; frames over the cap; clients that say nothing or one byte a second; 200 clients at
// once; clients that vanish mid-answer. Each gets a clear error (or is timed out) and the
// daemon, and everyone else, goes on.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/base64.h"
#include "common/file_util.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/raw_client.h"
#include "tests/util/requests.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::LaunchedDaemon;
using testing::RawClient;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class ReliabilityClientsTest : public testing::EmulatorDaemonTest {
 protected:
  // A greeted raw connection.
  void Greeted(RawClient* c) {
    ASSERT_TRUE(c->Connect(daemon_.socket())) << std::strerror(errno);
    ASSERT_TRUE(c->Hello());
  }
};

struct FrameCase {
  std::string name;
  std::string frame;  // sent as is, then '\n'
  std::string error;  // a part of the expected error message
};

std::string Nested(size_t depth, char open, const std::string& inner, char close) {
  return std::string(depth, open) + inner + std::string(depth, close);
}

TEST_F(ReliabilityClientsTest, BadFramesEachGetAClearErrorAndTheConnectionGoesOn) {
  Start();
  const std::string big_name(300, 'n');
  std::string nested_objects;
  for (int i = 0; i < 2000; ++i) nested_objects += "{\"a\":";
  nested_objects += "1" + std::string(2000, '}');
  const FrameCase cases[] = {
      // Malformed and truncated JSON.
      {"truncated", R"({"type":)", "malformed request: not valid JSON at line 1, column 9"},
      {"garbage", "not json at all", "malformed request: not valid JSON at line 1, column"},
      {"NUL then a request", std::string("{\"type\":\"ping\"}\0{\"type\":\"gpus\"}", 31),
       "not valid JSON at line 1, column 16: a NUL byte"},
      {"unterminated string", R"({"type":"ping)", "not valid JSON"},
      {"trailing garbage", R"({"type":"ping"} x)", "not valid JSON"},
      {"NaN literal", R"({"type":"ping","id":NaN})", "not valid JSON"},
      {"NUL byte", std::string("{\"type\":\"ping\"}\0", 16), "a NUL byte"},
      // Wrong shapes and types.
      {"array", "[]", "a request must be a JSON object"},
      {"string", R"("ping")", "a request must be a JSON object"},
      {"null", "null", "a request must be a JSON object"},
      {"no type", "{}", "field 'type' is missing or not a string"},
      {"numeric type", R"({"type":5})", "field 'type' is missing or not a string"},
      {"unknown type", R"({"type":"explode"})", "unknown request type 'explode'"},
      {"string job_id", R"({"type":"status","job_id":"1"})",
       "request field 'job_id' must be an integer"},
      {"fractional job_id", R"({"type":"status","job_id":1.5})",
       "request field 'job_id' must be an integer"},
      {"bool all", R"({"type":"list","all":"yes"})", "request field 'all' must be true or false"},
      {"string priority", R"({"type":"submit","content":"[]","priority":"high"})",
       "request field 'priority' must be an integer"},
      {"numeric dry_run", R"({"type":"submit","content":"[]","dry_run":1})",
       "request field 'dry_run' must be true or false"},
      {"gpus not a list", R"({"type":"submit","content":"[]","gpus":"0"})",
       "request field 'gpus' must be a list of integers"},
      {"submit without content", R"({"type":"submit"})",
       "submit: field 'content' (the input file's text) is missing"},
      {"numeric content", R"({"type":"submit","content":42})", "field 'content'"},
      {"long name", R"({"type":"submit","content":"[]","name":")" + big_name + "\"}",
       "request field 'name' is too long (300 bytes)"},
      // Numbers out of range.
      {"negative job_id", R"({"type":"status","job_id":-1})",
       "request field 'job_id' must be between 0 and 9223372036854775807"},
      {"job_id 2^63", R"({"type":"status","job_id":9223372036854775808})",
       "request field 'job_id' must be between 0 and 9223372036854775807"},
      {"job_id 2^64", R"({"type":"results","job_id":18446744073709551616})",
       "request field 'job_id' must be"},
      {"job_id 1e400", R"({"type":"status","job_id":1e400})", "not valid JSON"},
      {"negative id", R"({"type":"ping","id":-5})", "request field 'id' must be between 0 and"},
      {"cancel job 0", R"({"type":"cancel","job_id":0})",
       "request field 'job_id' must be between 1 and"},
      {"cancel without job", R"({"type":"cancel"})", "request field 'job_id' is missing"},
      {"boost 2^31", R"({"type":"boost","job_id":1,"priority":2147483648})",
       "request field 'priority' must be between -1000 and 1000"},
      {"drain gpu -1", R"({"type":"drain","gpu":-1})",
       "request field 'gpu' must be between 0 and 1023"},
      {"drain without gpu", R"({"type":"drain"})", "request field 'gpu' is missing"},
      {"negative gpu in list", R"({"type":"submit","content":"[]","gpus":[-1]})",
       "request field 'gpus' must hold integers between 0 and 1023"},
      {"2^64-1 gpu in list", R"({"type":"submit","content":"[]","gpus":[18446744073709551615]})",
       "request field 'gpus' must hold integers between 0 and 1023"},
      {"negative timeout", R"({"type":"submit","content":"[]","timeout_s":-5})",
       "request field 'timeout_s' is out of range"},
      {"huge not_before", R"({"type":"submit","content":"[]","not_before":1e300})",
       "request field 'not_before' is out of range"},
      {"not_before in 2350", R"({"type":"submit","content":"[]","not_before":1.2e10})",
       "request field 'not_before' is out of range"},
      {"negative max_ops", R"({"type":"submit","content":"[]","max_ops":-1})",
       "request field 'max_ops' must be between 0 and"},
      {"negative max_gpus", R"({"type":"submit","content":"[]","max_gpus":-3})",
       "request field 'max_gpus' must be between 0 and 1024"},
      // Deep nesting (nlohmann's parser recurses: this must be refused before parsing).
      {"100000 arrays", Nested(100000, '[', "", ']'), "JSON nested deeper than 256 levels"},
      {"2000 objects", nested_objects, "JSON nested deeper than 256 levels"},
      // Invalid UTF-8.
      {"invalid UTF-8 type", "{\"type\":\"\xff\xfe\"}", "not valid JSON"},
      {"invalid UTF-8 key", "{\"\xc3\x28\":1,\"type\":\"ping\"}", "not valid JSON"},
      {"overlong UTF-8", "{\"type\":\"\xc0\xafping\"}", "not valid JSON"},
      {"lone surrogate escape", R"({"type":"\ud800"})", "not valid JSON"},
      // Well-formed requests about nothing.
      {"no such job", R"({"type":"results","job_id":99999})", "no job 99999"},
      {"watch no such job", R"({"type":"watch","job_id":99999})", "no job 99999"},
      {"retry no such job", R"({"type":"retry","job_id":99999})", "no job 99999"},
  };
  RawClient c;
  Greeted(&c);
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    ASSERT_TRUE(c.Send(tc.frame + "\n")) << "the daemon closed the connection";
    auto answer = c.ReadLine(10);
    ASSERT_TRUE(answer.has_value()) << "no answer";
    auto j = ParseJson(*answer);
    ASSERT_TRUE(j.ok()) << "the answer is not valid JSON: " << *answer;
    EXPECT_EQ(j->value("ok", true), false) << *answer;
    const std::string error = j->value("error", "");
    EXPECT_NE(error.find(tc.error), std::string::npos) << error;
    EXPECT_LT(error.size(), 1000u) << "an error is a line, not an echo of the input";
    // The same connection still works.
    ASSERT_TRUE(c.Send("{\"type\":\"ping\",\"id\":7}\n"));
    auto pong = c.ReadJson(10);
    ASSERT_TRUE(pong.has_value());
    EXPECT_EQ(pong->value("ok", false), true) << pong->dump();
    EXPECT_EQ(pong->value("id", 0), 7);
  }
  // The largest id is echoed exactly; CRLF line ends and blank lines are fine.
  ASSERT_TRUE(c.Send("\n  \n{\"type\":\"ping\",\"id\":9223372036854775807}\r\n"));
  auto pong = c.ReadJson(10);
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->value("id", int64_t{0}), int64_t{9223372036854775807});
}

TEST_F(ReliabilityClientsTest, RequestsBeforeHelloOrWithAnotherProtocolAreRefusedClearly) {
  Start();
  {
    RawClient c;
    ASSERT_TRUE(c.Connect(daemon_.socket()));
    ASSERT_TRUE(c.Send("{\"type\":\"cancel\",\"job_id\":1}\n"));
    auto a = c.ReadJson(10);
    ASSERT_TRUE(a.has_value());
    EXPECT_NE(a->value("error", "").find("say hello first"), std::string::npos) << a->dump();
    EXPECT_TRUE(c.WaitClosed(10));
  }
  for (const char* hello : {R"({"type":"hello","protocol":2})", R"({"type":"hello"})",
                            R"({"type":"hello","protocol":1048576})"}) {
    SCOPED_TRACE(hello);
    RawClient c;
    ASSERT_TRUE(c.Connect(daemon_.socket()));
    ASSERT_TRUE(c.Send(std::string(hello) + "\n"));
    auto a = c.ReadJson(10);
    ASSERT_TRUE(a.has_value());
    EXPECT_NE(a->value("error", "").find("is not supported; this ckprofd speaks 1"),
              std::string::npos)
        << a->dump();
    EXPECT_TRUE(c.WaitClosed(10));
  }
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

TEST_F(ReliabilityClientsTest, FramesOverTheCapAreRefusedAndFramesUnderItServed) {
  Start(EmulatorOptions("0-3", R"({"max_frame_bytes": 65536})"));
  {
    RawClient c;
    Greeted(&c);
    c.Send(std::string(100000, 'a'));  // no newline: the daemon must not wait for one
    auto a = c.ReadJson(10);
    ASSERT_TRUE(a.has_value());
    EXPECT_NE(a->value("error", "").find("frame too large: over the limit of 65536 bytes"),
              std::string::npos)
        << a->dump();
    EXPECT_TRUE(c.WaitClosed(10));
  }
  {
    RawClient c;
    Greeted(&c);
    // Just under the cap, in a field nobody reads: answered.
    std::string frame =
        "{\"type\":\"ping\",\"id\":3,\"pad\":\"" + std::string(65000, 'p') + "\"}\n";
    ASSERT_LE(frame.size(), 65536u);
    ASSERT_TRUE(c.Send(frame));
    auto a = c.ReadJson(10);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->value("ok", false), true) << a->dump();
  }
  {
    // A huge submit over the cap: a clear error, and the daemon's memory did not follow.
    const int64_t before = daemon_.PeakRssBytes();
    RawClient c;
    Greeted(&c);
    std::string chunk(1 << 20, ' ');
    c.Send("{\"type\":\"submit\",\"content\":\"");
    for (int i = 0; i < 64 && c.Send(chunk); ++i) {
    }
    std::vector<std::string> lines;
    EXPECT_TRUE(c.WaitClosed(10, &lines));
    ASSERT_FALSE(lines.empty());
    EXPECT_NE(lines[0].find("frame too large"), std::string::npos) << lines[0];
    if (testing::kMemoryIsMeasurable) {
      EXPECT_LT(daemon_.PeakRssBytes() - before, int64_t{16} << 20);
    }
  }
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

// A submit near the size of a whole trace: the daemon needs a few times its size while it
// parses (socket buffer, JSON token, string), and no more for the next one (nothing is kept).
TEST_F(ReliabilityClientsTest, LargeSubmitsCostAFewTimesTheirSizeAndNothingIsKept) {
  Start();
  RawClient c;
  Greeted(&c);
  constexpr size_t kContent = size_t{32} << 20;
  std::string frame = "{\"type\":\"submit\",\"id\":2,\"content\":\"[";
  frame.append(kContent, ' ');
  frame += "]\"}\n";
  const int64_t before = daemon_.PeakRssBytes(), rss_before = daemon_.RssBytes();
  std::vector<int64_t> growth, kept;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.Send(frame));
    auto a = c.ReadJson(60);
    ASSERT_TRUE(a.has_value());
    EXPECT_NE(a->value("error", "").find("no convolution"), std::string::npos) << a->dump();
    growth.push_back(daemon_.PeakRssBytes() - before);
    kept.push_back(daemon_.RssBytes() - rss_before);  // the answer comes after the trim
  }
  std::cerr << "[ info ] " << (kContent >> 20) << " MiB submits: daemon peak +" << (growth[0] >> 20)
            << ", +" << (growth[1] >> 20) << ", +" << (growth[2] >> 20) << " MiB; resident after"
            << " each +" << (kept[0] >> 20) << ", +" << (kept[1] >> 20) << ", +" << (kept[2] >> 20)
            << " MiB\n";
  // 4x: socket buffer, the parser's token, the string, growth slack.
  if (!testing::kMemoryIsMeasurable) return;
  EXPECT_LT(growth[0], 9 * static_cast<int64_t>(kContent) / 2) << "more copies than needed";
  // Nothing accumulates: what is resident once a submit is answered (the connection's read
  // buffer, about one frame) stays the same from one submit to the next. (Not the peaks: the
  // two conversion threads have a heap each, and which one parses a submit varies.)
  for (int64_t k : kept) {
    EXPECT_LT(k - kept[0], int64_t{16} << 20) << "each large submit leaves memory behind";
  }
}

TEST_F(ReliabilityClientsTest, TruncatedFramesAndVanishingClientsAreHarmless) {
  Start();
  {
    RawClient c;
    ASSERT_TRUE(c.Connect(daemon_.socket()));
    c.Send(R"({"type":"hello","proto)");
    c.ShutdownWrite();
    EXPECT_TRUE(c.WaitClosed(10));
  }
  {
    RawClient c;
    Greeted(&c);
    c.Send(R"({"type":"submit","content":"[{\"operation_type\":)");
    c.Close();
  }
  // A client that asks for a big answer and leaves without reading it.
  auto job = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(300));
  ASSERT_TRUE(job.ok()) << job.error();
  ASSERT_TRUE(testing::WaitJobEnd(daemon_.socket(), *job).ok());
  for (int i = 0; i < 5; ++i) {
    RawClient c;
    Greeted(&c);
    c.Send("{\"type\":\"results\",\"job_id\":" + std::to_string(*job) + ",\"all\":true}\n");
    c.Close();
  }
  // And one that watches a running job and vanishes.
  auto job2 = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(60));
  ASSERT_TRUE(job2.ok());
  {
    RawClient c;
    Greeted(&c);
    c.Send("{\"type\":\"watch\",\"job_id\":" + std::to_string(*job2) + "}\n");
    ASSERT_TRUE(c.ReadLine(10).has_value());
    c.Close();
  }
  auto end = testing::WaitJobEnd(daemon_.socket(), *job2);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->counts.succeeded(), 60);
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

TEST_F(ReliabilityClientsTest, SilentAndOneBytePerSecondClientsAreTimedOutOthersAreNot) {
  Start(EmulatorOptions("0-3", R"({"client_timeout": 1.5})"));
  RawClient silent, slow, slow_request;
  ASSERT_TRUE(silent.Connect(daemon_.socket()));
  ASSERT_TRUE(slow.Connect(daemon_.socket()));
  Greeted(&slow_request);
  const std::string hello = "{\"type\":\"hello\",\"protocol\":1}\n";
  const std::string request = "{\"type\":\"list\",\"all\":true}\n";
  const auto t0 = Clock::now();
  struct Watch {
    RawClient* c;
    std::string what;
    double closed_after = -1;
    std::vector<std::string> lines;
  } watched[] = {{&silent, "silent", -1, {}},
                 {&slow, "slow hello", -1, {}},
                 {&slow_request, "slow request", -1, {}}};
  // Everyone else is served at once meanwhile: another client pings back to back.
  std::atomic<bool> stop{false};
  std::atomic<int> pings{0}, failed_pings{0};
  double worst_ping = 0;
  std::thread pinger([&] {
    while (!stop.load()) {
      auto p0 = Clock::now();
      if (!testing::Ping(daemon_.socket())) ++failed_pings;
      worst_ping = std::max(worst_ping, SecondsSince(p0));
      ++pings;
    }
  });
  for (size_t sent = 0; SecondsSince(t0) < 8; ++sent) {
    // One byte a second from the slow ones (the poll below is the second).
    if (sent < hello.size()) slow.Send(hello.substr(sent, 1));
    if (sent < request.size()) slow_request.Send(request.substr(sent, 1));
    // Wait for the next second, watching for the daemon closing any of them.
    const double next = static_cast<double>(sent + 1);
    bool all_closed = true;
    for (auto& w : watched) {
      if (w.closed_after < 0 && w.c->WaitClosed(std::max(0.0, next - SecondsSince(t0)), &w.lines)) {
        w.closed_after = SecondsSince(t0);
      }
      all_closed = all_closed && w.closed_after >= 0;
    }
    if (all_closed) break;
  }
  stop = true;
  pinger.join();
  for (auto& w : watched) {
    SCOPED_TRACE(w.what);
    EXPECT_GE(w.closed_after, 1.4);
    EXPECT_LT(w.closed_after, 4.0) << "not timed out";
    ASSERT_FALSE(w.lines.empty());
  }
  EXPECT_NE(watched[0].lines.back().find("no hello within 1.5 s; closing"), std::string::npos)
      << watched[0].lines.back();
  EXPECT_NE(watched[1].lines.back().find("no hello within 1.5 s; closing"), std::string::npos)
      << watched[1].lines.back();
  EXPECT_NE(watched[2].lines.back().find("request not complete within 1.5 s"), std::string::npos)
      << watched[2].lines.back();
  std::cerr << "[ info ] closed after " << watched[0].closed_after << ", "
            << watched[1].closed_after << ", " << watched[2].closed_after << " s; " << pings.load()
            << " pings meanwhile, the slowest " << worst_ping << " s\n";
  EXPECT_LT(worst_ping, 1.0) << "other clients waited on the slow ones";
  EXPECT_EQ(failed_pings, 0);
  EXPECT_GE(pings, 2);
}

TEST_F(ReliabilityClientsTest, TwoHundredClientsAtOnceAreAllServed) {
  constexpr int kClients = 200;
  Start();
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<int64_t> jobs;
  std::atomic<int> ready{0};
  auto fail = [&](const std::string& e) {
    std::lock_guard<std::mutex> lock(mu);
    errors.push_back(e);
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      // All connect first, then all talk at once.
      auto conn = Connection::Open(daemon_.socket());
      if (!conn) return fail(conn.error());
      ++ready;
      while (ready.load() < kClients) std::this_thread::yield();
      SubmitRequest submit;
      submit.submit.content = testing::FwdConfigsText(1 + i % 3);
      submit.submit.name = "client-" + std::to_string(i);
      auto a = (*conn)->CallJson(submit);
      if (!a) return fail("submit: " + a.error());
      const int64_t job = a->value("job_id", int64_t{0});
      StatusRequest status;
      status.job_id = job;
      if (auto s = (*conn)->CallJson(status); !s) return fail("status: " + s.error());
      JobSummary last;
      Status w = (*conn)->Watch(job, [&](const json& f) {
        if (auto s = JobSummaryFromJson(f.value("job", json::object())); s) last = *s;
        return true;
      });
      if (!w) return fail("watch: " + w.error());
      if (last.counts.succeeded() != 1 + i % 3) {
        return fail("job " + std::to_string(job) + " ended with " +
                    std::to_string(last.counts.succeeded()) + " succeeded");
      }
      std::lock_guard<std::mutex> lock(mu);
      jobs.push_back(job);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(errors.empty()) << errors.size() << " clients failed, first: " << errors[0];
  EXPECT_EQ(jobs.size(), static_cast<size_t>(kClients));
  std::sort(jobs.begin(), jobs.end());
  EXPECT_EQ(std::unique(jobs.begin(), jobs.end()), jobs.end()) << "two clients got one job id";
  ListRequest list;
  list.all = true;
  auto all = testing::CallOnce(daemon_.socket(), list);
  ASSERT_TRUE(all.ok()) << all.error();
  EXPECT_EQ((*all)["jobs"].size(), static_cast<size_t>(kClients));
}

TEST_F(ReliabilityClientsTest, ClientsBeyondMaxClientsGetAClearRefusalAndSlotsFreeUp) {
  Start(EmulatorOptions("0-3", R"({"max_clients": 8})"));
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::make_unique<RawClient>());
    Greeted(held.back().get());
  }
  auto refused = Connection::Open(daemon_.socket());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("serving too many clients (8); try again shortly"),
            std::string::npos)
      << refused.error();
  // One leaves: a slot frees up (as soon as the daemon has seen it go).
  held.back()->Close();
  held.pop_back();
  bool served = false;
  for (int attempt = 0; attempt < 500 && !served; ++attempt)
    served = testing::Ping(daemon_.socket());
  EXPECT_TRUE(served);
}

// A submit may carry a gzip file (content_encoding gzip+base64). A small one can inflate to any
// size: the daemon must convert it streaming, without its memory following the inflated size.
int64_t GzipBombGrowth(LaunchedDaemon& daemon, const std::string& plain, std::string* error) {
  const std::string bomb = *Gzip(plain, 9);
  const int64_t before = daemon.PeakRssBytes();
  auto job = testing::SubmitContent(daemon.socket(), Base64Encode(bomb),
                                    [](SubmitOptions& o) { o.content_encoding = "gzip+base64"; });
  *error = job.ok() ? "" : job.error();
  const int64_t growth = daemon.PeakRssBytes() - before;
  std::cerr << "[ info ] a " << bomb.size() << "-byte gzip inflating to " << (plain.size() >> 20)
            << " MiB grew ckprofd by " << (growth >> 20) << " MiB\n";
  return growth;
}

TEST_F(ReliabilityClientsTest, GzipBombOfManyTokensKeepsTheDaemonsMemoryBounded) {
  Start();
  // 64 MiB of "0," inside a list: about 64 KB gzipped, 32 million tokens.
  std::string plain;
  plain.reserve(size_t{64} << 20);
  plain = "[";
  while (plain.size() < (size_t{64} << 20)) plain += "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,";
  plain += "0]";
  std::string error;
  const int64_t growth = GzipBombGrowth(daemon_, plain, &error);
  if (testing::kMemoryIsMeasurable) {
    EXPECT_LT(growth, int64_t{16} << 20);
  }
  EXPECT_NE(error.find("submit: "), std::string::npos) << error;
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

// The same without gzip: an ordinary 8 MiB submit of small list elements.
TEST_F(ReliabilityClientsTest, PlainSubmitOfManySmallTokensKeepsTheDaemonsMemoryBounded) {
  Start();
  std::string content = "[";
  for (int i = 0; i < (4 << 20); ++i) content += "0,";
  content += "0]";
  const int64_t before = daemon_.PeakRssBytes();
  auto job = testing::SubmitContent(daemon_.socket(), content);
  EXPECT_FALSE(job.ok());
  const int64_t growth = daemon_.PeakRssBytes() - before;
  std::cerr << "[ info ] an " << (content.size() >> 20) << " MiB submit of small tokens grew "
            << "ckprofd by " << (growth >> 20) << " MiB\n";
  if (testing::kMemoryIsMeasurable) {
    EXPECT_LT(growth, int64_t{64} << 20);
  }
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

TEST_F(ReliabilityClientsTest, GzipBombOfOneHugeTokenKeepsTheDaemonsMemoryBounded) {
  Start();
  std::string plain(size_t{512} << 20, ' ');
  plain.front() = '[';
  plain.back() = ']';
  std::string error;
  const int64_t growth = GzipBombGrowth(daemon_, plain, &error);
  if (testing::kMemoryIsMeasurable) {
    EXPECT_LT(growth, int64_t{128} << 20);
  }
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

struct ContentCase {
  std::string name;
  std::string content;
  std::string error;  // a part of the expected error message
};

TEST_F(ReliabilityClientsTest, BrokenSubmittedFilesEachGetAClearError) {
  Start();
  auto config = [](const std::string& field, const std::string& value) {
    auto j = nlohmann::ordered_json::parse(testing::FwdConfigsText(1));
    std::string text = j[0].dump();
    const std::string key = "\"" + field + "\":";
    auto at = text.find(key);
    if (at == std::string::npos) return std::string("field not found: ") + field;
    auto end = text.find_first_of(",}", at + key.size());
    if (text[at + key.size()] == '[') end = text.find(']', at) + 1;
    return "[" + text.substr(0, at + key.size()) + value + text.substr(end) + "]";
  };
  const std::string good = testing::FwdConfigsText(2);
  const std::string ir = testing::ReadFile(testing::DataPath("conv_repros_ir.json"));
  const ContentCase cases[] = {
      {"empty", "", "the input cannot be used"},
      {"truncated configs", good.substr(0, good.size() / 2), "not valid JSON at line"},
      {"truncated IR list", ir.substr(0, ir.size() / 3), "not valid JSON at line"},
      {"deeply nested", Nested(100000, '[', "", ']'), "nested deeper than"},
      {"a number", "42", "the input cannot be used"},
      {"an object", "{}", "the input cannot be used"},
      {"empty list", "[]", "no convolution"},
      {"zero groups", config("G", "0"), "config 1: field profiler_args.G must be between 1"},
      {"negative batch", config("N", "-1"), "config 1: field profiler_args.N must be between 1"},
      {"K 2^63", config("K", "9223372036854775808"),
       "config 1: field profiler_args.K is out of range"},
      {"C 2^64", config("C", "18446744073709551616"),
       "config 1: field profiler_args.C must be an integer"},
      {"string channels", config("C", "\"8\""),
       "config 1: field profiler_args.C must be an integer"},
      {"negative input size", config("input_spatial", "[-5, 8]"),
       "config 1: field profiler_args.input_spatial"},
      {"zero stride", config("strides", "[0, 1]"), "config 1: field profiler_args.strides"},
      {"huge spatial", config("input_spatial", "[9223372036854775807, 8]"),
       "config 1: field profiler_args.input_spatial"},
      {"filter larger than input", config("filter_spatial", "[99, 99]"),
       "config 1: the output would be empty"},
      {"three strides in 2-D", config("strides", "[1, 1, 1]"),
       "config 1: field profiler_args.strides has 3 entries"},
      {"unknown operation", config("operation_type", "\"profile_grouped_conv_up\""),
       "config 1: field operation_type is unknown"},
      {"IR record of wrong types", R"([{"op":"aten::convolution","inputs":5,"input_shapes":"x"}])",
       ""},
      {"trace of wrong types", R"({"traceEvents":5})", ""},
      {"trace with garbage events", R"({"traceEvents":[1,"x",null,{"ph":7,"args":[]}]})", ""},
  };
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    auto job = testing::SubmitContent(daemon_.socket(), tc.content);
    ASSERT_FALSE(job.ok()) << "accepted as job " << *job;
    EXPECT_NE(job.error().find("submit: "), std::string::npos) << job.error();
    EXPECT_NE(job.error().find(tc.error), std::string::npos) << job.error();
    EXPECT_LT(job.error().size(), 2000u) << job.error();
    EXPECT_TRUE(testing::Ping(daemon_.socket()));
  }
  // Encoded content that lies about itself.
  const std::string gz = *Gzip(good);
  const struct {
    std::string name, content, encoding, error;
  } encoded[] = {
      {"not base64", "!!!!", "gzip+base64", "submit: content: "},
      {"base64 of text", Base64Encode(good), "gzip+base64", "not gzip data"},
      {"truncated gzip", Base64Encode(gz.substr(0, gz.size() / 2)), "gzip+base64", "gzip"},
      {"gzip of garbage", Base64Encode(*Gzip(std::string(5000, '\x01'))), "gzip+base64",
       "not valid JSON"},
      {"unknown encoding", good, "zstd", "content_encoding must be"},
  };
  for (const auto& tc : encoded) {
    SCOPED_TRACE(tc.name);
    auto job = testing::SubmitContent(daemon_.socket(), tc.content,
                                      [&](SubmitOptions& o) { o.content_encoding = tc.encoding; });
    ASSERT_FALSE(job.ok()) << "accepted as job " << *job;
    EXPECT_NE(job.error().find(tc.error), std::string::npos) << job.error();
    EXPECT_TRUE(testing::Ping(daemon_.socket()));
  }
  // Invalid UTF-8 inside the submitted text itself (a raw frame: our client would not send it).
  RawClient c;
  Greeted(&c);
  ASSERT_TRUE(c.Send("{\"type\":\"submit\",\"content\":\"[\xff\xfe]\"}\n"));
  auto a = c.ReadJson(10);
  ASSERT_TRUE(a.has_value());
  EXPECT_NE(a->value("error", "").find("not valid JSON"), std::string::npos) << a->dump();
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

}  // namespace
}  // namespace ckprof
