// DaemonMain: parses ckprofd's flags and config file, then runs the daemon until SIGTERM.
#pragma once

namespace ckprof {

int DaemonMain(int argc, char** argv);

}  // namespace ckprof
