#include "daemon/user_names.h"

#include <grp.h>
#include <pwd.h>

#include <vector>

namespace ckprof {

std::string UserNameOf(uint32_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) return pw.pw_name;
  return "uid " + std::to_string(uid);
}

std::string GroupNameOf(uint32_t gid) {
  struct group gr {};
  struct group* found = nullptr;
  std::vector<char> buf(16384);
  if (getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found) return gr.gr_name;
  return "gid " + std::to_string(gid);
}

}  // namespace ckprof
