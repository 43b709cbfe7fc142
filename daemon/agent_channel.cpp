#include "daemon/agent_channel.h"

#include <sys/random.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/sha256.h"

namespace ckprof {

namespace {

bool IsHexNonce(std::string_view s) {
  return s.size() == 32 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// Splits "a b c" at its first `n` - 1 spaces: exactly n parts, the last taking the rest.
std::vector<std::string_view> SplitWords(std::string_view line, size_t n) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < n) {
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) break;
    out.push_back(line.substr(0, sp));
    line.remove_prefix(sp + 1);
  }
  out.push_back(line);
  return out;
}

std::string_view Chomp(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  return line;
}

}  // namespace

Result<std::string> RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error{std::string("getrandom failed: ") + std::strerror(errno)};
    got += static_cast<size_t>(n);
  }
  return Hex(raw);
}

std::string AgentHelloLine(std::string_view allocation, std::string_view agent_nonce) {
  return std::string(kAgentProtocol) + " hello " + std::string(allocation) + " " +
         std::string(agent_nonce);
}

std::string AgentChallengeLine(std::string_view daemon_nonce) {
  return std::string(kAgentProtocol) + " challenge " + std::string(daemon_nonce);
}

Result<AgentHello> ParseAgentHello(std::string_view line) {
  const auto w = SplitWords(Chomp(line), 4);
  if (w.size() != 4 || w[0] != kAgentProtocol || w[1] != "hello") {
    return Error{"not an agent's hello (\"" + std::string(kAgentProtocol) +
                 " hello ALLOCATION NONCE\")"};
  }
  if (w[2].empty() || w[2].size() > 64 ||
      w[2].find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyz-_") != std::string_view::npos) {
    return Error{"an agent's hello names no valid allocation"};
  }
  if (!IsHexNonce(w[3])) return Error{"an agent's hello has no valid nonce (32 hex digits)"};
  return AgentHello{std::string(w[2]), std::string(w[3])};
}

Result<std::string> ParseAgentChallenge(std::string_view line) {
  const auto w = SplitWords(Chomp(line), 3);
  if (w.size() != 3 || w[0] != kAgentProtocol || w[1] != "challenge" || !IsHexNonce(w[2])) {
    return Error{"not ckprofd's challenge (\"" + std::string(kAgentProtocol) +
                 " challenge NONCE\")"};
  }
  return std::string(w[2]);
}

AgentChannel::AgentChannel(std::string secret, AgentRole self, std::string agent_nonce,
                           std::string daemon_nonce)
    : secret_(std::move(secret)),
      self_(self),
      agent_nonce_(std::move(agent_nonce)),
      daemon_nonce_(std::move(daemon_nonce)) {}

std::string AgentChannel::Mac(AgentRole sender, uint64_t seq, std::string_view body) const {
  std::string m(kAgentProtocol);
  m += '\0';
  m += sender == AgentRole::kDaemon ? "daemon" : "agent";
  m += '\0';
  m += agent_nonce_;
  m += '\0';
  m += daemon_nonce_;
  m += '\0';
  m += std::to_string(seq);
  m += '\0';
  m.append(body);
  return Hex(HmacSha256(secret_, m));
}

Result<std::string> AgentChannel::Seal(std::string_view body) {
  if (body.find('\n') != std::string_view::npos) {
    return Error{"a sealed message must be one line"};
  }
  const uint64_t seq = ++sent_;
  return std::to_string(seq) + " " + Mac(self_, seq, body) + " " + std::string(body) + "\n";
}

Result<std::string> AgentChannel::Open(std::string_view line) {
  if (broken_) return Error{"the connection refused an earlier message"};
  broken_ = true;  // until this one is accepted
  line = Chomp(line);
  const auto w = SplitWords(line, 3);
  if (w.size() != 3) return Error{"a message without its number and MAC"};
  uint64_t seq = 0;
  const auto [end, ec] = std::from_chars(w[0].data(), w[0].data() + w[0].size(), seq);
  if (ec != std::errc() || end != w[0].data() + w[0].size()) {
    return Error{"a message whose number is not a number"};
  }
  const AgentRole peer = self_ == AgentRole::kDaemon ? AgentRole::kAgent : AgentRole::kDaemon;
  if (!ConstantTimeEqual(w[1], Mac(peer, seq, w[2]))) {
    return Error{"a message whose MAC does not hold (forged, or for another connection)"};
  }
  if (seq != received_ + 1) {
    return Error{"message " + std::to_string(seq) + " where " + std::to_string(received_ + 1) +
                 " was next (replayed or lost)"};
  }
  received_ = seq;
  broken_ = false;
  return std::string(w[2]);
}

}  // namespace ckprof
