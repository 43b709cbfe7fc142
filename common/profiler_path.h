// Where the CK profiler lives: resolving a user's "profiler path" into the form found.
//
// A profiler path may be the `ckProfiler` executable itself (or any executable that behaves like
// it, such as ckprofiler-emu), a directory (usually build/bin) holding `ckProfiler`, or a
// directory holding the per-operation executables `profile_grouped_conv_{fwd,bwd_data,
// bwd_weight}` (docs/ck-profiler.md). Resolve once per path and keep the target.
// Plain functions and value types; any thread.
#pragma once

#include <array>
#include <string>

#include "common/ck_config.h"
#include "common/result.h"

namespace ckprof {

struct ProfilerTarget {
  enum class Form { kCkProfiler, kPerOpExecutables };
  Form form = Form::kCkProfiler;
  // kCkProfiler: the absolute path of the executable. kPerOpExecutables: the absolute directory.
  // Absolute but not symlink-resolved: the executable's name (argv[0]) is kept as given.
  std::string path;
  // kPerOpExecutables: which of profile_grouped_conv_{fwd,bwd_data,bwd_weight} exist, indexed
  // by ConvOp. All true for kCkProfiler.
  std::array<bool, 3> has_op = {true, true, true};

  // "ckProfiler /opt/ck/bin/ckProfiler" or "per-operation executables in /ck/build/bin
  // (profile_grouped_conv_fwd, profile_grouped_conv_bwd_data; missing
  // profile_grouped_conv_bwd_weight)".
  std::string Describe() const;
  bool Supports(ConvOp op) const { return has_op[static_cast<size_t>(op)]; }
  // The executable that runs `op`: `path` for kCkProfiler, path/profile_grouped_conv_<op> else.
  std::string ExecutableFor(ConvOp op) const;
};

// Resolves `path` (relative paths against the current directory) in this order: an executable
// file; a directory holding ckProfiler; a directory holding any profile_grouped_conv_*. An
// executable file named profile_grouped_conv_* resolves to its directory. The error says what
// was looked for, e.g. "no CK profiler in /x: looked for /x/ckProfiler and
// /x/profile_grouped_conv_{fwd,bwd_data,bwd_weight}".
Result<ProfilerTarget> ResolveProfiler(const std::string& path);

}  // namespace ckprof
