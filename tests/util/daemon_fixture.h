// EmulatorDaemonTest: the fixture of the integration tests that drive one ckprofd of their own
// with the CK emulator as its profiler. Test threads only.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"

namespace ckprof::testing {

// Gives each test a directory dir_ (mode 0755: tasks run as other users write there) for a
// ckprofd's socket, state, log and config, and the emulator's log emu_log_ (dir_/emu.log, mode
// 0666, empty at the start; read it with ReadEmuRuns). The test starts daemon_ (Start), as
// often as it likes on the same state dir; daemon_'s destructor stops it, then SIGKILLs what
// it left running. A derived fixture's SetUp calls this one's first.
class EmulatorDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override;

  // Options for daemon_: in dir_, on `gpus`, with `config_json` (none when empty); the
  // emulator as the default profiler (--profiler-path, the copy every user may run), logging
  // its runs to emu_log_ (CKEMU_LOG), with no modelled run time (CKEMU_TIME_SCALE=0: an entry
  // added to env replaces it).
  LaunchedDaemon::Options EmulatorOptions(const std::string& gpus = "0-3",
                                          const std::string& config_json = "") const;
  // Starts daemon_ with `o` (EmulatorOptions() when none); a daemon that does not start fails
  // the test.
  void Start(const LaunchedDaemon::Options& o);
  void Start() { Start(EmulatorOptions()); }

  TempDir dir_;
  std::string emu_log_;
  LaunchedDaemon daemon_;
};

}  // namespace ckprof::testing
