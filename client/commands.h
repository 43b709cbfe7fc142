// The `ckprof` commands. Each takes the arguments after its own name and returns the process
// exit code. One file per command family implements them.
#pragma once

#include <string>
#include <vector>

#include "common/protocol.h"

namespace ckprof {

// Global options, given before or after the command (`ckprof --socket PATH COMMAND ...`).
struct GlobalOptions {
  std::string socket;  // Empty: CKPROF_SOCKET, else /run/ckprofd/ckprofd.sock.
};

using Args = std::vector<std::string>;

int RunConvertCommand(const Args& args);                              // convert_cmd.cpp
int RunSubmitCommand(const GlobalOptions& global, const Args& args);  // submit_cmd.cpp
int RunStatusCommand(const GlobalOptions& global, const Args& args, bool list_mode);
int RunGpusCommand(const GlobalOptions& global, const Args& args);                // status_cmd.cpp
int RunWatchCommand(const GlobalOptions& global, const Args& args, bool silent);  // watch_cmd.cpp
int RunResultsCommand(const GlobalOptions& global, const Args& args);             // results_cmd.cpp
int RunPingCommand(const GlobalOptions& global, const Args& args);                // control_cmd.cpp
int RunGpuActionCommand(const GlobalOptions& global, const Args& args, bool drain);
// ckprof hold / release JOB...: a held job's queued tasks do not start.
int RunHoldCommand(const GlobalOptions& global, const Args& args, bool hold);
int RunRunCommand(const GlobalOptions& global, const Args& args);      // run_cmd.cpp
int RunCompareCommand(const GlobalOptions& global, const Args& args);  // compare_cmd.cpp

int RunLogCommand(const GlobalOptions& global, const Args& args);    // log_cmd.cpp
int RunEditCommand(const GlobalOptions& global, const Args& args);   // edit_cmd.cpp
int RunCleanCommand(const GlobalOptions& global, const Args& args);  // edit_cmd.cpp

int RunBestCommand(const GlobalOptions& global, const Args& args);    // best_cmd.cpp
int RunUsageCommand(const GlobalOptions& global, const Args& args);   // usage_cmd.cpp
int RunReportCommand(const GlobalOptions& global, const Args& args);  // report_cmd.cpp

int RunJobActionCommand(const GlobalOptions& global, const Args& args, RequestType type);

// The asking user's use against the per-user limits, two lines: what status and usage end
// with (status_cmd.cpp).
std::string UseLines(const UserUse& u);

}  // namespace ckprof
