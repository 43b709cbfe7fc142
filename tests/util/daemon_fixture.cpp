#include "tests/util/daemon_fixture.h"

#include <sys/stat.h>

namespace ckprof::testing {

void EmulatorDaemonTest::SetUp() {
  chmod(dir_.path().c_str(), 0755);
  emu_log_ = dir_.File("emu.log");
  WriteFile(emu_log_, "");
  chmod(emu_log_.c_str(), 0666);
}

LaunchedDaemon::Options EmulatorDaemonTest::EmulatorOptions(const std::string& gpus,
                                                            const std::string& config_json) const {
  LaunchedDaemon::Options o;
  o.dir = dir_.path();
  o.gpus = gpus;
  o.env = {"CKEMU_LOG=" + emu_log_, "CKEMU_TIME_SCALE=0"};
  o.config_json = config_json;
  o.args = {"--profiler-path", SharedBinPath("ckprofiler-emu")};
  return o;
}

void EmulatorDaemonTest::Start(const LaunchedDaemon::Options& o) {
  std::string error;
  ASSERT_TRUE(daemon_.Start(o, &error)) << error;
}

}  // namespace ckprof::testing
