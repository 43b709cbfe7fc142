// ckprof run: the original run_ck_profiler.py workflow — same options, defaults, console output
// and results file — on ckprofd (the system daemon, or a private one with --local).
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <mutex>
#include <regex>
#include <set>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "client/interrupt.h"
#include "client/job_options.h"
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

// The help of `ckprof run`: its summary, then what follows the options.
constexpr const char* kRunSummary =
    "Run the CK profiler for every config of CONFIG_FILE and save the results: the original "
    "run_ck_profiler.py workflow, run on ckprofd's GPUs.";
constexpr const char* kRunDetails =
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
    "  ckprof run conv_repros_ir.json --local --gpus 0-3 --output resnet.json";

// The command line of `ckprof run` but the job options (JobOptions).
struct RunArgs {
  std::string config_file, profiler, max_ops, output = "profiler_results.json", lock_dir, repeat;
  bool dry_run = false, quiet = false, no_save = false, local = false;
  // From max_ops and repeat (ReadRunArgs).
  int64_t max = 0;  // run the first `max` configs; 0 = all
  int runs = 1;     // runs of each config
};

// Declares run's options but the job options.
void DeclareRunOptions(ArgParser* p, RunArgs* a) {
  p->Positional("CONFIG_FILE", &a->config_file, true, "configs (or IR list, or trace) to run");
  p->Option("--profiler-path", &a->profiler, "P",
            "ckProfiler, or the directory holding it or profile_grouped_conv_* (default: the "
            "daemon's; ./build/bin with --local or --dry-run)");
  p->Option("--max-ops", &a->max_ops, "N", "run only the first N configs");
  p->Flag("--dry-run", &a->dry_run, "print the commands, run nothing");
  p->Flag("--quiet", &a->quiet, "print only the summary");
  p->Flag("--no-save", &a->no_save, "do not write the results file");
  p->Option("--output", &a->output, "FILE", "results file (default profiler_results.json)");
  p->Option("--repeat", &a->repeat, "N",
            "run each config N times; the results file has its median, min, max and "
            "coefficient of variation (default 1)");
  p->Flag("--local", &a->local, "run on a private ckprofd instead of the system daemon");
  p->Option("--lock-dir", &a->lock_dir, "DIR",
            "with --local: where the per-GPU lock files are that the private ckprofd shares with "
            "every other ckprofd of the host (default: ckprofd's, /run/lock/ckprofd)");
}

// Checks the options (run's own and the job options given) and sets a->max and a->runs. The
// settings of the job options given, or the error naming the first bad option.
Result<JobSettings> ReadRunArgs(const JobOptions& job_options, RunArgs* a) {
  if (!a->lock_dir.empty() && !a->local) {
    return MakeError("--lock-dir is for --local (the system daemon has its own lock_dir)");
  }
  if (!a->max_ops.empty()) {
    static const std::regex num(R"(\d{1,12})");
    if (!std::regex_match(a->max_ops, num) || std::stoll(a->max_ops) < 1) {
      return MakeError("--max-ops must be an integer >= 1, got '" + a->max_ops +
                       "' (leave it out to run every config)");
    }
    a->max = std::stoll(a->max_ops);
  }
  if (!a->repeat.empty()) {
    static const std::regex num(R"(\d{1,6})");
    if (!std::regex_match(a->repeat, num) || std::stoi(a->repeat) < 1 ||
        std::stoi(a->repeat) > kMaxRepeat) {
      return MakeError("--repeat must be an integer from 1 to " + std::to_string(kMaxRepeat) +
                       ", got '" + a->repeat + "' (leave it out to run each config once)");
    }
    a->runs = std::stoi(a->repeat);
  }
  return job_options.Read();
}

// --dry-run: the command lines of the configs in `content`, no process at all. The exit code:
// 1 when a command cannot be built.
int DryRun(const RunArgs& a, const std::string& content) {
  auto conv = ConvertText(content, ConvertOptions{});
  if (!conv) {
    PrintError("run", NameInput(conv.error(), a.config_file));
    return 1;
  }
  std::vector<CkConfig>& configs = conv->configs;
  if (a.max > 0 && configs.size() > static_cast<size_t>(a.max)) {
    configs.resize(static_cast<size_t>(a.max));
  }
  std::string note;
  ProfilerTarget target = ResolveOrAssumeProfiler(a.profiler, &note);
  if (!a.quiet) std::cout << "Dry run: " << configs.size() << " config(s); " << note << "\n";
  const auto plan = PlanCommands(target, configs);
  int64_t bad = 0;
  for (const auto& c : plan) {
    if (!a.quiet) {
      std::cout << "[" << c.position << "/" << plan.size() << "] " << ShortOpName(c.op) << " (rank "
                << c.priority_rank << "): " << EscapeControl(c.description) << "\n";
    }
    if (c.argv.empty()) {
      ++bad;
      std::cout << "    cannot build the command: " << EscapeControl(c.error) << "\n";
    } else {
      std::cout << (a.quiet ? "" : "    ") << FormatCommandLine(c.argv) << "\n";
    }
  }
  return bad ? 1 : 0;
}

// With --local, everything that can be checked before a daemon starts: the profiler and the
// input.
Status CheckBeforeLocalDaemon(const RunArgs& a, const std::string& content,
                              const std::string& abs_profiler) {
  if (auto target = ResolveProfiler(abs_profiler); !target) {
    return MakeError(target.error() + " (pass --profiler-path)");
  }
  if (auto conv = ConvertText(content, ConvertOptions{}); !conv) {
    return MakeError(NameInput(conv.error(), a.config_file));
  }
  return Status::Ok();
}

// What one run shares between its steps and the cleanup at Ctrl-C.
struct RunState {
  std::mutex mu;  // guards what the interrupt's cleanup reads: the daemon and the job
  std::unique_ptr<LocalDaemon> daemon;
  int64_t job = 0;     // 0 until submitted
  std::string socket;  // the daemon's
};

// At Ctrl-C (SIGTERM, SIGHUP), on the interrupt's thread: what ended is kept — the job
// cancelled, the results of what ended written (partial), then the private ckprofd stopped.
void CleanUpAtSignal(RunState* st, const RunArgs& a, int sig) {
  std::lock_guard<std::mutex> lock(st->mu);
  const std::string what = sig == SIGINT ? "interrupted" : "stopped by a signal";
  auto say = [&](const std::string& line) {
    std::cerr << "ckprof run: " << what << ": " << line << "\n";
  };
  if (st->job > 0 &&
      (!a.no_save || !st->daemon)) {  // (a private one with nothing to save: it stops)
    if (!a.no_save) say("cancelling job " + std::to_string(st->job) + " and saving what ended...");
    std::cerr.flush();
    std::vector<std::string> said;
    SaveWhatEnded(st->socket, st->job, a.no_save ? "" : a.output, a.runs > 1, /*wait_s=*/20, &said);
    for (const auto& line : said) say(line);
  }
  if (st->daemon) {
    st->daemon->StopAndRemove();  // its profilers stop with it
    say("stopped the private ckprofd and its profilers");
  } else if (st->job <= 0) {
    std::cerr << "ckprof run: " << what << "\n";
  }
}

// --local: starts the private ckprofd on --gpus (else every GPU found, else GPU 0) and waits
// until it is ready; st->daemon holds it (also when it failed to get ready), st->socket is its.
Status StartPrivateDaemon(const RunArgs& a, const JobOptions& job_options,
                          const std::string& abs_profiler, RunState* st) {
  LocalDaemonOptions o;
  o.profiler_path = abs_profiler;
  o.timeout = job_options.timeout_text();
  if (!a.lock_dir.empty()) o.lock_dir = AbsolutePath(a.lock_dir);
  if (!job_options.gpus_text().empty()) {
    o.gpus = job_options.gpus_text();
  } else {
    std::string found;
    o.gpus = DetectGpus(&found).empty() ? "0" : "auto";
    if (o.gpus == "0" && !a.quiet) std::cout << "No GPU detected (" << found << "): using GPU 0\n";
  }
  if (const char* pin = std::getenv("CKPROF_PIN_ENV"); pin && *pin) o.pin_env = pin;
  auto spawned = LocalDaemon::Spawn(o);
  if (!spawned) return Error{spawned.error()};
  LocalDaemon* d = spawned->get();
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->daemon = std::move(*spawned);
  }
  if (Status ready = d->WaitReady(); !ready) return ready;
  st->socket = d->socket();
  return Status::Ok();
}

// Submits the configs in `content` as a job. The error is the daemon's refusal, worded for the
// user.
Result<SubmitReply> SubmitJob(Connection& conn, const RunArgs& a, JobSettings settings,
                              std::string content, const std::string& abs_profiler) {
  SubmitRequest r;
  if (Status st = EncodeSubmitContent(std::move(content), &r.submit); !st) {
    return MakeError(NameInput(st.error(), a.config_file));
  }
  r.submit.input_name = a.config_file.substr(a.config_file.find_last_of('/') + 1);
  r.submit.name = r.submit.input_name;
  r.submit.max_ops = a.max;
  r.submit.repeat = a.runs;
  r.submit.profiler_path = a.profiler.empty() ? "" : abs_profiler;  // "": the daemon's default
  if (a.local) settings.gpus.reset();  // the private ckprofd has those GPUs alone
  settings.ApplyTo(&r.submit);
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd)) r.submit.cwd = cwd;
  ErrorReply refusal;
  auto submitted = conn.Call(r, &refusal);
  if (!submitted) {
    return MakeError(
        RefusalMessage(submitted.error(), refusal, a.config_file, r.submit.input_name));
  }
  return submitted;
}

// "Running 12 config(s) as job 4 on ckprofd at /run/ckprofd.sock", after the conversion's
// warnings.
void AnnounceJob(const RunArgs& a, const RunState& st, const SubmitReply& submitted) {
  for (const auto& w : submitted.conversion.warnings) std::cerr << "⚠ " << w << "\n";
  if (a.quiet) return;
  const int64_t total = submitted.conversion.kept;
  std::cout << "Running "
            << (a.runs > 1
                    ? std::to_string(total / a.runs) + " config(s) " + std::to_string(a.runs) +
                          " times each (" + std::to_string(total) + " runs)"
                    : std::to_string(total) + " config(s)")
            << " as job " << st.job << " on "
            << (a.local ? "a private ckprofd (GPUs " + st.daemon->gpus() + ")"
                        : "ckprofd at " + st.socket)
            << "\n\n"
            << std::flush;  // shown at once also when piped (| tee log)
}

// The lines of the configs as they end: each task once, numbered in the order seen.
class Progress {
 public:
  Progress(bool quiet, int64_t total) : quiet_(quiet), total_(total) {}
  bool quiet() const { return quiet_; }
  // Prints `t`'s line if it has ended and was not printed before (nothing with --quiet).
  void Ended(const TaskResult& t) {
    if (!t.finished() || !printed_.insert(t.task_id).second) return;
    ++done_;
    if (!quiet_) PrintTaskLine(t, done_, total_);
  }

 private:
  const bool quiet_;
  const int64_t total_;
  int64_t done_ = 0;
  std::set<int64_t> printed_;
};

// Follows `job` to its end, a line as each task ends. The tasks that ended before the watch
// began (quick ones do) get their lines from the results on a second connection, so that the
// lines come as the configs end.
Status FollowJob(Connection& conn, const std::string& socket, int64_t job, bool with_runs,
                 Progress* progress) {
  return conn.Watch(
      job,
      [&](const WatchReply& w) {
        if (progress->quiet() || !w.job || w.job->done() == 0) return true;
        auto second = Connection::Open(socket);
        auto ended = second ? FetchResults(**second, job, /*with_output=*/false, with_runs)
                            : Result<ResultsReply>(Error{second.error()});
        if (!ended) return true;  // their lines come at the end, as before
        auto& list = ended->runs.empty() ? ended->tasks : ended->runs;
        std::stable_sort(list.begin(), list.end(), [](const TaskResult& a, const TaskResult& b) {
          return a.ended_at < b.ended_at;
        });
        for (const auto& t : list) progress->Ended(t);
        return true;
      },
      [&](const JobEventFrame& e) {
        if (e.event == EventKind::kTaskFinished && e.task) progress->Ended(*e.task);
        return true;
      });
}

// Why following the job stopped short, and what became of the job.
std::string WatchLostMessage(const std::string& error, bool lost, bool local, int64_t job) {
  const std::string id = std::to_string(job);
  if (!lost) return error + " (job " + id + " goes on; see 'ckprof status " + id + "')";
  // The daemon went away: a private one takes its job with it; the system one keeps it in its
  // state dir and goes on with it when it is back.
  return error +
         (local ? "; the private ckprofd ended and job " + id + " with it"
                : "; job " + id + " is kept: see 'ckprof status " + id + "' once ckprofd is back");
}

// Runs the job on a daemon: the private one with --local (started here), else the one at
// --socket; follows it, saves its results and prints the summary. Returns the exit code.
int RunOnDaemon(const GlobalOptions& global, const RunArgs& a, const JobOptions& job_options,
                const JobSettings& settings, std::string content, const std::string& abs_profiler) {
  RunState st;
  st.socket = ResolveSocketPath(global.socket);
  // Ctrl-C / SIGTERM from here on: cancel what this command started, then exit 128 + signal.
  // (Declared after what its cleanup uses, so that it is gone before they are.)
  InterruptGuard interrupt;
  auto report = [&](const std::string& message) {
    interrupt.WaitIfInterrupted();  // a failure the interrupt caused is not one to report
    PrintError("run", message);
  };
  interrupt.SetCleanup([&](int sig) { CleanUpAtSignal(&st, a, sig); });
  if (a.local) {
    if (Status started = StartPrivateDaemon(a, job_options, abs_profiler, &st); !started) {
      report(started.error());
      return 1;
    }
  }
  auto conn_or = Connection::Open(st.socket);
  if (!conn_or) {
    report(conn_or.error());
    return kExitUnreachable;
  }
  Connection& conn = **conn_or;
  auto submitted = SubmitJob(conn, a, settings, std::move(content), abs_profiler);
  if (!submitted) {
    report(submitted.error());
    return conn.lost() ? kExitUnreachable : 1;
  }
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.job = submitted->job_id;
  }
  AnnounceJob(a, st, *submitted);
  Progress progress(a.quiet, submitted->conversion.kept);
  Status followed = FollowJob(conn, st.socket, st.job, a.runs > 1, &progress);
  interrupt.WaitIfInterrupted();  // a job that ended because Ctrl-C cancelled it: saved there
  if (!followed) {
    report(WatchLostMessage(followed.error(), conn.lost(), a.local, st.job));
    return conn.lost() ? kExitUnreachable : 1;
  }
  auto fetched = FetchResults(conn, st.job, /*with_output=*/true, /*with_runs=*/a.runs > 1);
  if (!fetched) {
    report(fetched.error());
    return conn.lost() ? kExitUnreachable : 1;
  }
  // The lines of the runs that ended before the watch began.
  for (const auto& t : fetched->runs.empty() ? fetched->tasks : fetched->runs) progress.Ended(t);
  interrupt.WaitIfInterrupted();
  std::string saved;
  if (!a.no_save) {
    const std::string text =
        ResultsFileJson(fetched->tasks, fetched->job.owner, LocalTimestamp()).dump(2) + "\n";
    if (Status s = WriteFileAtomic(a.output, text); !s) {
      report(s.error());
      return 1;
    }
    saved = a.output;
  }
  const ResultStats stats = ComputeStats(fetched->tasks);
  PrintSummary(stats, saved);
  interrupt.SetCleanup(nullptr);  // finishing: a signal now waits for the end below
  if (st.daemon) {
    if (Status s = st.daemon->Stop(); !s) report(s.error());
  }
  return stats.failed > 0 || stats.skipped > 0 ? 1 : 0;
}

}  // namespace

int RunRunCommand(const GlobalOptions& global, const Args& args) {
  RunArgs a;
  ArgParser p("ckprof run", kRunSummary, kRunDetails);
  DeclareRunOptions(&p, &a);
  JobOptions job_options(RunJobOptionRules(), &p);
  if (auto code = p.Parse(args)) return *code;
  auto settings = ReadRunArgs(job_options, &a);
  if (!settings) {
    PrintError("run", settings.error());
    return 2;
  }
  auto content = ReadInputFile(a.config_file);
  if (!content) {
    PrintError("run", content.error());
    return 1;
  }
  if (a.profiler.empty() && (a.local || a.dry_run)) a.profiler = "./build/bin";
  if (a.dry_run) return DryRun(a, *content);
  const std::string abs_profiler = AbsolutePath(a.profiler);
  if (Status st = a.local ? CheckBeforeLocalDaemon(a, *content, abs_profiler) : Status::Ok(); !st) {
    PrintError("run", st.error());
    return 1;
  }
  return RunOnDaemon(global, a, job_options, *settings, std::move(*content), abs_profiler);
}

}  // namespace ckprof
