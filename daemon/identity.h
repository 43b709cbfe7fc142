// Identity: who is asking, as the kernel says (SO_PEERCRED, daemon/peer.h), never as the client
// says. Plain value type; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ckprof {

// Who is asking, from SO_PEERCRED (never from what the client says).
struct Identity {
  uint32_t uid = 0;
  uint32_t gid = 0;
  int32_t pid = 0;
  std::string user;              // name from the password database, else the uid
  std::vector<uint32_t> groups;  // supplementary groups
  bool admin = false;            // root, or a member of the configured admin group
};

}  // namespace ckprof
