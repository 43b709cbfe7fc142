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
      {"run", "run the CK profiler for a configs file (the original run workflow)",
       [](const GlobalOptions& g, const Args& a) { return RunRunCommand(g, a); }},
      {"submit", "submit an IR list, trace or configs file to ckprofd as a job",
       [](const GlobalOptions& g, const Args& a) { return RunSubmitCommand(g, a); }},
      {"status", "show one job, or all jobs",
       [](const GlobalOptions& g, const Args& a) { return RunStatusCommand(g, a, false); }},
      {"list", "list active jobs (--all: every job)",
       [](const GlobalOptions& g, const Args& a) { return RunStatusCommand(g, a, true); }},
      {"watch", "follow a job live until it ends",
       [](const GlobalOptions& g, const Args& a) { return RunWatchCommand(g, a, false); }},
      {"wait", "wait silently until a job ends",
       [](const GlobalOptions& g, const Args& a) { return RunWatchCommand(g, a, true); }},
      {"results", "fetch a job's results (json, csv or table)",
       [](const GlobalOptions& g, const Args& a) { return RunResultsCommand(g, a); }},
      {"compare", "compare two jobs or results files: times, speedups, geometric mean",
       [](const GlobalOptions& g, const Args& a) { return RunCompareCommand(g, a); }},
      {"cancel", "cancel a job",
       [](const GlobalOptions& g, const Args& a) {
         return RunJobActionCommand(g, a, RequestType::kCancel);
       }},
      {"retry", "requeue a job's failed tasks",
       [](const GlobalOptions& g, const Args& a) {
         return RunJobActionCommand(g, a, RequestType::kRetry);
       }},
      {"boost", "set a job's priority (admins)",
       [](const GlobalOptions& g, const Args& a) {
         return RunJobActionCommand(g, a, RequestType::kBoost);
       }},
      {"gpus", "show the daemon's GPUs",
       [](const GlobalOptions& g, const Args& a) { return RunGpusCommand(g, a); }},
      {"drain", "stop giving a GPU new tasks (admins)",
       [](const GlobalOptions& g, const Args& a) { return RunGpuActionCommand(g, a, true); }},
      {"resume", "give a drained GPU tasks again (admins)",
       [](const GlobalOptions& g, const Args& a) { return RunGpuActionCommand(g, a, false); }},
      {"ping", "check that ckprofd answers",
       [](const GlobalOptions& g, const Args& a) { return RunPingCommand(g, a); }},
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
      "  -h, --help     show this help\n\n"
      "'ckprof COMMAND --help' shows a command's options and an example.\n";
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
