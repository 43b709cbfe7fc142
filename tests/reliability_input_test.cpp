// Reliability, unit level: hostile input to the three decoders a user can reach — the protocol
// decoder (every socket frame), the converter (every submitted file) and the CK output parser
// (every profiler's stdout) — and to the daemon's config file (read at start and on SIGHUP).
// Each input must give a clear error (or a bounded result), never a crash, an exception or
// undefined behaviour; run under ASan+UBSan in CI. The libFuzzer targets in fuzz/ search the
// same functions for what these tables miss.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/ck_output.h"
#include "common/convert.h"
#include "common/json_util.h"
#include "common/protocol.h"
#include "daemon/daemon_config.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using json = nlohmann::json;

struct FrameCase {
  std::string name;
  std::string input;
  std::string error;  // a part of the expected error; "" = must succeed
};

std::string Deep(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(ReliabilityProtocol, HostileFramesGiveErrorsThatNameTheField) {
  const FrameCase cases[] = {
      {"empty", "", "malformed request: not valid JSON at line 1, column 1"},
      {"truncated", R"({"type":"submit","content":"[)", "not valid JSON at line 1, column"},
      {"second line", "{\"type\":\n\"ping\",,}", "not valid JSON at line 2, column 8"},
      {"array", "[1,2]", "a request must be a JSON object"},
      {"no type", R"({"id":1})", "field 'type' is missing or not a string"},
      {"unknown type", R"({"type":"rm -rf"})", "unknown request type 'rm -rf'"},
      {"job_id string", R"({"type":"cancel","job_id":"7"})",
       "request field 'job_id' must be an integer"},
      {"job_id bool", R"({"type":"cancel","job_id":true})",
       "request field 'job_id' must be an integer"},
      {"job_id 2^63", R"({"type":"cancel","job_id":9223372036854775808})",
       "request field 'job_id' must be between 1 and 9223372036854775807"},
      {"job_id -2^63", R"({"type":"status","job_id":-9223372036854775808})",
       "request field 'job_id' must be between 0 and 9223372036854775807"},
      {"job_id 1e19", R"({"type":"status","job_id":1e19})",
       "request field 'job_id' must be an integer"},
      {"job_id overflow", R"({"type":"status","job_id":1e999})", "number overflow"},
      {"gpu 2^31", R"({"type":"resume","gpu":2147483648})",
       "request field 'gpu' must be between 0 and 1023"},
      {"priority -2^31-1", R"({"type":"boost","job_id":1,"priority":-2147483649})",
       "request field 'priority' must be between -1000 and 1000"},
      {"gpus nested", R"({"type":"submit","content":"","gpus":[[0]]})",
       "request field 'gpus' must hold integers between 0 and 1023"},
      {"gpus 5000 entries",
       R"({"type":"submit","content":"","gpus":[)" +
           [] {
             std::string s = "0";
             for (int i = 0; i < 4999; ++i) s += ",0";
             return s;
           }() +
           "]}",
       "request field 'gpus' holds 5000 entries; at most 4096 are taken at once"},
      {"retry naming 4097 tasks",
       R"({"type":"retry","job_id":1,"tasks":[)" +
           [] {
             std::string s = "1";
             for (int i = 2; i <= 4097; ++i) s += "," + std::to_string(i);
             return s;
           }() +
           "]}",
       "request field 'tasks' holds 4097 entries; at most 4096 are taken at once"},
      {"gpus float", R"({"type":"submit","content":"","gpus":[0.5]})",
       "request field 'gpus' must hold integers"},
      {"max_gpus 2^63", R"({"type":"submit","content":"","max_gpus":9223372036854775807})",
       "request field 'max_gpus' must be between 0 and 1024"},
      {"max_ops 2^64", R"({"type":"submit","content":"","max_ops":18446744073709551615})",
       "request field 'max_ops' must be between 0 and 9223372036854775807"},
      {"timeout -1e308", R"({"type":"submit","content":"","timeout_s":-1e308})",
       "request field 'timeout_s' is out of range"},
      {"not_before string", R"({"type":"submit","content":"","not_before":"+2h"})",
       "request field 'not_before' must be a number"},
      {"content object", R"({"type":"submit","content":{}})", "field 'content'"},
      {"profiler_path 5000 bytes",
       R"({"type":"submit","content":"","profiler_path":")" + std::string(5000, 'p') + "\"}",
       "request field 'profiler_path' is too long (5000 bytes)"},
      {"client 300 bytes",
       R"({"type":"hello","protocol":1,"client":")" + std::string(300, 'c') + "\"}",
       "request field 'client' is too long"},
      {"protocol string", R"({"type":"hello","protocol":"1"})",
       "request field 'protocol' must be an integer"},
      {"deep arrays", Deep(1 << 20), "JSON nested deeper than 256 levels at line 1, column 257"},
      {"deep in a field", R"({"type":"ping","x":)" + Deep(300) + "}", "nested deeper than 256"},
      {"brackets in strings are not depth",
       R"({"type":"ping","x":")" + std::string(5000, '[') + "\\\"" + "\"}", ""},
      {"invalid UTF-8", "{\"type\":\"ping\",\"x\":\"\xed\xa0\x80\"}", "not valid JSON"},
      {"truncated UTF-8", "{\"type\":\"ping\",\"x\":\"\xe2\x82\"}", "not valid JSON"},
      {"NUL inside", std::string("{\"type\":\"ping\",\"x\":\"a\0b\"}", 24), "not valid JSON"},
      {"NUL after", std::string("{\"type\":\"ping\"}\0{\"type\":\"cancel\"}", 33),
       "not valid JSON at line 1, column 16: a NUL byte"},
      {"valid unicode escapes", R"({"type":"ping","x":"\u00e9\ud83d\ude00"})", ""},
      {"duplicate keys", R"({"type":"ping","type":"gpus"})", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Result<Request> r = ParseRequest(c.input);
    if (c.error.empty()) {
      EXPECT_TRUE(r.ok()) << r.error();
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.error().find(c.error), std::string::npos) << r.error();
      EXPECT_LT(r.error().size(), 600u) << "errors are one line, never an echo of the input";
    }
  }
}

TEST(ReliabilityProtocol, EveryRequestRoundTripsThroughItsFrame) {
  std::mt19937 rng(11);
  for (int i = 0; i < 500; ++i) {
    Request r;
    static const auto makers = [] {
      std::vector<Request> all;
      for (int t = 0; t < 13; ++t) {
        auto p = ParseRequest(std::string(R"({"type":")") +
                              std::string(RequestTypeName(static_cast<RequestType>(t))) +
                              R"(","job_id":1,"gpu":0,"content":""})");
        if (p) all.push_back(std::move(*p));
      }
      return all;
    }();
    ASSERT_EQ(makers.size(), 13u);
    r = makers[rng() % 13];
    r.id = static_cast<int64_t>(rng() % 1000000);
    std::visit(
        [&](auto& b) {
          if constexpr (requires { b.protocol; }) b.protocol = 1;
          if constexpr (requires { b.job_id; }) b.job_id = 1 + static_cast<int64_t>(rng() % 1000);
          if constexpr (requires { b.gpu; }) b.gpu = static_cast<int>(rng() % 8);
          if constexpr (requires { b.priority; }) {
            b.priority = static_cast<int>(rng() % 2001) - 1000;
          }
          if constexpr (requires { b.all; }) b.all = rng() % 2;
          if constexpr (requires { b.submit; }) {
            b.submit.content = std::string(rng() % 64, 'x') + "\xc3\xa9\"\\\n";
            b.submit.gpus = {static_cast<int>(rng() % 8)};
            b.submit.timeout_s = static_cast<double>(rng() % 100) / 7;
            b.submit.max_ops = rng() % 50;
          }
        },
        r.body);
    std::string frame = Frame(RequestToJson(r));
    ASSERT_EQ(frame.back(), '\n');
    ASSERT_EQ(frame.find('\n'), frame.size() - 1) << "one frame is one line";
    frame.pop_back();
    auto back = ParseRequest(frame);
    ASSERT_TRUE(back.ok()) << back.error() << " in " << frame;
    EXPECT_EQ(back->type(), r.type());
    EXPECT_EQ(back->id, r.id);
    EXPECT_EQ(Frame(RequestToJson(*back)), Frame(RequestToJson(r)));
  }
}

TEST(ReliabilityProtocol, FramesOfInvalidUtf8NeverThrowAndStayOneLine) {
  const std::vector<std::string> bad_strings = {"\xff", "\xc3", "\xed\xa0\x80", "ok\x80tail",
                                                std::string("\0\n\r", 3)};
  for (const std::string& bad : bad_strings) {
    json j = ErrorResponse(3, "unknown request type '" + bad + "'");
    j["nested"] = {{"k" + bad, json::array({bad, 1})}};
    std::string frame;
    ASSERT_NO_THROW(frame = Frame(j));
    EXPECT_EQ(frame.find('\n'), frame.size() - 1);
    auto parsed = ParseJson(frame);
    EXPECT_TRUE(parsed.ok()) << parsed.error();
  }
}

TEST(ReliabilityProtocol, ClientSideDecodersTolerateWrongTypes) {
  // What a confused (or malicious) daemon could send: nothing may throw.
  const char* answers[] = {
      R"({"id":"x","owner_uid":-1,"total":"many","gpus_in_use":[1,"a",null],"eta_s":[]})",
      R"({"task_id":1e300,"state":5,"returncode":"-11","config":[],"stdout":{}})",
      R"({"index":18446744073709551615,"drained":"no","busy_since":"now"})",
      "[]",
      "null",
      R"("text")",
  };
  for (const char* a : answers) {
    SCOPED_TRACE(a);
    auto j = ParseJson(a);
    ASSERT_TRUE(j.ok());
    EXPECT_NO_THROW((void)JobSummaryFromJson(*j));
    EXPECT_NO_THROW((void)TaskResultFromJson(*j));
    EXPECT_NO_THROW((void)GpuInfoFromJson(*j));
  }
}

std::string WithField(const std::string& field, const std::string& value) {
  auto j = nlohmann::ordered_json::parse(testing::FwdConfigsText(1));
  j[0]["profiler_args"][field] = nlohmann::ordered_json::parse(value);
  return j.dump();
}

TEST(ReliabilityConvert, HostileInputsAreErrorsThatNameTheRecordAndField) {
  const std::string good = testing::FwdConfigsText(3);
  const FrameCase cases[] = {
      {"empty", "", "not valid JSON"},
      {"whitespace", "   \n\t ", "not valid JSON"},
      {"truncated", good.substr(0, good.size() / 2), "not valid JSON at line"},
      {"garbage after", good + "}", "not valid JSON"},
      {"deep", Deep(100000), "nested deeper than 512 levels"},
      {"a string", R"("conv")", ""},
      {"zero groups", WithField("G", "0"),
       "field profiler_args.G must be between 1 and 2147483647, got 0"},
      {"negative N", WithField("N", "-4"), "field profiler_args.N must be between 1"},
      {"K 2^63", WithField("K", "9223372036854775808"), "field profiler_args.K is out of range"},
      {"C 2^63-1", WithField("C", "9223372036854775807"), "field profiler_args.C must be between"},
      {"C float", WithField("C", "8.5"), "field profiler_args.C must be an integer, got 8.5"},
      {"C null", WithField("C", "null"), "field profiler_args.C must be an integer"},
      {"filter huge", WithField("filter_spatial", "[2147483647, 2147483647]"),
       "the output would be empty"},
      {"input 2^62", WithField("input_spatial", "[4611686018427387904, 8]"),
       "field profiler_args.input_spatial"},
      {"input negative", WithField("input_spatial", "[-8, 8]"),
       "field profiler_args.input_spatial"},
      {"stride zero", WithField("strides", "[0, 1]"), "field profiler_args.strides"},
      {"stride negative", WithField("strides", "[-1, 1]"), "field profiler_args.strides"},
      {"dilation zero", WithField("dilations", "[0, 0]"), "field profiler_args.dilations"},
      {"pads negative", WithField("left_pads", "[-100, 0]"), "field profiler_args.left_pads"},
      {"pads huge (valid: CK takes int32)", WithField("right_pads", "[2147483647, 2147483647]"),
       ""},
      {"list too long", WithField("strides", "[1, 1, 1, 1]"), "field profiler_args.strides"},
      {"list of strings", WithField("dilations", R"(["1", "1"])"), "field profiler_args.dilations"},
      {"num_dim_spatial 0", WithField("num_dim_spatial", "0"), "num_dim_spatial"},
      {"num_dim_spatial 2^31", WithField("num_dim_spatial", "2147483648"), "num_dim_spatial"},
      {"data_type 99", WithField("data_type", "99"), "data_type"},
      {"layout -1", WithField("layout", "-1"), "layout"},
      {"IR wrong types", R"([{"op":"aten::convolution","inputs":{"x":1},"shapes":7}])", ""},
      {"IR null records", "[null, 1, \"x\", [], {}]", ""},
      {"trace wrong types", R"({"traceEvents":{"a":1}})", ""},
      {"trace garbage events",
       R"({"traceEvents":[null,1,{"name":5,"ph":[],"args":"x","dur":-1e308,"ts":"t"}]})", ""},
      {"trace conv with absurd dims",
       R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::convolution","ts":1,"dur":1,
           "args":{"Input Dims":[[-1,3,1e300,7],[64,3,7,7],[],[],[],[],[],[],[]],
           "Input type":["float","float"],"Concrete Inputs":["","","","[2, 2]","[3, 3]",
           "[1, 1]","False","[0, 0]","0"]}}]})",
       ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Result<Conversion> r = Result<Conversion>(Error{"not run"});
    ASSERT_NO_THROW(r = ConvertText(c.input, ConvertOptions{}));
    if (c.error.empty()) {
      // Either an error, or a conversion that kept nothing it could not check.
      if (r.ok()) {
        for (const auto& cfg : r->configs) {
          EXPECT_GT(cfg.G, 0);
          EXPECT_GT(cfg.N, 0);
          EXPECT_TRUE(std::isfinite(cfg.Flops()));
        }
      }
    } else {
      ASSERT_FALSE(r.ok()) << "accepted " << r->configs.size() << " config(s)";
      EXPECT_NE(r.error().find(c.error), std::string::npos) << r.error();
      EXPECT_LT(r.error().size(), 1000u) << r.error();
    }
  }
}

TEST(ReliabilityConvert, ConfigsThatPassValidationHaveFiniteCostsAndPositiveOutputs) {
  // Extremes that are valid must not overflow the cost model (UBSan watches the arithmetic).
  auto j = nlohmann::ordered_json::parse(testing::FwdConfigsText(1));
  auto& a = j[0]["profiler_args"];
  a["G"] = 2147483647;
  a["N"] = 2147483647;
  a["K"] = 2147483647;
  a["C"] = 2147483647;
  a["input_spatial"] = {2147483647, 2147483647};
  auto r = ConvertText(j.dump(), ConvertOptions{});
  if (r.ok()) {
    for (const auto& cfg : r->configs) {
      EXPECT_TRUE(std::isfinite(cfg.Flops()));
      EXPECT_TRUE(std::isfinite(cfg.Bytes(4)));
      for (int64_t o : cfg.OutputSpatial()) EXPECT_GT(o, 0);
    }
  } else {
    EXPECT_NE(r.error().find("config 1"), std::string::npos) << r.error();
  }
}

TEST(ReliabilityCkOutput, GarbageAndHugeLinesStayBoundedAndNeverThrow) {
  CkOutputParser p;
  std::mt19937 rng(5);
  std::string noise(1 << 20, '\0');
  for (auto& ch : noise) ch = static_cast<char>(rng());
  p.Feed(noise);
  p.Feed(std::string(8 << 20, 'x'));  // one 8 MiB line
  p.Feed("\n");
  for (const char* line : {
           "Perf: nan ms, nan TFlops, nan GB/s, N\n",
           "Perf: 1e999 ms, -1e999 TFlops, 1e-999 GB/s, Overflow<1, 2>\n",
           "Perf: -0 ms, inf TFlops, -inf GB/s, Neg\n",
           "Perf: 0x1p3 ms, 0x10 TFlops, 1e+ GB/s, Hex\n",
           "Perf:\n",
           "Perf: 1 ms\n",
           "Perf: 1 ms, 2 TFlops\n",
           "Perf: , , , \n",
           "\033[36mvalids: 99999999999999999999\033[0m\n",
           "valids: -5\n",
           "found 99999999999999999999999 instances\n",
           "\033[",
           "31m\033[999999999999;m\033]0;title\a\033\n",
           "Best configuration parameters:\n",
           "name: \n",
           "avg_time: nan\n",
           "tflops: 1e999\n",
           "GB/s: x, SplitK -99999999999999999999\n",
           "name: X (instance 99999999999999999999)\n",
       }) {
    p.Feed(line);
  }
  p.FeedStderr(std::string(4 << 20, '\n'));
  p.FeedStderr("Error: Incorrect results!");
  p.Finish();
  const CkPerf& perf = p.perf();
  EXPECT_GE(perf.truncated_lines, 1u);
  EXPECT_LE(perf.top.size(), 5u);
  for (const auto& t : perf.top) EXPECT_LE(t.name.size(), CkOutputParser::kMaxLineBytes);
  EXPECT_TRUE(perf.verification_failed);
  Outcome o = ClassifyExit(false, 0, perf, std::string(100000, 'e'));
  EXPECT_LT(o.Summary().size(), 2000u);
}

TEST(ReliabilityCkOutput, ChunkingNeverChangesTheParse) {
  const std::string out = std::string(
      "input: dim 5, lengths {1, 2, 3, 4, 5}\n"
      "found 3 instances\n"
      "Perf:   0.5 ms, 10 TFlops, 100 GB/s, A<1, 2>\r\n"
      "B<3> does not support this problem\n"
      "Perf:   0.25 ms, 20 TFlops, 200 GB/s, \033[32mC<4, 5>\033[0m, SplitK 4 (best occupancy)\n"
      "\033[36mvalids: 2\033[0m\n"
      "Best configuration parameters:\n"
      "name: C<4, 5> (instance 2)\n"
      "avg_time: 0.25\n"
      "tflops: 20\n"
      "GB/s: 200, SplitK 4\n");
  CkOutputParser whole;
  whole.Feed(out);
  whole.Finish();
  const CkPerf& w = whole.perf();
  ASSERT_TRUE(w.has_best);
  std::mt19937 rng(3);
  for (int round = 0; round < 300; ++round) {
    CkOutputParser p;
    size_t at = 0;
    while (at < out.size()) {
      size_t n = 1 + rng() % 17;
      p.Feed(std::string_view(out).substr(at, n));
      at += n;
    }
    p.Finish();
    const CkPerf& c = p.perf();
    ASSERT_EQ(c.best_name, w.best_name) << "round " << round;
    ASSERT_EQ(c.tflops, w.tflops);
    ASSERT_EQ(c.split_k, w.split_k);
    ASSERT_EQ(c.valids, w.valids);
    ASSERT_EQ(c.instances_tried, w.instances_tried);
    ASSERT_EQ(c.instances_found, w.instances_found);
    ASSERT_EQ(c.lines, w.lines);
  }
}

TEST(ReliabilityDaemonConfig, BadValuesAreErrorsNamingTheKey) {
  testing::TempDir dir;
  const FrameCase cases[] = {
      {"not JSON", "{", "not valid JSON"},
      {"a list", "[]", "must be a JSON object"},
      {"unknown key", R"({"sockets": "/x"})", "key 'sockets' is not a known setting"},
      {"timeout negative", R"({"timeout": -1})", "key 'timeout' must be a number"},
      {"timeout string", R"({"timeout": "30"})", "key 'timeout' must be a number"},
      {"max_clients 0", R"({"max_clients": 0})", "key 'max_clients' must be a number"},
      {"client_timeout 0", R"({"client_timeout": 0})", "key 'client_timeout'"},
      {"max_frame_bytes tiny", R"({"max_frame_bytes": 10})", "key 'max_frame_bytes'"},
      {"max_connections_per_user 0", R"({"max_connections_per_user": 0})",
       "key 'max_connections_per_user' must be a number from 1"},
      {"max_streams_per_user 0", R"({"max_streams_per_user": 0})",
       "key 'max_streams_per_user' must be a number from 1"},
      {"admin_reserved_clients -1", R"({"admin_reserved_clients": -1})",
       "key 'admin_reserved_clients' must be a number from 0"},
      {"max_request_bytes tiny", R"({"max_request_bytes": 10})", "key 'max_request_bytes'"},
      {"max_request_bytes_per_user string", R"({"max_request_bytes_per_user": "1G"})",
       "key 'max_request_bytes_per_user' must be a number"},
      {"pin_env number", R"({"pin_env": 5})", "key 'pin_env' must be a string or a list"},
      {"gpus list of strings", R"({"gpus": ["0"]})", "key 'gpus'"},
      {"full_sync string", R"({"full_sync": "yes"})", "key 'full_sync' must be true or false"},
      {"socket_mode list", R"({"socket_mode": [6]})", "key 'socket_mode'"},
      {"deep", "{\"x\":" + Deep(10000) + "}", "nested deeper"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File("ckprofd.json");
    testing::WriteFile(path, c.input);
    Result<DaemonConfig> r = Result<DaemonConfig>(Error{"not run"});
    ASSERT_NO_THROW(r = LoadDaemonConfigFile(path, DaemonConfig{}));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find(c.error), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(path), std::string::npos) << "the error names the file";
  }
}

// A wrong value must never throw out of LoadDaemonConfigFile: on SIGHUP an exception ends
// io.run() and with it the daemon and every running profiler's bookkeeping.
TEST(ReliabilityDaemonConfig, MalformedNumbersAreErrorsNotExceptionsOrOverflows) {
  testing::TempDir dir;
  const FrameCase cases[] = {
      {"socket_mode words", R"({"socket_mode": "rw-rw----"})", "key 'socket_mode'"},
      {"socket_mode empty", R"({"socket_mode": ""})", "key 'socket_mode'"},
      {"socket_mode huge", R"({"socket_mode": "99999999999999999999"})", "key 'socket_mode'"},
      {"socket_mode 9", R"({"socket_mode": "0999"})", "key 'socket_mode'"},
      {"socket_mode too wide", R"({"socket_mode": 65535})", "key 'socket_mode'"},
      {"max_attempts 1e300", R"({"max_attempts": 1e300})", "key 'max_attempts'"},
      {"max_clients 1e300", R"({"max_clients": 1e300})", "key 'max_clients'"},
      {"max_frame_bytes 1e300", R"({"max_frame_bytes": 1e300})", "key 'max_frame_bytes'"},
      {"max_connections_per_user 1e300", R"({"max_connections_per_user": 1e300})",
       "key 'max_connections_per_user'"},
      {"max_request_bytes 1e300", R"({"max_request_bytes": 1e300})", "key 'max_request_bytes'"},
      {"capture_bytes 1e300", R"({"capture_bytes": 1e300})", "key 'capture_bytes'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File("ckprofd.json");
    testing::WriteFile(path, c.input);
    Result<DaemonConfig> r = Result<DaemonConfig>(Error{"not run"});
    ASSERT_NO_THROW(r = LoadDaemonConfigFile(path, DaemonConfig{}));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find(c.error), std::string::npos) << r.error();
  }
}

}  // namespace
}  // namespace ckprof
