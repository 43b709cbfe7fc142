// LocalDaemon: a private ckprofd on a temporary socket and state dir, for `ckprof run --local`
// and the demo. The client uses it like any daemon — one scheduler, one runner, one code path —
// and stops it (SIGTERM, wait) when done. Single-threaded.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace ckprof {

struct LocalDaemonOptions {
  std::string gpus = "auto";  // as ckprofd --gpus; "auto" falls back to "0" when none is found
  std::string profiler_path;  // absolute
  std::string pin_env;        // "" = ckprofd's default
  std::string timeout;        // "" = none
};

class LocalDaemon {
 public:
  // Starts ckprofd (next to this executable, else $CKPROF_DAEMON, else on PATH) and waits for
  // its READY=1 (systemd's notify protocol on a private datagram socket): no polling.
  static Result<std::unique_ptr<LocalDaemon>> Start(const LocalDaemonOptions& options);
  ~LocalDaemon();
  LocalDaemon(const LocalDaemon&) = delete;
  LocalDaemon& operator=(const LocalDaemon&) = delete;

  const std::string& socket() const { return socket_; }
  const std::string& gpus() const { return gpus_; }
  // SIGTERM, then waits for it to exit. Ok when it exited 0.
  Status Stop();

 private:
  LocalDaemon() = default;
  std::string dir_, socket_, log_, gpus_;
  pid_t pid_ = -1;
};

// Where the ckprofd binary is: $CKPROF_DAEMON, next to this executable, or "ckprofd" on PATH.
std::string FindDaemonBinary();

}  // namespace ckprof
