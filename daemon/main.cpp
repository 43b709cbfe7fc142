// ckprofd: the multi-user GPU queue daemon. All logic lives in daemon_main.cpp.
#include "daemon/daemon_main.h"

int main(int argc, char** argv) { return ckprof::DaemonMain(argc, argv); }
