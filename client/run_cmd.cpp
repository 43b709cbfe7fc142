// ckprof run: the original run_ck_profiler.py workflow — same options, defaults, console output
// and results file — on ckprofd (the system daemon, or a private one with --local).
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <iostream>
#include <mutex>
#include <regex>
#include <set>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "client/interrupt.h"
#include "client/local_daemon.h"
#include "common/command_plan.h"
#include "common/convert.h"
#include "common/file_util.h"
#include "common/gpu_list.h"
#include "common/profiler_path.h"
#include "common/results_file.h"
#include "common/terminal_text.h"

namespace ckprof {

namespace {

using json = nlohmann::json;

std::string Fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// One line (two for a success: the kernel on the second) per finished config.
void PrintTaskLine(const TaskResult& t, int64_t done, int64_t total) {
  std::cout << "[" << done << "/" << total << "] " << (t.ok() ? "✓ " : "✗ ") << ShortOp(t.operation)
            << " (rank " << t.priority_rank << (t.run > 0 ? ", run " + std::to_string(t.run) : "")
            << "): " << EscapeControl(t.description) << "\n";
  if (t.ok()) {
    std::cout << "    " << Fmt(t.avg_ms) << " ms, " << Fmt(t.tflops) << " TFlops, " << Fmt(t.gbps)
              << " GB/s" << (t.split_k.empty() ? "" : ", SplitK " + t.split_k) << " on GPU "
              << t.gpu << " (" << Fmt(t.elapsed_s) << " s)\n    " << EscapeControl(t.best_name)
              << "\n";
  } else {
    std::cout << "    "
              << (t.error.empty() ? std::string(EnumName(t.state)) : EscapeControl(t.error))
              << "\n";
  }
  std::cout.flush();
}

void PrintSummary(const ResultStats& s, const std::string& saved_to) {
  std::cout << "\n"
            << std::string(60, '=') << "\nProfiling summary\n"
            << std::string(60, '=') << "\n"
            << "Total configs:      " << s.total << "\n"
            << "  ✓ Successful:     " << s.success << "\n"
            << "  ✗ Failed:         " << s.failed;
  // The failures in the words every view uses ("2 unsupported, 1 timed out").
  std::string kinds;
  for (TaskState c : FinalColumns()) {
    if (c == TaskState::kSucceeded || c == TaskState::kCancelled || s.counts.of(c) == 0) continue;
    kinds +=
        (kinds.empty() ? "" : ", ") + std::to_string(s.counts.of(c)) + " " + std::string(Label(c));
  }
  if (s.counts.of(TaskState::kFailed) != s.failed) {
    std::cout << " (" << kinds << ")";  // not all plain failures
  }
  std::cout << "\n  ⚠ Skipped:        " << s.skipped << "\n";
  if (!saved_to.empty()) std::cout << "Results saved to: " << saved_to << "\n";
}

// After Ctrl-C (SIGTERM, SIGHUP): cancels `job`, waits (at most `wait_s`) for its running
// tasks to stop, and writes the results of what ended to `output`, stats.partial true, the
// cancelled configs as skipped (`output` empty: nothing is written). `said` gets the lines to
// say ("cancelled job 4", "3 results saved to FILE (partial: 2 cancelled)", or why not).
// Returns whether the job was cancelled.
bool SaveWhatEnded(const std::string& socket, int64_t job, const std::string& output,
                   bool with_runs, double wait_s, std::vector<std::string>* said) {
  auto conn = Connection::Open(socket);
  if (!conn) {
    said->push_back("could not cancel job " + std::to_string(job) + ": " + conn.error());
    return false;
  }
  CancelRequest cancel;
  cancel.job_id = job;
  if (auto answer = (*conn)->Call(cancel); !answer) {
    said->push_back("could not cancel job " + std::to_string(job) + ": " + answer.error());
    return false;
  }
  said->push_back("cancelled job " + std::to_string(job));
  // Its end: the running tasks stopped and counted as cancelled (a deadline, not a pause).
  (*conn)->SetDeadline(std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)));
  (void)(*conn)->Watch(
      job, [](const WatchReply&) { return true; }, [](const JobEventFrame&) { return true; },
      /*end_only=*/true);
  if (output.empty()) return true;
  auto again = Connection::Open(socket);  // (the watch may have run out of time on `conn`)
  auto fetched = again ? FetchResults(**again, job, /*with_output=*/true, with_runs)
                       : Result<ResultsReply>(Error{again.error()});
  if (!fetched) {
    said->push_back("could not save the results: " + fetched.error());
    return true;
  }
  const std::vector<TaskResult>& tasks = fetched->tasks;
  const std::string text =
      ResultsFileJson(tasks, fetched->job.owner, LocalTimestamp(), /*stopped=*/true).dump(2) + "\n";
  if (Status st = WriteFileAtomic(output, text); !st) {
    said->push_back("could not save the results: " + st.error());
    return true;
  }
  const ResultStats stats = ComputeStats(tasks);
  const int64_t ended = stats.success + stats.failed;
  std::string line = std::to_string(ended) + " result" + (ended == 1 ? "" : "s") + " saved to " +
                     output + " (partial";
  if (stats.skipped > 0) line += ": " + std::to_string(stats.skipped) + " cancelled";
  const int64_t open = stats.counts.queued() + stats.counts.running();
  if (open > 0) line += (stats.skipped > 0 ? ", " : ": ") + std::to_string(open) + " not ended";
  said->push_back(line + ")");
  return true;
}

}  // namespace

int RunRunCommand(const GlobalOptions& global, const Args& args) {
  std::string config_file, profiler, max_ops, output = "profiler_results.json", gpus, timeout;
  std::string lock_dir, repeat;
  bool dry_run = false, quiet = false, no_save = false, local = false;
  ArgParser p(
      "ckprof run",
      "Run the CK profiler for every config of CONFIG_FILE and save the results: the original "
      "run_ck_profiler.py workflow, run on ckprofd's GPUs.",
      "CONFIG_FILE is a configs file from 'ckprof convert' (ck_profiler_configs.json); a "
      "replay-IR\n"
      "list or a PyTorch trace is converted first. Without --local, the configs run on the\n"
      "daemon at --socket/$CKPROF_SOCKET; with --local (or --dry-run) no daemon is needed: a\n"
      "private ckprofd runs them on --gpus and stops afterwards. Exit 1 if any config failed.\n"
      "The profiler: --profiler-path, else the daemon's default profiler_path; with --local or\n"
      "--dry-run, ./build/bin (the original tool's default). A path that does not hold a CK\n"
      "profiler is refused before anything runs.\n\n"
      "Ctrl-C (SIGTERM, SIGHUP) cancels the job this command submitted, writes the results of\n"
      "the configs that ended to --output (\"partial\": true in its stats, the cancelled ones\n"
      "skipped) and says how many, then (with --local) stops the private ckprofd and its\n"
      "profilers and removes its files; exits 130 (143, 129).\n\n"
      "examples:\n"
      "  ckprof run ck_profiler_configs.json --profiler-path ./build/bin\n"
      "  ckprof run ck_profiler_configs.json --max-ops 5 --dry-run\n"
      "  ckprof run conv_repros_ir.json --local --gpus 0-3 --output resnet.json");
  p.Positional("CONFIG_FILE", &config_file, true, "configs (or IR list, or trace) to run");
  p.Option("--profiler-path", &profiler, "P",
           "ckProfiler, or the directory holding it or profile_grouped_conv_* (default: the "
           "daemon's; ./build/bin with --local or --dry-run)");
  p.Option("--max-ops", &max_ops, "N", "run only the first N configs");
  p.Flag("--dry-run", &dry_run, "print the commands, run nothing");
  p.Flag("--quiet", &quiet, "print only the summary");
  p.Flag("--no-save", &no_save, "do not write the results file");
  p.Option("--output", &output, "FILE", "results file (default profiler_results.json)");
  p.Option("--gpus", &gpus, "LIST", "GPUs to use, e.g. 0,1 or 0-7 (default: all)");
  p.Option("--timeout", &timeout, "S",
           "seconds one profiler run may take (default: the daemon's timeout, 1800 s unless "
           "set; at most its max_timeout; 0 = none, admins and --local only)");
  p.Option("--repeat", &repeat, "N",
           "run each config N times; the results file has its median, min, max and "
           "coefficient of variation (default 1)");
  p.Flag("--local", &local, "run on a private ckprofd instead of the system daemon");
  p.Option("--lock-dir", &lock_dir, "DIR",
           "with --local: where the per-GPU lock files are that the private ckprofd shares with "
           "every other ckprofd of the host (default: ckprofd's, /run/lock/ckprofd)");
  if (auto code = p.Parse(args)) return *code;
  if (!lock_dir.empty() && !local) {
    PrintError("run", "--lock-dir is for --local (the system daemon has its own lock_dir)");
    return 2;
  }

  int64_t max = 0;
  if (!max_ops.empty()) {
    static const std::regex num(R"(\d{1,12})");
    if (!std::regex_match(max_ops, num) || std::stoll(max_ops) < 1) {
      PrintError("run", "--max-ops must be an integer >= 1, got '" + max_ops +
                            "' (leave it out to run every config)");
      return 2;
    }
    max = std::stoll(max_ops);
  }
  int runs = 1;
  if (!repeat.empty()) {
    static const std::regex num(R"(\d{1,6})");
    if (!std::regex_match(repeat, num) || std::stoi(repeat) < 1 || std::stoi(repeat) > kMaxRepeat) {
      PrintError("run", "--repeat must be an integer from 1 to " + std::to_string(kMaxRepeat) +
                            ", got '" + repeat + "' (leave it out to run each config once)");
      return 2;
    }
    runs = std::stoi(repeat);
  }
  if (!gpus.empty() && !ParseGpuListArg(gpus, "run")) return 2;
  if (!timeout.empty()) {
    char* end = nullptr;
    double t = std::strtod(timeout.c_str(), &end);
    if (*end != '\0' || !(t >= 0)) {
      PrintError("run", "--timeout must be a number of seconds >= 0, got '" + timeout + "'");
      return 2;
    }
  }
  auto content = ReadInputFile(config_file);
  if (!content) {
    PrintError("run", content.error());
    return 1;
  }
  if (profiler.empty() && (local || dry_run)) profiler = "./build/bin";

  if (dry_run) {
    auto conv = ConvertText(*content, ConvertOptions{});
    if (!conv) {
      PrintError("run", NameInput(conv.error(), config_file));
      return 1;
    }
    std::vector<CkConfig>& configs = conv->configs;
    if (max > 0 && configs.size() > static_cast<size_t>(max))
      configs.resize(static_cast<size_t>(max));
    std::string note;
    ProfilerTarget target = ResolveOrAssumeProfiler(profiler, &note);
    if (!quiet) std::cout << "Dry run: " << configs.size() << " config(s); " << note << "\n";
    const auto plan = PlanCommands(target, configs);
    int64_t bad = 0;
    for (const auto& c : plan) {
      if (!quiet) {
        std::cout << "[" << c.position << "/" << plan.size() << "] " << ShortOpName(c.op)
                  << " (rank " << c.priority_rank << "): " << EscapeControl(c.description) << "\n";
      }
      if (c.argv.empty()) {
        ++bad;
        std::cout << "    cannot build the command: " << EscapeControl(c.error) << "\n";
      } else {
        std::cout << (quiet ? "" : "    ") << FormatCommandLine(c.argv) << "\n";
      }
    }
    return bad ? 1 : 0;
  }

  const std::string abs_profiler = AbsolutePath(profiler);
  if (local) {
    // Everything that can be checked here is, before a daemon starts.
    if (auto target = ResolveProfiler(abs_profiler); !target) {
      PrintError("run", target.error() + " (pass --profiler-path)");
      return 1;
    }
    if (auto conv = ConvertText(*content, ConvertOptions{}); !conv) {
      PrintError("run", NameInput(conv.error(), config_file));
      return 1;
    }
  }

  std::mutex mu;  // guards what the interrupt's cleanup reads: the daemon and the job
  std::unique_ptr<LocalDaemon> daemon;
  int64_t job = 0;
  std::string socket = ResolveSocketPath(global.socket);
  // Ctrl-C / SIGTERM from here on: cancel what this command started, then exit 128 + signal.
  // (Declared after what its cleanup uses, so that it is gone before they are.)
  InterruptGuard interrupt;
  auto report = [&](const std::string& message) {
    interrupt.WaitIfInterrupted();  // a failure the interrupt caused is not one to report
    PrintError("run", message);
  };
  interrupt.SetCleanup([&](int sig) {
    std::lock_guard<std::mutex> lock(mu);
    const std::string what = sig == SIGINT ? "interrupted" : "stopped by a signal";
    auto say = [&](const std::string& line) {
      std::cerr << "ckprof run: " << what << ": " << line << "\n";
    };
    // What ended is kept: the job cancelled, the results of what ended written (partial),
    // then the private ckprofd stopped.
    if (job > 0 && (!no_save || !daemon)) {  // (a private one with nothing to save: it stops)
      if (!no_save) say("cancelling job " + std::to_string(job) + " and saving what ended...");
      std::cerr.flush();
      std::vector<std::string> said;
      SaveWhatEnded(socket, job, no_save ? "" : output, runs > 1, /*wait_s=*/20, &said);
      for (const auto& line : said) say(line);
    }
    if (daemon) {
      daemon->StopAndRemove();  // its profilers stop with it
      say("stopped the private ckprofd and its profilers");
    } else if (job <= 0) {
      std::cerr << "ckprof run: " << what << "\n";
    }
  });
  if (local) {
    LocalDaemonOptions o;
    o.profiler_path = abs_profiler;
    o.timeout = timeout;
    if (!lock_dir.empty()) o.lock_dir = AbsolutePath(lock_dir);
    if (!gpus.empty()) {
      o.gpus = gpus;
    } else {
      std::string found;
      o.gpus = DetectGpus(&found).empty() ? "0" : "auto";
      if (o.gpus == "0" && !quiet) std::cout << "No GPU detected (" << found << "): using GPU 0\n";
    }
    if (const char* pin = std::getenv("CKPROF_PIN_ENV"); pin && *pin) o.pin_env = pin;
    auto spawned = LocalDaemon::Spawn(o);
    if (!spawned) {
      report(spawned.error());
      return 1;
    }
    LocalDaemon* d = spawned->get();
    {
      std::lock_guard<std::mutex> lock(mu);
      daemon = std::move(*spawned);
    }
    if (Status ready = d->WaitReady(); !ready) {
      report(ready.error());
      return 1;
    }
    socket = d->socket();
  }
  auto conn_or = Connection::Open(socket);
  if (!conn_or) {
    report(conn_or.error());
    return kExitUnreachable;
  }
  Connection& conn = **conn_or;

  SubmitRequest r;
  if (Status st = EncodeSubmitContent(std::move(*content), &r.submit); !st) {
    report(NameInput(st.error(), config_file));
    return 1;
  }
  r.submit.input_name = config_file.substr(config_file.find_last_of('/') + 1);
  r.submit.name = r.submit.input_name;
  r.submit.max_ops = max;
  r.submit.repeat = runs;
  r.submit.profiler_path = profiler.empty() ? "" : abs_profiler;  // "": the daemon's default
  if (!gpus.empty() && !local) r.submit.gpus = *ParseGpuListArg(gpus, "run");
  r.submit.timeout_s = timeout.empty() ? -1 : std::strtod(timeout.c_str(), nullptr);
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd)) r.submit.cwd = cwd;
  ErrorReply refusal;
  auto submitted = conn.Call(r, &refusal);
  if (!submitted) {
    report(RefusalMessage(submitted.error(), refusal, config_file, r.submit.input_name));
    return conn.lost() ? kExitUnreachable : 1;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    job = submitted->job_id;
  }
  for (const auto& w : submitted->conversion.warnings) std::cerr << "⚠ " << w << "\n";
  const int64_t total = submitted->conversion.kept;
  if (!quiet) {
    std::cout << "Running "
              << (runs > 1 ? std::to_string(total / runs) + " config(s) " + std::to_string(runs) +
                                 " times each (" + std::to_string(total) + " runs)"
                           : std::to_string(total) + " config(s)")
              << " as job " << job << " on "
              << (local ? "a private ckprofd (GPUs " + daemon->gpus() + ")"
                        : "ckprofd at " + socket)
              << "\n\n"
              << std::flush;  // shown at once also when piped (| tee log)
  }
  // Lines as tasks finish; those that finished before the watch began come from the results.
  int64_t done = 0;
  std::set<int64_t> printed;
  Status followed = conn.Watch(
      job,
      [&](const WatchReply& w) {
        // Tasks that ended before the watch began (quick ones do): their lines now, from the
        // results on a second connection, so that the lines come as the configs end.
        if (quiet || !w.job || w.job->done() == 0) return true;
        auto second = Connection::Open(socket);
        auto ended = second ? FetchResults(**second, job, /*with_output=*/false, runs > 1)
                            : Result<ResultsReply>(Error{second.error()});
        if (!ended) return true;  // their lines come at the end, as before
        auto& list = ended->runs.empty() ? ended->tasks : ended->runs;
        std::stable_sort(list.begin(), list.end(), [](const TaskResult& a, const TaskResult& b) {
          return a.ended_at < b.ended_at;
        });
        for (const auto& t : list) {
          if (t.finished() && printed.insert(t.task_id).second) PrintTaskLine(t, ++done, total);
        }
        return true;
      },
      [&](const JobEventFrame& e) {
        const auto& t = e.task;
        if (e.event == EventKind::kTaskFinished && t && t->finished() &&
            printed.insert(t->task_id).second) {
          ++done;
          if (!quiet) PrintTaskLine(*t, done, total);
        }
        return true;
      });
  interrupt.WaitIfInterrupted();  // a job that ended because Ctrl-C cancelled it: saved there
  if (!followed) {
    const std::string id = std::to_string(job);
    if (!conn.lost()) {
      report(followed.error() + " (job " + id + " goes on; see 'ckprof status " + id + "')");
      return 1;
    }
    // The daemon went away: a private one takes its job with it; the system one keeps it in
    // its state dir and goes on with it when it is back.
    report(followed.error() + (local ? "; the private ckprofd ended and job " + id + " with it"
                                     : "; job " + id + " is kept: see 'ckprof status " + id +
                                           "' once ckprofd is back"));
    return kExitUnreachable;
  }
  auto fetched = FetchResults(conn, job, /*with_output=*/true, /*with_runs=*/runs > 1);
  if (!fetched) {
    report(fetched.error());
    return conn.lost() ? kExitUnreachable : 1;
  }
  const JobSummary& summary = fetched->job;
  const std::vector<TaskResult>* tasks = &fetched->tasks;
  // The lines of the runs that ended before the watch began.
  for (const auto& t : fetched->runs.empty() ? *tasks : fetched->runs) {
    if (t.finished() && printed.insert(t.task_id).second) {
      ++done;
      if (!quiet) PrintTaskLine(t, done, total);
    }
  }
  std::string saved;
  interrupt.WaitIfInterrupted();
  if (!no_save) {
    std::string text = ResultsFileJson(*tasks, summary.owner, LocalTimestamp()).dump(2) + "\n";
    if (Status s = WriteFileAtomic(output, text); !s) {
      report(s.error());
      return 1;
    }
    saved = output;
  }
  ResultStats stats = ComputeStats(*tasks);
  PrintSummary(stats, saved);
  interrupt.SetCleanup(nullptr);  // finishing: a signal now waits for the end below
  if (daemon) {
    if (Status s = daemon->Stop(); !s) report(s.error());
  }
  return stats.failed > 0 || stats.skipped > 0 ? 1 : 0;
}

}  // namespace ckprof
