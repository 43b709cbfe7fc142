// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the authentication of the messages between
// ckprofd and an allocation's agent (daemon/agent_channel.h). Pure functions; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ckprof {

using Sha256Digest = std::array<uint8_t, 32>;

// Incremental SHA-256: Add the bytes, then Finish once.
class Sha256 {
 public:
  Sha256();
  void Add(std::string_view bytes);
  Sha256Digest Finish();

 private:
  void Block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

Sha256Digest Sha256Of(std::string_view bytes);
Sha256Digest HmacSha256(std::string_view key, std::string_view message);

// Lowercase hex of `bytes`.
std::string Hex(std::string_view bytes);
std::string Hex(const Sha256Digest& d);

// Whether two strings are equal, in a time that depends only on their lengths (a MAC compared
// so leaks no prefix).
bool ConstantTimeEqual(std::string_view a, std::string_view b);

}  // namespace ckprof
