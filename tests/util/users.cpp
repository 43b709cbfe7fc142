#include "tests/util/users.h"

#include <grp.h>
#include <pwd.h>

#include "tests/util/commands.h"

namespace ckprof::testing {

SystemUser::SystemUser(const std::string& name, const std::vector<std::string>& groups)
    : name_(name) {
  RunCommand({"userdel", name_});
  std::vector<std::string> argv = {"useradd", "--no-create-home", "--shell", "/usr/sbin/nologin"};
  if (!groups.empty()) {
    std::string list;
    for (const auto& g : groups) list += (list.empty() ? "" : ",") + g;
    argv.insert(argv.end(), {"--groups", list});
  }
  argv.push_back(name_);
  // Tests run in parallel: useradd fails at once while another holds /etc/passwd's lock.
  for (int attempt = 0; attempt < 50 && !ok_; ++attempt) ok_ = RunCommand(argv).exit_code == 0;
  if (passwd* pw = getpwnam(name_.c_str()); ok_ && pw) {
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
  }
}

SystemUser::~SystemUser() {
  if (!ok_) return;
  for (int attempt = 0; attempt < 50; ++attempt) {
    // --force: a daemon started as this user may still be running when the test ends.
    int code = RunCommand({"userdel", "--force", name_}).exit_code;
    if (code != 1 && code != 10) break;  // 1, 10: a file is locked by another test
  }
}

std::vector<std::string> SystemUser::As() const {
  return {"setpriv", "--reuid=" + name_, "--regid=" + name_, "--init-groups", "--"};
}

SystemGroup::SystemGroup(const std::string& name) : name_(name) {
  RunCommand({"groupdel", name_});
  for (int attempt = 0; attempt < 50 && !ok_; ++attempt) {
    ok_ = RunCommand({"groupadd", name_}).exit_code == 0;
  }
  if (group* g = getgrnam(name_.c_str()); ok_ && g) gid_ = g->gr_gid;
  ok_ = ok_ && gid_ != 0;
}

SystemGroup::~SystemGroup() {
  if (!ok_) return;
  for (int attempt = 0; attempt < 50; ++attempt) {
    int code = RunCommand({"groupdel", name_}).exit_code;
    if (code != 10) break;  // 10: the group file is locked by another test
  }
}

}  // namespace ckprof::testing
