#include "daemon/acting_as.h"

#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace ckprof {

namespace {

bool SetThreadGroups(const std::vector<gid_t>& groups) {
  return syscall(SYS_setgroups, groups.size(), groups.empty() ? nullptr : groups.data()) == 0;
}

// setfsuid and setfsgid answer the previous id whether or not they changed it: an invalid id
// (-1) asks for the current one.
uid_t CurrentFsuid() { return static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1))); }
gid_t CurrentFsgid() { return static_cast<gid_t>(setfsgid(static_cast<gid_t>(-1))); }

}  // namespace

ActingAs::ActingAs(uint32_t uid, uint32_t gid, const std::vector<uint32_t>& groups) {
  if (geteuid() != 0 || uid == 0) return;
  const int n = getgroups(0, nullptr);
  if (n < 0) {
    ok_ = false;
    return;
  }
  saved_groups_.resize(static_cast<size_t>(n));
  if (n > 0 && getgroups(n, saved_groups_.data()) != n) {
    ok_ = false;
    return;
  }
  saved_fsuid_ = CurrentFsuid();
  saved_fsgid_ = CurrentFsgid();
  std::vector<gid_t> hers(groups.begin(), groups.end());
  if (!SetThreadGroups(hers)) {
    ok_ = false;
    return;
  }
  active_ = true;
  setfsgid(gid);
  setfsuid(uid);
  ok_ = CurrentFsgid() == gid && CurrentFsuid() == uid;
}

ActingAs::~ActingAs() {
  if (!active_) return;
  setfsuid(saved_fsuid_);
  setfsgid(saved_fsgid_);
  if (CurrentFsuid() != saved_fsuid_ || CurrentFsgid() != saved_fsgid_ ||
      !SetThreadGroups(saved_groups_)) {
    std::fputs("ckprofd: cannot take back its own credentials after acting as a user\n", stderr);
    std::abort();
  }
}

}  // namespace ckprof
