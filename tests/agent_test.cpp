// ckprof-agent against a stand-in for ckprofd (this test): the agent's side of the allocation
// mode's channel. Real processes, a real TCP connection, the CK emulator as the profiler.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/json_util.h"
#include "daemon/agent_channel.h"
#include "daemon/run_result_codec.h"
#include "tests/util/commands.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::BinPath;

std::vector<std::string> Emu(int n = 4) { return testing::EmulatorArgv(n); }

// One connection accepted from the agent, read line by line with a deadline.
class Conn {
 public:
  explicit Conn(int fd) : fd_(fd) {}
  ~Conn() { close(fd_); }
  // The next line (without '\n'), or nullopt when the agent closed or 30 s passed.
  std::optional<std::string> ReadLine(double timeout_s = 30) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    for (;;) {
      if (size_t nl = in_.find('\n'); nl != std::string::npos) {
        std::string line = in_.substr(0, nl);
        in_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[65536];
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      in_.append(buf, static_cast<size_t>(n));
    }
  }
  void Write(const std::string& text) {
    ASSERT_EQ(write(fd_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }

  // The opening: the agent's hello, our challenge; the channel of ckprofd's end.
  void Open(const std::string& secret, const std::string& allocation = "a1") {
    auto hello_line = ReadLine();
    ASSERT_TRUE(hello_line) << "no hello";
    auto hello = ParseAgentHello(*hello_line);
    ASSERT_TRUE(hello.ok()) << hello.error();
    EXPECT_EQ(hello->allocation, allocation);
    const std::string nonce = *RandomHex(16);
    Write(AgentChallengeLine(nonce) + "\n");
    channel_.emplace(secret, AgentRole::kDaemon, hello->nonce, nonce);
  }
  // The agent's next message, opened; skips live output unless `output`.
  json Next(bool output = false) {
    for (;;) {
      auto line = ReadLine();
      if (!line) return json();
      auto body = channel_->Open(*line);
      EXPECT_TRUE(body.ok()) << body.error();
      if (!body.ok()) return json();
      json m = json::parse(*body);
      if (m.value("type", "") == "output" && !output) {
        output_ += m.value("data", "");
        continue;
      }
      return m;
    }
  }
  void Send(const json& m) { Write(*channel_->Seal(DumpJson(m))); }
  AgentChannel& channel() { return *channel_; }
  const std::string& output() const { return output_; }

 private:
  int fd_;
  std::string in_;
  std::optional<AgentChannel> channel_;
  std::string output_;  // live output seen
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener_, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(listen(listener_, 8), 0);
    socklen_t len = sizeof a;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    secret_file_ = dir_.File("secret");
    testing::WriteFile(secret_file_, secret_);
    chmod(secret_file_.c_str(), 0600);
  }
  void TearDown() override { close(listener_); }

  std::unique_ptr<testing::BackgroundCommand> StartAgent(double reconnect_s = 600) {
    return std::make_unique<testing::BackgroundCommand>(std::vector<std::string>{
        BinPath("ckprof-agent"), "--connect", "127.0.0.1:" + std::to_string(port_), "--allocation",
        "a1", "--secret-file", secret_file_, "--reconnect-s", std::to_string(reconnect_s)});
  }
  // The agent's next connection (within 30 s).
  std::unique_ptr<Conn> Accept() {
    pollfd p = {listener_, POLLIN, 0};
    if (poll(&p, 1, 30000) != 1) return nullptr;
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    return fd >= 0 ? std::make_unique<Conn>(fd) : nullptr;
  }
  static json RunMessage(int64_t run, std::vector<std::string> argv, int64_t timeout_ms = 0) {
    return {{"type", "run"},
            {"run", run},
            {"argv", argv},
            {"set_env", json::array({json::array({"CKEMU_TIME_SCALE", "0"}),
                                     json::array({"HIP_VISIBLE_DEVICES", "3"})})},
            {"timeout_ms", timeout_ms},
            {"grace_ms", 1000}};
  }

  testing::TempDir dir_;
  const std::string secret_ = "0123456789abcdef0123456789abcdef";
  std::string secret_file_;
  int listener_ = -1;
  int port_ = 0;
};

TEST_F(AgentTest, RunsWhatItIsSentAndReportsTheWholeResult) {
  auto agent = StartAgent();
  auto conn = Accept();
  ASSERT_TRUE(conn);
  conn->Open(secret_);
  json ready = conn->Next();
  ASSERT_EQ(ready.value("type", ""), "ready") << ready.dump();
  EXPECT_EQ(ready["running"], json::array());
  EXPECT_EQ(ready.value("pid", 0), agent->pid());

  conn->Send(RunMessage(7, Emu()));
  json started = conn->Next();
  ASSERT_EQ(started.value("type", ""), "started") << started.dump();
  EXPECT_EQ(started.value("run", 0), 7);
  json ended = conn->Next();
  ASSERT_EQ(ended.value("type", ""), "ended") << ended.dump();
  auto r = RunResultFromJson(ended["result"]);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->outcome.kind, Outcome::Kind::kSucceeded) << r->outcome.Summary();
  EXPECT_TRUE(r->perf.has_best);
  EXPECT_GT(r->perf.valids, 0);
  EXPECT_FALSE(r->perf.top.empty());
  EXPECT_EQ(r->pid, started.value("pid", 0));
  // Pinned as ckprofd said: the emulator prints the GPU it sees.
  EXPECT_NE(r->stdout_capture.find("HIP_VISIBLE_DEVICES=3"), std::string::npos)
      << r->stdout_capture.substr(0, 400);
  EXPECT_FALSE(conn->output().empty()) << "no live output";

  conn->Send({{"type", "ack"}, {"run", 7}});
  conn->Send({{"type", "release"}});
  testing::CommandResult done = agent->Finish();
  EXPECT_EQ(done.exit_code, 0) << done.err;
}

TEST_F(AgentTest, AnEndIsSentAgainUntilAcknowledgedAndARunOutlivesItsConnection) {
  auto agent = StartAgent();
  auto conn = Accept();
  ASSERT_TRUE(conn);
  conn->Open(secret_);
  ASSERT_EQ(conn->Next().value("type", ""), "ready");
  // A run that hangs (cancelled below), then the connection drops: ckprofd restarted.
  conn->Send(RunMessage(1, Emu(9001)));
  ASSERT_EQ(conn->Next().value("type", ""), "started");
  conn.reset();

  conn = Accept();
  ASSERT_TRUE(conn) << "the agent did not connect again";
  conn->Open(secret_);
  json ready = conn->Next();
  ASSERT_EQ(ready.value("type", ""), "ready");
  EXPECT_EQ(ready["running"], json::parse(R"([{"run":1,"gpu":0}])")) << "the run did not go on";
  EXPECT_EQ(ready["ended"], json::array());
  conn->Send({{"type", "cancel"}, {"run", 1}});
  json ended = conn->Next();
  ASSERT_EQ(ended.value("type", ""), "ended");
  EXPECT_EQ(RunResultFromJson(ended["result"])->outcome.kind, Outcome::Kind::kCancelled);
  // Not acknowledged: the next connection gets it again; a run message repeated is no new run.
  conn.reset();
  conn = Accept();
  ASSERT_TRUE(conn);
  conn->Open(secret_);
  json ready2 = conn->Next();
  ASSERT_EQ(ready2["running"], json::array());
  EXPECT_EQ(ready2["ended"], json::array({1})) << "the ready does not name the end it resends";
  json again = conn->Next();
  ASSERT_EQ(again.value("type", ""), "ended");
  EXPECT_EQ(again.value("run", 0), 1);
  conn->Send(RunMessage(1, Emu()));
  conn->Send({{"type", "ack"}, {"run", 1}});
  conn->Send({{"type", "release"}});
  EXPECT_EQ(agent->Finish().exit_code, 0);
}

TEST_F(AgentTest, AForgedMessageIsRefusedAndRunsNothing) {
  auto agent = StartAgent();
  auto conn = Accept();
  ASSERT_TRUE(conn);
  conn->Open(secret_);
  ASSERT_EQ(conn->Next().value("type", ""), "ready");
  // Someone who does not know the secret, on this connection: a run of a shell.
  AgentChannel forger("not the secret", AgentRole::kDaemon, std::string(32, '0'),
                      std::string(32, '0'));
  conn->Write(
      *forger.Seal(DumpJson(RunMessage(2, {"/bin/sh", "-c", "touch " + dir_.File("pwned")}))));
  // The agent drops that connection and comes back; nothing ran.
  EXPECT_FALSE(conn->ReadLine(10)) << "the connection stayed open";
  conn = Accept();
  ASSERT_TRUE(conn);
  conn->Open(secret_);
  EXPECT_EQ(conn->Next()["running"], json::array());
  EXPECT_FALSE(std::filesystem::exists(dir_.File("pwned")));
  conn->Send({{"type", "release"}});
  EXPECT_EQ(agent->Finish().exit_code, 0);
}

TEST_F(AgentTest, WithoutCkprofdItGivesUpAfterReconnectS) {
  close(listener_);
  listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // nobody listens on the port
  auto agent = StartAgent(/*reconnect_s=*/1);
  testing::CommandResult r = agent->Finish(60);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("has not answered for"), std::string::npos) << r.err;
}

TEST_F(AgentTest, RefusesToStartWithoutWhatItNeeds) {
  testing::CommandResult r = testing::RunCommand({BinPath("ckprof-agent"), "--connect", "x:1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--allocation and --secret-file are needed"), std::string::npos) << r.err;
  r = testing::RunCommand({BinPath("ckprof-agent"), "--connect", "127.0.0.1:1", "--allocation",
                           "a1", "--secret-file", dir_.File("none")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot read the secret"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ckprof
