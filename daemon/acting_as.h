// ActingAs: while alive, the calling thread opens, stats and searches files with a user's
// rights (her filesystem uid and gid, and her groups), as the kernel would for a process of
// hers. A root ckprofd looks at a path a user names (her profiler, at submit and at each start)
// this way, so that it opens nothing she could not open herself: no file in another user's
// 0700 directory, no device only root may open, and no answer that tells her whether such a
// file exists.
//
// Per thread: raw system calls (glibc's setgroups would change every thread of the daemon).
// Does nothing where the daemon is not root, or the user is root. Restores the thread's own
// credentials when it ends; a thread that cannot get them back aborts the daemon rather than
// go on with a user's rights.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace ckprof {

class ActingAs {
 public:
  ActingAs(uint32_t uid, uint32_t gid, const std::vector<uint32_t>& groups);
  ~ActingAs();
  ActingAs(const ActingAs&) = delete;
  ActingAs& operator=(const ActingAs&) = delete;

  // False when the switch was needed and failed: then the caller must not go on as root.
  bool ok() const { return ok_; }

 private:
  bool active_ = false;
  bool ok_ = true;
  uid_t saved_fsuid_ = 0;
  gid_t saved_fsgid_ = 0;
  std::vector<gid_t> saved_groups_;
};

}  // namespace ckprof
