#include "tests/util/processes.h"

#include <signal.h>
#include <unistd.h>

namespace ckprof::testing {

void KillMarkedProcesses(const std::string& marker) {
  for (int pid : ProcessesWithEnv(marker)) {
    pid_t group = getpgid(pid);
    if (group > 1 && group != getpgrp()) {
      kill(-group, SIGKILL);
    } else {
      kill(pid, SIGKILL);
    }
  }
}

}  // namespace ckprof::testing
