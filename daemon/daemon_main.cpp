#include "daemon/daemon_main.h"

#include <iostream>

namespace ckprof {

int DaemonMain(int, char**) {
  std::cerr << "ckprofd: not built yet\n";
  return 1;
}

}  // namespace ckprof
