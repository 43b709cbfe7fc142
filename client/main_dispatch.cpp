#include "client/main_dispatch.h"

#include <cstring>
#include <functional>
#include <iostream>
#include <string>

#include "client/commands.h"
#include "common/version.h"

namespace ckprof {
namespace {

int RunHelpCommand(const GlobalOptions& g, const Args& args);

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
      {"list", "list jobs: active ones, --all, or --mine/--user/--state/--since/--limit",
       [](const GlobalOptions& g, const Args& a) { return RunStatusCommand(g, a, true); }},
      {"watch", "follow a job live until it ends",
       [](const GlobalOptions& g, const Args& a) { return RunWatchCommand(g, a, false); }},
      {"wait", "wait silently until a job ends",
       [](const GlobalOptions& g, const Args& a) { return RunWatchCommand(g, a, true); }},
      {"results", "fetch a job's results (json, csv or table)",
       [](const GlobalOptions& g, const Args& a) { return RunResultsCommand(g, a); }},
      {"log", "show a task's profiler output; -f follows it live",
       [](const GlobalOptions& g, const Args& a) { return RunLogCommand(g, a); }},
      {"best", "the tuning table: the best kernel of every problem ever measured",
       [](const GlobalOptions& g, const Args& a) { return RunBestCommand(g, a); }},
      {"usage", "GPU time, runs and fair-share place per user (--jobs: per job)",
       [](const GlobalOptions& g, const Args& a) { return RunUsageCommand(g, a); }},
      {"report", "write a job's report: a self-contained HTML page (or Markdown)",
       [](const GlobalOptions& g, const Args& a) { return RunReportCommand(g, a); }},
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
      {"hold", "keep a job's queued tasks from starting until released",
       [](const GlobalOptions& g, const Args& a) { return RunHoldCommand(g, a, true); }},
      {"release", "let a held job's tasks start again",
       [](const GlobalOptions& g, const Args& a) { return RunHoldCommand(g, a, false); }},
      {"edit", "change a job's priority, start time, GPUs, timeout or name",
       [](const GlobalOptions& g, const Args& a) { return RunEditCommand(g, a); }},
      {"clean", "remove your jobs that have ended (--older-than 7d)",
       [](const GlobalOptions& g, const Args& a) { return RunCleanCommand(g, a); }},
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
      {"help", "show the help of ckprof, or of a command: 'ckprof help submit'",
       [](const GlobalOptions& g, const Args& a) { return RunHelpCommand(g, a); }},
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
  s += "\nglobal options (before or after the command):\n"
       "  --socket PATH  the daemon's socket (default: $CKPROF_SOCKET, else\n"
       "                 /run/ckprofd/ckprofd.sock)\n"
       "  --version      print the version and exit\n"
       "  -h, --help     show this help\n\n"
       "environment:\n"
       "  CKPROF_SOCKET  the daemon's socket when --socket is not given\n"
       "  NO_COLOR       set (and not empty): no colours, also on a terminal\n\n"
       "'ckprof help COMMAND' (or 'ckprof COMMAND --help') shows a command's options and an\n"
       "example; 'man ckprof' the same for every command.\n";
  return s;
}

int RunHelpCommand(const GlobalOptions& g, const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << TopHelp();
    return 0;
  }
  if (args.size() > 1) {
    std::cerr << "ckprof help: name one command, e.g. 'ckprof help submit'\n";
    return 2;
  }
  for (const auto& c : Commands()) {
    if (args[0] == c.name && args[0] != "help") return c.run(g, {"--help"});
  }
  std::cerr << "ckprof help: unknown command '" << args[0] << "' (see 'ckprof --help')\n";
  return 2;
}

}  // namespace

int ClientMain(int argc, char** argv) {
  // Global options may stand before or after the command (`ckprof list --socket S`); they are
  // taken out here, so that each command sees only its own arguments. After "--" every
  // argument is the command's.
  GlobalOptions global;
  std::string name;  // the command
  Args rest;         // its arguments
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (!only_positional && (a == "--socket" || a.rfind("--socket=", 0) == 0)) {
      std::string value;
      if (a != "--socket") {
        value = a.substr(9);
      } else if (i + 1 < argc && argv[i + 1][0] != '-') {
        value = argv[++i];
      }
      if (value.empty()) {
        std::cerr << "ckprof" << (name.empty() ? "" : " " + name)
                  << ": --socket needs a value: the daemon's socket, e.g. --socket "
                  << kDefaultSocketPath << " (see 'ckprof --help')\n";
        return 2;
      }
      global.socket = value;
      continue;
    }
    if (!name.empty()) {
      if (a == "--") only_positional = true;
      rest.push_back(a);
      continue;
    }
    if (a == "--help" || a == "-h") {
      std::cout << TopHelp();
      return 0;
    }
    if (a == "--version") {
      std::cout << "ckprof " << kVersion << "\n";
      return 0;
    }
    if (!a.empty() && a[0] == '-') {
      std::cerr << "ckprof: unknown global option " << a
                << " (a command's own options go after it; see 'ckprof --help')\n";
      return 2;
    }
    name = a;
  }
  if (name.empty()) {
    for (const auto& c : Commands()) {
      if (global.socket == c.name) {  // `ckprof --socket list`: the value is missing
        std::cerr << "ckprof: --socket needs a value: the daemon's socket, e.g. 'ckprof --socket "
                  << kDefaultSocketPath << " " << c.name << "' (see 'ckprof --help')\n";
        return 2;
      }
    }
    std::cerr << TopHelp();
    return 2;
  }
  for (const auto& c : Commands()) {
    if (name == c.name) return c.run(global, rest);
  }
  std::cerr << "ckprof: unknown command '" << name << "' (see 'ckprof --help')\n";
  return 2;
}

}  // namespace ckprof
