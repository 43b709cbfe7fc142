#include "client/main_dispatch.h"

#include <cstring>
#include <functional>
#include <iostream>
#include <string>

#include "client/commands.h"

namespace ckprof {
namespace {

struct Command {
  const char* name;
  const char* summary;
  std::function<int(const GlobalOptions&, const Args&)> run;
};

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {"convert", "convert PyTorch convolutions (IR list or trace) to CK profiler configs",
       [](const GlobalOptions&, const Args& a) { return RunConvertCommand(a); }},
  };
  return commands;
}

std::string TopHelp() {
  std::string s =
      "usage: ckprof [--socket PATH] COMMAND [ARGS...]\n\n"
      "ckprof converts the convolutions of PyTorch models into AMD Composable Kernel (CK)\n"
      "profiler runs and queues them on ckprofd, the shared GPU server's daemon.\n\n"
      "commands:\n";
  for (const auto& c : Commands()) {
    std::string name = c.name;
    name.resize(12, ' ');
    s += "  " + name + c.summary + "\n";
  }
  s +=
      "\nglobal options:\n"
      "  --socket PATH  the daemon's socket (default: $CKPROF_SOCKET, else\n"
      "                 /run/ckprofd/ckprofd.sock)\n"
      "  --version      print the version and exit\n"
      "  -h, --help     show this help; 'ckprof COMMAND --help' shows a command's\n";
  return s;
}

}  // namespace

int ClientMain(int argc, char** argv) {
  GlobalOptions global;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << TopHelp();
      return 0;
    }
    if (a == "--version") {
      std::cout << "ckprof 0.1.0\n";
      return 0;
    }
    if (a == "--socket" && i + 1 < argc) {
      global.socket = argv[++i];
    } else if (a.rfind("--socket=", 0) == 0) {
      global.socket = a.substr(9);
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "ckprof: unknown global option " << a << " (see 'ckprof --help')\n";
      return 2;
    } else {
      break;
    }
  }
  if (i >= argc) {
    std::cerr << TopHelp();
    return 2;
  }
  const std::string name = argv[i];
  Args rest(argv + i + 1, argv + argc);
  for (const auto& c : Commands()) {
    if (name == c.name) return c.run(global, rest);
  }
  std::cerr << "ckprof: unknown command '" << name << "' (see 'ckprof --help')\n";
  return 2;
}

}  // namespace ckprof
