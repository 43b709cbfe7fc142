// ckprof log: a job's task output, as the profiler wrote it; -f follows a task, or every task
// of a job, live.
#include <iostream>
#include <map>
#include <regex>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "common/terminal_text.h"

namespace ckprof {
namespace {

constexpr int kDefaultJobLines = 10;  // each task's last lines when no task is named

// "==> job 7 #3 fwd (rank 2) run 1: succeeded on GPU 0 <==", as tail heads each file.
std::string Header(const TaskResult& t) {
  std::string state(EnumName(t.state));
  if (!t.error.empty() && t.state != TaskState::kRunning) state = t.error;
  return "==> job " + std::to_string(t.job_id) + " " + TaskLabel(t) + ": " + EscapeControl(state) +
         (t.gpu >= 0 ? " on GPU " + std::to_string(t.gpu) : "") + " <==\n";
}

const std::string& StreamOf(const TaskResult& t, bool err) {
  return err ? t.stderr_text : t.stdout_text;
}

// A profiler's output as the terminal should show it: its control characters escaped
// (EscapeControl, keeping line breaks and tabs), or as written with --raw.
class OutputText {
 public:
  explicit OutputText(bool raw) : raw_(raw) {}

  // `data` as shown. A UTF-8 character cut between two chunks (log -f) is held back until
  // its end comes, so that it is not shown as broken bytes.
  std::string Chunk(const std::string& data) {
    if (raw_) return data;
    std::string text = pending_ + data;
    pending_.clear();
    // A lead byte in the last three whose sequence is not complete yet.
    for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
      const unsigned char b = static_cast<unsigned char>(text[text.size() - back]);
      if ((b & 0xc0) == 0x80) continue;  // a continuation byte: look further back
      const size_t need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
      if (need > back) {
        pending_ = text.substr(text.size() - back);
        text.resize(text.size() - back);
      }
      break;
    }
    return EscapeControl(text, LineBreaks::kKeep);
  }
  // What was held back, once the stream ended.
  std::string Rest() {
    std::string rest = raw_ ? "" : EscapeControl(pending_, LineBreaks::kKeep);
    pending_.clear();
    return rest;
  }

 private:
  bool raw_;
  std::string pending_;
};

void WriteText(const std::string& text, bool raw) {
  std::cout << (raw ? text : EscapeControl(text, LineBreaks::kKeep));
  if (!text.empty() && text.back() != '\n') std::cout << "\n";
}

int ExitFor(TaskState state) { return state == TaskState::kSucceeded ? 0 : IsFinal(state) ? 1 : 0; }

// Follows one task: its output so far, then what it writes, until it ends.
int Follow(const GlobalOptions& global, const LogRequest& r, bool err, bool json_out, bool raw) {
  OutputText shown(raw);
  auto conn = ConnectOrReport(global, "log");
  if (!conn) return kExitUnreachable;
  const std::string stream = err ? "stderr" : "stdout";
  TaskState state = TaskState::kQueued;
  bool ended = false, bad = false;
  bool at_line_start = true, first_frame = true;
  Status s = conn->Stream(r, [&](const nlohmann::json& frame) {
    if (json_out) {
      std::cout << JsonForTerminal(frame.dump()) << "\n" << std::flush;
    }
    if (first_frame) {  // the answer: the task so far
      first_frame = false;
      auto first = ReadReply<LogReply>(frame);
      if (!first || first->tasks.empty()) {
        bad = true;
        return false;
      }
      const TaskResult& t = first->tasks.front();
      state = t.state;
      ended = IsFinal(t.state);
      if (!json_out) {
        const std::string& text = StreamOf(t, err);
        std::cout << shown.Chunk(text) << std::flush;
        at_line_start = text.empty() || text.back() == '\n';
        if (!ended && t.state != TaskState::kRunning) {
          std::cerr << "ckprof log: job " << r.job_id << " " << TaskLabel(t)
                    << " is queued: its output follows once it starts (Ctrl-C stops following)\n";
        }
      }
      return !ended;
    }
    const std::string event = frame.value("event", "");
    if (event == "output" && !json_out && frame.value("stream", "") == stream) {
      const std::string data = frame.value("data", "");
      std::cout << shown.Chunk(data) << std::flush;
      if (!data.empty()) at_line_start = data.back() == '\n';
    } else if (event == "dropped" && !json_out) {
      std::cerr << "ckprof log: " << frame.value("error", std::string("output dropped")) << " ("
                << frame.value("bytes", 0) << " bytes)\n";
    } else if (event == "ended") {
      ended = true;
      ParseEnum(frame.value("state", ""), &state);
      if (!json_out) {
        std::cout << shown.Rest();
        if (!at_line_start) std::cout << "\n" << std::flush;
        if (state != TaskState::kSucceeded) {
          std::cerr << "ckprof log: job " << r.job_id << " #" << r.tasks[0] << " ended "
                    << EnumName(state) << ": " << EscapeControl(frame.value("error", "")) << "\n";
        }
      }
    }
    return true;
  });
  if (!s) {
    PrintError("log", s.error());
    return conn->lost() ? kExitUnreachable : 1;
  }
  if (bad) {
    PrintError("log", "ckprofd sent a log answer that cannot be read");
    return 1;
  }
  if (!ended) {
    PrintError("log", "ckprofd ended the stream before the task ended");
    return 1;
  }
  return ExitFor(state);
}

// Shows each task of a job that has output, headed as tail heads files (`log J`).
void ShowJob(const LogReply& a, int64_t job_id, bool err, bool raw) {
  size_t shown = 0;
  for (const auto& t : a.tasks) {
    if (StreamOf(t, err).empty()) continue;
    if (shown++) std::cout << "\n";
    std::cout << Header(t);
    WriteText(StreamOf(t, err), raw);
  }
  if (shown == 0) {
    std::cerr << "ckprof log: no task of job " << job_id << " has written to "
              << (err ? "stderr" : "stdout") << " yet\n";
  }
  if (a.omitted > 0) {
    std::cerr << "ckprof log: " << a.omitted
              << " more task(s) left out to keep the answer small: name one, e.g. 'ckprof log "
              << job_id << "#N', or use --lines\n";
  }
}

// A frame's number field; 0 when it is missing or not a number (JSON null: "run" of a job
// that is not repeated).
int64_t NumberIn(const nlohmann::json& frame, const char* key) {
  auto it = frame.find(key);
  return it != frame.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// "#3 " or, a run of a repeated config, "#3 run 2 ": what heads each line of the task's output.
std::string LinePrefix(int64_t position, int run) {
  return "#" + std::to_string(position) + (run > 0 ? " run " + std::to_string(run) : "") + " ";
}

// One task's output in a job's follow: written a whole line at a time, each headed by the
// task's prefix, so that the lines of tasks that write at once never mix. A partial line waits
// for its end (or the task's); one longer than kMaxPartial is written as a line of its own.
class TaskLines {
 public:
  static constexpr size_t kMaxPartial = 64 << 10;
  TaskLines(std::string prefix, bool raw) : prefix_(std::move(prefix)), shown_(raw) {}
  const std::string& prefix() const { return prefix_; }

  void Add(const std::string& data) {
    partial_ += shown_.Chunk(data);
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::cout << prefix_;
      std::cout.write(partial_.data() + start, static_cast<std::streamsize>(nl + 1 - start));
    }
    partial_.erase(0, start);
    if (partial_.size() > kMaxPartial) EndPartial();
    std::cout << std::flush;
  }
  // Writes what is left of the last line, ended (the task ended, or runs again).
  void Flush() {
    partial_ += shown_.Rest();
    EndPartial();
    std::cout << std::flush;
  }

 private:
  void EndPartial() {
    if (!partial_.empty()) std::cout << prefix_ << partial_ << "\n";
    partial_.clear();
  }

  std::string prefix_;
  OutputText shown_;
  std::string partial_;
};

// A task's end in a job's follow: "#3 succeeded", else its error, which names the end ("#3
// failed (exit 1): ...", "#3 cancelled by alice", "#3 timed out after 60 s").
std::string EndLine(const std::string& prefix, TaskState state, const std::string& error) {
  if (state == TaskState::kSucceeded || error.empty()) {
    return prefix + std::string(EnumName(state)) + "\n";
  }
  return prefix + EscapeControl(error) + "\n";
}

// Follows every task of a job (`log J -f`): the tasks that run now (their last lines), then
// what each task writes, a line at a time headed "#N ", with a line at each start and end,
// until the job ends; its exit status is the job's (0: every task succeeded). A job that has
// ended is shown as `log J` shows it.
int FollowJob(const GlobalOptions& global, const LogRequest& r, bool err, bool json_out, bool raw) {
  auto conn = ConnectOrReport(global, "log");
  if (!conn) return kExitUnreachable;
  const std::string stream = err ? "stderr" : "stdout";
  std::map<int64_t, TaskLines> tasks;  // by task id: each run of a repeated config its own
  auto lines_of = [&](int64_t task_id, int64_t position, int run) -> TaskLines& {
    auto it = tasks.find(task_id);
    if (it == tasks.end()) {
      it = tasks.emplace(task_id, TaskLines(LinePrefix(position, run), raw)).first;
    }
    return it->second;
  };
  LogReply first;
  std::optional<JobSummary> end;  // the job as it ended
  bool first_frame = true, bad = false;
  Status s = conn->Stream(r, [&](const nlohmann::json& frame) {
    if (json_out) std::cout << JsonForTerminal(frame.dump()) << "\n" << std::flush;
    if (first_frame) {  // the answer: the tasks that run now, or (it ended) every task
      first_frame = false;
      auto a = ReadReply<LogReply>(frame);
      if (!a) {
        bad = true;
        return false;
      }
      first = std::move(*a);
      if (json_out || IsEnded(first.job.state)) return true;
      for (const auto& t : first.tasks) {
        TaskLines& lines = lines_of(t.task_id, t.position, t.run);
        std::cout << lines.prefix() << "running"
                  << (t.gpu >= 0 ? " on GPU " + std::to_string(t.gpu) : "") << "\n";
        lines.Add(StreamOf(t, err));
      }
      if (first.tasks.empty()) {
        std::cerr << "ckprof log: no task of job " << r.job_id
                  << " runs now: each one's output follows as it starts (Ctrl-C stops "
                     "following)\n";
      }
      return true;
    }
    if (frame.value("type", "") == "event") {  // the job's end, as `watch` has it
      if (auto it = frame.find("job"); it != frame.end() && it->is_object()) {
        if (auto job = JobSummaryFromJson(*it); job) end = std::move(*job);
      }
      if (!end) bad = true;
      return true;
    }
    if (json_out) return true;
    const std::string event = frame.value("event", "");
    const int64_t task_id = NumberIn(frame, "task_id");
    TaskLines& lines =
        lines_of(task_id, NumberIn(frame, "position"), static_cast<int>(NumberIn(frame, "run")));
    if (event == "output" && frame.value("stream", "") == stream) {
      lines.Add(frame.value("data", ""));
    } else if (event == "started") {
      lines.Flush();  // an earlier attempt's last words
      const int64_t attempt = NumberIn(frame, "attempt");
      std::cout << lines.prefix() << "started on GPU " << NumberIn(frame, "gpu")
                << (attempt > 1 ? " (attempt " + std::to_string(attempt) + ")" : "") << "\n"
                << std::flush;
    } else if (event == "ended") {
      lines.Flush();
      TaskState state = TaskState::kQueued;
      ParseEnum(frame.value("state", ""), &state);
      std::cout << EndLine(lines.prefix(), state, frame.value("error", "")) << std::flush;
      tasks.erase(task_id);
    } else if (event == "dropped") {
      std::cerr << "ckprof log: " << frame.value("error", std::string("output dropped")) << " ("
                << NumberIn(frame, "bytes") << " bytes)\n";
    }
    return true;
  });
  if (!json_out) {
    for (auto& [id, lines] : tasks) lines.Flush();
  }
  if (!s) {
    if (!conn->lost()) {
      PrintError("log", s.error());
      return 1;
    }
    PrintError("log", s.error() + "; job " + std::to_string(r.job_id) + " is kept: 'ckprof log " +
                          std::to_string(r.job_id) + " -f' follows it again once ckprofd is back");
    return kExitUnreachable;
  }
  if (bad) {
    PrintError("log", "ckprofd sent a log answer that cannot be read");
    return 1;
  }
  if (!end && IsEnded(first.job.state)) {  // it had ended: nothing followed
    if (!json_out) ShowJob(first, r.job_id, err, raw);
    end = first.job;
  }
  if (!end) {
    PrintError("log", "ckprofd ended the stream before the job ended");
    return 1;
  }
  if (end->total > 0 && end->counts.succeeded() == end->total) return 0;
  if (!json_out) {
    std::cerr << "ckprof log: job " << r.job_id << " " << EnumName(end->state) << ": "
              << end->counts.Describe() << "\n";
  }
  return 1;
}

}  // namespace

int RunLogCommand(const GlobalOptions& global, const Args& args) {
  std::string job, task, lines;
  bool follow = false, err = false, json_out = false, raw = false;
  ArgParser p("ckprof log",
              "Show what the profiler of a job's task wrote (its stdout; --stderr its stderr). "
              "Without a task, each task that has output, headed as tail heads files; a running "
              "task shows what it has written so far. -f follows a task live until it ends; "
              "without a task, every task of the job as tail -f follows several files: each "
              "line headed by its task's #N, a line when a task starts and when it ends, until "
              "the job ends.",
              "ckprofd keeps the first and last capture_bytes (16 KiB) of each stream of a "
              "finished task; a running task's output streams in full with -f.\nExit status: "
              "0, or with -f the task's end (without a task, the job's): 0 succeeded (every "
              "task), 1 any other end, 2 ckprofd cannot be reached or went away.\n\nexample:\n"
              "  ckprof log 12#3\n  ckprof log 12 3 -f\n  ckprof log 12 -f\n  "
              "ckprof log 12 --stderr --lines 5");
  p.Positional("JOB", &job, true, "the job id, or JOB#N for its task #N");
  p.Positional("TASK", &task, false,
               "the task's #N (as 'watch' and 'results' show it): 3, or '#3' quoted");
  p.Flag("--follow", &follow,
         "stream the task's output as it is written, until it ends (a queued task: once it "
         "starts); without a task, each task's that runs or starts, every line headed '#N ' "
         "(whole lines: tasks' lines never mix), until the job ends; a job that has ended is "
         "shown as without -f");
  p.Alias("-f", "--follow");
  p.Flag("--stderr", &err, "show the profiler's stderr instead of its stdout");
  p.Option("--lines", &lines, "N",
           "only the last N lines of each task (0: all that is kept; default: all of a named "
           "task, 10 of each task of a job)");
  p.Alias("-n", "--lines");
  p.Flag("--json", &json_out,
         "print the answer as JSON (with -f: one JSON object per line, as it comes; a whole "
         "job's follow ends with the job_finished event that 'watch --json' ends with)");
  p.Flag("--raw", &raw,
         "write the output byte for byte as the profiler wrote it (the default shows its "
         "control characters escaped: ESC as \\e, BEL as \\x07; a terminal would act on them)");
  if (auto code = p.Parse(args)) return *code;

  LogRequest r;
  const size_t hash = job.find('#');
  auto id = ParseJobId(job.substr(0, hash), "log");
  if (!id) return 2;
  r.job_id = *id;
  std::string task_text = hash == std::string::npos ? task : job.substr(hash + 1);
  if (hash != std::string::npos && !task.empty()) {
    PrintError("log", "name the task once: 'ckprof log " + job + "' or 'ckprof log " +
                          job.substr(0, hash) + " " + task + "'");
    return 2;
  }
  if (!task_text.empty()) {
    static const std::regex num(R"(#?\d{1,9})");
    if (!std::regex_match(task_text, num) ||
        std::stoi(task_text[0] == '#' ? task_text.substr(1) : task_text) <= 0) {
      PrintError("log",
                 "TASK must be a task's #N (as 'ckprof watch' and 'results' show it), "
                 "e.g. 3 or '#3', got '" +
                     task_text + "'");
      return 2;
    }
    r.tasks.push_back(std::stoi(task_text[0] == '#' ? task_text.substr(1) : task_text));
  }
  r.lines = r.tasks.empty() ? kDefaultJobLines : 0;
  if (!lines.empty()) {
    static const std::regex num(R"(\d{1,9})");
    if (!std::regex_match(lines, num)) {
      PrintError("log", "--lines must be a number of lines >= 0, got '" + lines + "'");
      return 2;
    }
    r.lines = std::stoi(lines);
  }
  if (follow) {
    r.follow = true;
    return r.tasks.empty() ? FollowJob(global, r, err, json_out, raw)
                           : Follow(global, r, err, json_out, raw);
  }
  LogReply a;
  if (int code = Ask(global, "log", r, &a)) return code;
  if (json_out) {
    std::cout << JsonForTerminal(ReplyJson(a).dump(2)) << "\n";
    return 0;
  }
  if (!r.tasks.empty()) {  // one task (a repeated config: each of its runs)
    for (const auto& t : a.tasks) {
      if (a.tasks.size() > 1) std::cout << Header(t);
      WriteText(StreamOf(t, err), raw);
      if (StreamOf(t, err).empty() && t.state == TaskState::kQueued) {
        std::cerr << "ckprof log: job " << t.job_id << " " << TaskLabel(t)
                  << " has not started yet (queued): 'ckprof log " << t.job_id << "#" << t.position
                  << " -f' follows it once it does\n";
      } else if (StreamOf(t, err).empty()) {
        std::cerr << "ckprof log: job " << t.job_id << " " << TaskLabel(t) << " ("
                  << EnumName(t.state) << ") wrote nothing to " << (err ? "stderr" : "stdout")
                  << (err ? "" : " (try --stderr)") << "\n";
      }
    }
    return 0;
  }
  ShowJob(a, *id, err, raw);
  return 0;
}

}  // namespace ckprof
