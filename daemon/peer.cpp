#include "daemon/peer.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace ckprof {

Identity IdentityOf(uint32_t uid, uint32_t gid, const std::string& admin_group) {
  Identity id;
  id.uid = uid;
  id.gid = gid;
  id.user = std::to_string(uid);
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) {
    id.user = found->pw_name;
    int n = 64;
    std::vector<gid_t> groups(static_cast<size_t>(n));
    if (getgrouplist(found->pw_name, gid, groups.data(), &n) < 0) {
      groups.resize(static_cast<size_t>(n));
      getgrouplist(found->pw_name, gid, groups.data(), &n);
    }
    groups.resize(static_cast<size_t>(std::max(n, 0)));
    id.groups.assign(groups.begin(), groups.end());
  } else {
    id.groups = {gid};
  }
  id.admin = uid == 0 || uid == getuid();
  if (!id.admin && !admin_group.empty()) {
    group gr{};
    group* g = nullptr;
    if (getgrnam_r(admin_group.c_str(), &gr, buf.data(), buf.size(), &g) == 0 && g) {
      id.admin = gid == g->gr_gid ||
                 std::find(id.groups.begin(), id.groups.end(), g->gr_gid) != id.groups.end();
    }
  }
  return id;
}

Result<Identity> PeerIdentity(int fd, const std::string& admin_group) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return MakeError(std::string("cannot read the peer's credentials: ") + std::strerror(errno));
  }
  Identity id = IdentityOf(cred.uid, cred.gid, admin_group);
  id.pid = cred.pid;
  return id;
}

}  // namespace ckprof
