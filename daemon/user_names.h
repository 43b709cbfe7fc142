// User and group names for messages and logs, from the system's databases. Plain functions;
// any thread (reentrant lookups).
#pragma once

#include <cstdint>
#include <string>

namespace ckprof {

// The user's name, or "uid N" when the database has none.
std::string UserNameOf(uint32_t uid);
// The group's name, or "gid N" when the database has none.
std::string GroupNameOf(uint32_t gid);

}  // namespace ckprof
