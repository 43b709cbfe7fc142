#include "common/profiler_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace ckprof {
namespace {

constexpr ConvOp kOps[] = {ConvOp::kFwd, ConvOp::kBwdData, ConvOp::kBwdWeight};

// True for a regular file (after following links) that we may execute.
bool IsExecutableFile(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         faccessat(AT_FDCWD, p.c_str(), X_OK, AT_EACCESS) == 0;
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  if (ec) return path;
  std::string s = abs.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

Result<ProfilerTarget> ResolveDirectory(const std::string& dir) {
  ProfilerTarget t;
  const std::string ck = dir + "/ckProfiler";
  if (IsExecutableFile(ck)) {
    t.form = ProfilerTarget::Form::kCkProfiler;
    t.path = ck;
    return t;
  }
  t.form = ProfilerTarget::Form::kPerOpExecutables;
  t.path = dir;
  bool any = false;
  for (ConvOp op : kOps) {
    t.has_op[static_cast<size_t>(op)] = IsExecutableFile(t.ExecutableFor(op));
    any = any || t.Supports(op);
  }
  if (any) return t;
  return MakeError("no CK profiler in " + dir + ": looked for " + ck + " and " + dir +
                   "/profile_grouped_conv_{fwd,bwd_data,bwd_weight} (executable files)");
}

}  // namespace

std::string ProfilerTarget::ExecutableFor(ConvOp op) const {
  if (form == Form::kCkProfiler) return path;
  return path + "/" + std::string(OperationTypeName(op));
}

std::string ProfilerTarget::Describe() const {
  if (form == Form::kCkProfiler) return "ckProfiler " + path;
  std::string have, missing;
  for (ConvOp op : kOps) {
    std::string& list = Supports(op) ? have : missing;
    if (!list.empty()) list += ", ";
    list += OperationTypeName(op);
  }
  std::string s = "per-operation executables in " + path + " (" + have;
  if (!missing.empty()) s += "; missing " + missing;
  return s + ")";
}

Result<ProfilerTarget> ResolveProfiler(const std::string& path) {
  if (path.empty()) {
    return MakeError(
        "no profiler path given: expected the ckProfiler executable or a directory "
        "(such as build/bin) holding ckProfiler or profile_grouped_conv_* executables");
  }
  const std::string abs = Absolute(path);
  struct stat st;
  if (stat(abs.c_str(), &st) != 0) {
    return MakeError("profiler path " + abs + ": " + std::strerror(errno) +
                     " (expected the ckProfiler executable or a directory such as build/bin "
                     "holding ckProfiler or profile_grouped_conv_* executables)");
  }
  if (S_ISDIR(st.st_mode)) return ResolveDirectory(abs);
  if (!S_ISREG(st.st_mode)) {
    return MakeError("profiler path " + abs + " is neither an executable file nor a directory");
  }
  // AT_EACCESS: with the effective (and filesystem) ids, so that a root daemon acting as a
  // user (daemon/acting_as.h) asks for her, not for itself.
  if (faccessat(AT_FDCWD, abs.c_str(), X_OK, AT_EACCESS) != 0) {
    return MakeError("profiler path " + abs + " is not executable: " + std::strerror(errno));
  }
  const std::string base = std::filesystem::path(abs).filename().string();
  if (base.rfind("profile_grouped_conv_", 0) == 0) {
    // One per-operation executable: use its directory, which should hold the others.
    return ResolveDirectory(std::filesystem::path(abs).parent_path().string());
  }
  ProfilerTarget t;
  t.form = ProfilerTarget::Form::kCkProfiler;
  t.path = abs;
  return t;
}

}  // namespace ckprof
