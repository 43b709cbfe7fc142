#include "daemon/agent_channel.h"

#include <gtest/gtest.h>

#include <string>

#include "daemon/sha256.h"

namespace ckprof {
namespace {

TEST(Sha256, KnownAnswers) {
  // FIPS 180-4's examples, and one across many blocks.
  EXPECT_EQ(Hex(Sha256Of("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hex(Sha256Of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hex(Sha256Of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) million.Add(chunk);
  EXPECT_EQ(Hex(million.Finish()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, HmacKnownAnswers) {
  // RFC 4231 test cases 1, 2 and 6 (a key longer than a block is hashed first).
  EXPECT_EQ(Hex(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(Hex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(Hex(HmacSha256(std::string(131, '\xaa'),
                           "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

// Two ends of one connection, as the opening lines make them.
struct Ends {
  AgentChannel daemon, agent;
};
Ends Connect(const std::string& secret, const std::string& agent_nonce = std::string(32, 'a'),
             const std::string& daemon_nonce = std::string(32, 'd')) {
  return {AgentChannel(secret, AgentRole::kDaemon, agent_nonce, daemon_nonce),
          AgentChannel(secret, AgentRole::kAgent, agent_nonce, daemon_nonce)};
}

TEST(AgentChannel, EachEndOpensWhatTheOtherSealed) {
  Ends c = Connect("s3cret");
  for (int i = 0; i < 3; ++i) {
    auto line = c.agent.Seal(R"({"type":"ready","gpu":0})");
    ASSERT_TRUE(line.ok()) << line.error();
    auto body = c.daemon.Open(*line);
    ASSERT_TRUE(body.ok()) << body.error();
    EXPECT_EQ(*body, R"({"type":"ready","gpu":0})");
    auto reply = c.daemon.Seal(R"({"type":"run","task":)" + std::to_string(i) + "}");
    ASSERT_TRUE(reply.ok());
    auto got = c.agent.Open(*reply);
    ASSERT_TRUE(got.ok()) << got.error();
    EXPECT_EQ(*got, R"({"type":"run","task":)" + std::to_string(i) + "}");
  }
  EXPECT_FALSE(c.agent.Seal("two\nlines").ok());
}

TEST(AgentChannel, RefusesForgedReplayedReflectedAndTamperedLines) {
  const std::string body = R"({"type":"result","task":7,"outcome":"succeeded"})";
  struct Case {
    const char* what;
    std::string line;  // what the daemon is given as the agent's first line
  };
  Ends source = Connect("s3cret");
  const std::string genuine = *source.agent.Seal(body);
  Ends other_secret = Connect("guess");
  Ends other_connection = Connect("s3cret", std::string(32, 'b'));
  Ends reflected = Connect("s3cret");
  std::string tampered = genuine;
  tampered.replace(tampered.find("succeeded"), 9, "crashed!!");
  const Case cases[] = {
      {"made without the secret", *other_secret.agent.Seal(body)},
      {"from another connection (its nonce)", *other_connection.agent.Seal(body)},
      {"the daemon's own line reflected back", *reflected.daemon.Seal(body)},
      {"its body changed", tampered},
      {"its number changed", "2" + genuine.substr(1)},
      {"no MAC", "1 " + body},
      {"not a number", "x " + genuine.substr(2)},
  };
  for (const auto& c : cases) {
    Ends fresh = Connect("s3cret");
    auto opened = fresh.daemon.Open(c.line);
    EXPECT_FALSE(opened.ok()) << c.what;
    // Once refused, the connection takes nothing more, not even a genuine line.
    EXPECT_FALSE(fresh.daemon.Open(genuine).ok()) << c.what;
  }
  // The genuine line is taken once; the same line again is a replay.
  Ends fresh = Connect("s3cret");
  ASSERT_TRUE(fresh.daemon.Open(genuine).ok());
  auto again = fresh.daemon.Open(genuine);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error(), "message 1 where 2 was next (replayed or lost)");
}

TEST(AgentChannel, OpeningLines) {
  auto nonce = RandomHex(16);
  ASSERT_TRUE(nonce.ok()) << nonce.error();
  EXPECT_EQ(nonce->size(), 32u);
  EXPECT_NE(*nonce, *RandomHex(16));
  auto hello = ParseAgentHello(AgentHelloLine("alloc-12", *nonce) + "\n");
  ASSERT_TRUE(hello.ok()) << hello.error();
  EXPECT_EQ(hello->allocation, "alloc-12");
  EXPECT_EQ(hello->nonce, *nonce);
  auto challenge = ParseAgentChallenge(AgentChallengeLine(*nonce));
  ASSERT_TRUE(challenge.ok()) << challenge.error();
  EXPECT_EQ(*challenge, *nonce);
  for (const char* bad : {"", "ckprof-agent/1 hello", "ckprof-agent/2 hello a 0123",
                          "ckprof-agent/1 hello a/../b 00000000000000000000000000000000",
                          "ckprof-agent/1 hello a 0000000000000000000000000000000G",
                          "ckprof-agent/1 hello a 00000000000000000000000000000000 extra"}) {
    EXPECT_FALSE(ParseAgentHello(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParseAgentChallenge("ckprof-agent/1 challenge short").ok());
}

}  // namespace
}  // namespace ckprof
