// Users and groups created for a test and removed after it (root only: useradd, groupadd), for
// the tests of who may do what and which uid a task runs as. Test threads only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ckprof::testing {

// A throwaway system user created for a test (root only; useradd), removed on destruction.
// `groups`: supplementary groups to join (they must exist).
class SystemUser {
 public:
  explicit SystemUser(const std::string& name, const std::vector<std::string>& groups = {});
  ~SystemUser();
  SystemUser(const SystemUser&) = delete;
  SystemUser& operator=(const SystemUser&) = delete;
  bool ok() const { return ok_ && uid_ != 0; }
  const std::string& name() const { return name_; }
  uint32_t uid() const { return uid_; }
  uint32_t gid() const { return gid_; }
  // A command prefix that runs the rest as this user (setpriv, with the user's groups).
  std::vector<std::string> As() const;

 private:
  std::string name_;
  bool ok_ = false;
  uint32_t uid_ = 0, gid_ = 0;
};

// A throwaway group (root only; groupadd), removed on destruction.
class SystemGroup {
 public:
  explicit SystemGroup(const std::string& name);
  ~SystemGroup();
  SystemGroup(const SystemGroup&) = delete;
  SystemGroup& operator=(const SystemGroup&) = delete;
  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  uint32_t gid() const { return gid_; }

 private:
  std::string name_;
  bool ok_ = false;
  uint32_t gid_ = 0;
};

}  // namespace ckprof::testing
