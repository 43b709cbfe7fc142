// The `ckprof` commands. Each takes the arguments after its own name and returns the process
// exit code. One file per command family implements them.
#pragma once

#include <string>
#include <vector>

namespace ckprof {

// Global options given before the command (`ckprof --socket PATH COMMAND ...`).
struct GlobalOptions {
  std::string socket;  // Empty: CKPROF_SOCKET, else /run/ckprofd/ckprofd.sock.
};

using Args = std::vector<std::string>;

int RunConvertCommand(const Args& args);  // convert_cmd.cpp

}  // namespace ckprof
