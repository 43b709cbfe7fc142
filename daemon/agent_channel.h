// AgentChannel: the messages between ckprofd and an allocation's agent (the Slurm executor's
// allocation mode, issue 35) made unforgeable and unreplayable over a plain TCP connection that
// any account on the cluster can reach.
//
// Both ends know the allocation's secret: random bytes ckprofd writes, before it submits the
// allocation, into a file under the shared work_dir that only the allocation's user (and root)
// may read. A connection opens with one line each way, in the clear:
//   agent:   "ckprof-agent/1 hello <allocation> <agent nonce>"
//   ckprofd: "ckprof-agent/1 challenge <daemon nonce>"
// (nonces: 16 random bytes in hex, fresh per connection). Every line after is sealed:
//   "<seq> <mac> <body>"   mac = hex HMAC-SHA256(secret, "ckprof-agent/1" NUL sender NUL
//                                                agent nonce NUL daemon nonce NUL seq NUL body)
// where each sender numbers its lines 1, 2, ... A receiver accepts a line only when its mac
// holds for the other end as sender and the next number: a line made without the secret, one
// replayed from this connection (its number is past) or from another (its nonces differ), or one
// reflected back to its sender (the sender differs) is refused, and the receiver then closes
// the connection. The first sealed line of each side proves that side knows the secret.
//
// Plain value type; not thread-safe (one per connection, on its owner's thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace ckprof {

inline constexpr std::string_view kAgentProtocol = "ckprof-agent/1";

enum class AgentRole { kDaemon, kAgent };

// `bytes` random bytes from the kernel (getrandom), in hex.
Result<std::string> RandomHex(size_t bytes);

// The opening lines (without their '\n') and what they carry.
std::string AgentHelloLine(std::string_view allocation, std::string_view agent_nonce);
std::string AgentChallengeLine(std::string_view daemon_nonce);
struct AgentHello {
  std::string allocation, nonce;
};
Result<AgentHello> ParseAgentHello(std::string_view line);
Result<std::string> ParseAgentChallenge(std::string_view line);  // the daemon's nonce

class AgentChannel {
 public:
  // `self`: which end this is. The nonces as exchanged in the opening lines.
  AgentChannel(std::string secret, AgentRole self, std::string agent_nonce,
               std::string daemon_nonce);

  // `body` sealed as this end's next line (with its '\n'). `body` must hold no '\n' (compact
  // JSON has none); one that does is refused.
  Result<std::string> Seal(std::string_view body);
  // The body of the other end's next line (with or without its '\n'), or why it is refused.
  // After a refusal every later line is refused too: the caller closes the connection.
  Result<std::string> Open(std::string_view line);

 private:
  std::string Mac(AgentRole sender, uint64_t seq, std::string_view body) const;

  std::string secret_;
  AgentRole self_;
  std::string agent_nonce_, daemon_nonce_;
  uint64_t sent_ = 0, received_ = 0;
  bool broken_ = false;
};

}  // namespace ckprof
