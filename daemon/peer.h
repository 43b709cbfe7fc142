// Peer identity: who is on the other end of a Unix socket, from the kernel (SO_PEERCRED),
// never from what the client says. Plain functions; any thread.
#pragma once

#include <string>

#include "common/result.h"
#include "daemon/identity.h"

namespace ckprof {

// uid, gid, pid from SO_PEERCRED; the user name and supplementary groups from the system's
// user database; admin when root, the daemon's own user, or a member of `admin_group`.
Result<Identity> PeerIdentity(int fd, const std::string& admin_group);

// Identity of a uid/gid without a socket (for tests and the local runner).
Identity IdentityOf(uint32_t uid, uint32_t gid, const std::string& admin_group);

}  // namespace ckprof
