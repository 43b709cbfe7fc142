// ckprof watch / wait: follow a job until it ends. watch draws a live progress block on a
// terminal, fitted to its width (the bar, rate and ETA, and the running task of each GPU, on
// lines of their own when one line is too narrow; plain line-per-event output otherwise, each
// line written as it happens); wait is
// silent and takes several jobs. Both exit 0 only when every task succeeded, 1 when one did
// not, 2 when the daemon cannot be reached or goes away.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <deque>
#include <iostream>
#include <map>
#include <set>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "common/ck_config.h"
#include "common/results_file.h"
#include "common/terminal_text.h"
#include "common/text_table.h"

namespace ckprof {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Renders a job's event stream.
class ProgressView {
 public:
  // `socket`: where to ask for the failures that came before the watch began.
  ProgressView(bool live, int64_t job_id, std::string socket)
      : live_(live), job_id_(job_id), socket_(std::move(socket)), start_(Clock::now()) {}

  // The first answer: the job as it stands, and what runs now.
  void OnStart(const WatchReply& w) {
    if (w.job) job_ = *w.job;
    for (const auto& g : w.running) {
      running_[g.task_id] = {g.placement ? -1 : g.index, "#" + std::to_string(g.position)};
    }
    if (!running_.empty() && live_) LabelRunning();
    if (!live_) {
      std::cout << "job " << job_id_ << " \"" << EscapeControl(job_.name) << "\": " << job_.done()
                << "/" << job_.total << " done, " << job_.counts.running() << " running, "
                << job_.counts.queued() << " queued"
                << std::endl;  // each line as it happens, even into a pipe
    }
    start_done_ = job_.done();
    if (job_.counts.unsuccessful() > 0) EarlierFailures();
    if (live_) Redraw();
  }

  void OnEvent(const JobEventFrame& e) {
    if (e.job) job_ = *e.job;
    switch (e.event) {
      case EventKind::kTaskStarted: {
        const std::string what = RunningLabel(e.position, e.operation, e.priority_rank);
        running_[e.task_id] = {e.gpu, what};
        // (A task handed to Slurm has no GPU until Slurm grants one: its end says which.)
        if (!live_) {
          std::cout << "started  " << what
                    << (e.gpu >= 0 ? " on GPU " + std::to_string(e.gpu) : " in Slurm") << std::endl;
        }
        break;
      }
      case EventKind::kTaskFinished:
        if (e.task) Finished(*e.task);
        NoteProgress();
        break;
      case EventKind::kJobFinished:
        End();
        return;
    }
    if (live_) Redraw();
  }

  // The closing line, once: on job_finished, or when the stream ended without one (the job
  // had already ended when the watch began).
  void End() {
    if (ended_) return;
    ended_ = true;
    ClearBlock();
    std::cout << "job " << job_id_ << " " << EnumName(job_.state) << ": " << JobCountsText(job_);
    double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    std::cout << " (" << FormatDuration(secs) << " watched)\n";
    std::cout.flush();
  }

 private:
  // At most this many earlier failures are listed when a watch begins late.
  static constexpr size_t kEarlierFailuresShown = 20;

  static std::string What(const TaskResult& t) { return TaskLabel(t); }

  // The line of a task that ended without success (its error escaped: it quotes the profiler's
  // output and the user's paths).
  static std::string FailureLine(const TaskResult& t) {
    return (t.state == TaskState::kCancelled ? "cancelled " : "FAILED   ") + What(t) +
           (t.gpu >= 0 ? " on GPU " + std::to_string(t.gpu) : "") + ": " +
           (t.error.empty() ? std::string(EnumName(t.state)) : EscapeControl(t.error));
  }

  void Finished(const TaskResult& t) {
    running_.erase(t.task_id);
    // Already listed among the earlier failures (it ended while the watch began).
    if (!shown_.insert({t.task_id, t.attempts}).second) return;
    std::string line;
    if (t.ok()) {
      if (live_) return;
      line = "finished " + What(t) + " on GPU " + std::to_string(t.gpu) + ": " +
             FormatMs(t.avg_ms) + " ms, " + FormatMs(t.tflops) + " TFlops";
    } else {
      line = FailureLine(t);
    }
    line += "  [" + std::to_string(job_.done()) + "/" + std::to_string(job_.total) + "]";
    ClearBlock();
    std::cout << line << std::endl;
  }

  // A watch that begins after tasks failed lists them (from the job's results, on a second
  // connection: this one carries the event stream), so that a late watch misses nothing.
  void EarlierFailures() {
    std::vector<TaskResult> failed;
    std::string why;
    if (auto conn = Connection::Open(socket_); !conn) {
      why = conn.error();
    } else if (auto fetched = FetchResults(**conn, job_id_, /*with_output=*/false,
                                           /*with_runs=*/true);
               !fetched) {
      why = fetched.error();
    } else {
      // Each run of a repeated job: a failed run is a failure even when others succeeded.
      for (auto& t : fetched->runs.empty() ? fetched->tasks : fetched->runs) {
        if (t.finished() && !t.ok()) failed.push_back(std::move(t));
      }
    }
    if (!why.empty()) {
      PrintError("watch", "cannot list the failures before this watch: " + why);
      return;
    }
    if (failed.empty()) return;
    std::stable_sort(failed.begin(), failed.end(), [](const TaskResult& a, const TaskResult& b) {
      return a.ended_at < b.ended_at;
    });
    ClearBlock();
    std::cout << failed.size() << " task" << (failed.size() == 1 ? "" : "s")
              << " ended without success before this watch began:\n";
    for (size_t i = 0; i < failed.size(); ++i) {
      shown_.insert({failed[i].task_id, failed[i].attempts});
      if (i < kEarlierFailuresShown) std::cout << FailureLine(failed[i]) << "\n";
    }
    if (failed.size() > kEarlierFailuresShown) {
      std::cout << "... and " << failed.size() - kEarlierFailuresShown
                << " more: see 'ckprof results " << job_id_ << "'\n";
    }
    std::cout.flush();
  }

  static std::string FormatMs(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
  }

  // "#12 fwd (rank 2)": a running task, the same for those running as the watch began.
  static std::string RunningLabel(int64_t position, const std::string& operation, int64_t rank) {
    return "#" + std::to_string(position) + " " + ShortOp(operation) + " (rank " +
           std::to_string(rank) + ")";
  }

  // The tasks that ran as the watch began get the label their start events would have given
  // (the first answer names only their #N): from the job's results, on a second connection.
  void LabelRunning() {
    auto conn = Connection::Open(socket_);
    if (!conn) return;  // they keep their #N
    auto fetched = FetchResults(**conn, job_id_, /*with_output=*/false, /*with_runs=*/true);
    if (!fetched) return;
    for (const auto& t : fetched->runs.empty() ? fetched->tasks : fetched->runs) {
      if (auto it = running_.find(t.task_id); it != running_.end()) {
        it->second.second = RunningLabel(t.position, t.operation, t.priority_rank);
      }
    }
  }

  // A task ended: the rate and ETA are measured here, not at each redraw, so that they hold
  // still between ends. The rate is over the last kRateWindow ends (or since the watch began,
  // before there are that many), so that one burst of ends does not swing it.
  void NoteProgress() {
    const int64_t done = job_.done();
    if (!ends_.empty() && ends_.back().second == done) return;
    if (done <= start_done_) return;
    ends_.emplace_back(Clock::now(), done);
    while (ends_.size() > kRateWindow + 1) ends_.pop_front();
    const bool full = ends_.size() > kRateWindow;
    const Clock::time_point from = full ? ends_.front().first : start_;
    const int64_t from_done = full ? ends_.front().second : start_done_;
    const double secs = std::chrono::duration<double>(ends_.back().first - from).count();
    if (secs < 0.5) return;  // too short to tell: as it was ("-" at first)
    rate_ = static_cast<double>(done - from_done) / secs;
    eta_ = rate_ > 0 ? static_cast<double>(std::max<int64_t>(job_.total - done, 0)) / rate_ : -1;
  }

  // "2.4/s", "0.35/s", "4.2/min"; "-" while not known.
  static std::string RateText(double rate) {
    if (rate <= 0) return "-";
    char buf[32];
    if (rate >= 10) {
      std::snprintf(buf, sizeof buf, "%.0f/s", rate);
    } else if (rate >= 0.1) {
      std::snprintf(buf, sizeof buf, "%.2g/s", rate);
    } else {
      std::snprintf(buf, sizeof buf, "%.2g/min", rate * 60);
    }
    return buf;
  }

  // Moves to the start of the drawn block and clears it, so that a line printed next lands
  // where the block was (and the block is drawn again below it).
  void ClearBlock() {
    if (!live_ || drawn_lines_ == 0) return;
    if (drawn_lines_ > 1) std::cout << "\033[" << drawn_lines_ - 1 << "A";
    std::cout << "\r\033[J";
    drawn_lines_ = 0;
  }

  // The progress block, fitted to the terminal's width (read anew: it may change): the bar,
  // counts, rate and ETA, and each running task after them when all fits on one line, else
  // one line per GPU below. No line reaches the last column (a terminal wraps there).
  void Redraw() {
    size_t width = TerminalWidth(false);
    if (width == 0) width = 80;
    const size_t usable = std::max<size_t>(width, 20) - 1;
    const int64_t done = job_.done(), total = std::max<int64_t>(job_.total, 1);
    double eta = rate_ > 0 ? eta_ : job_.eta_s;  // the daemon's estimate until ours is known
    if (done >= job_.total) eta = -1;            // ended: "-", not 0:00
    char tail[128];
    std::snprintf(tail, sizeof tail, " %lld/%lld %3d%%  %s  ETA %s", static_cast<long long>(done),
                  static_cast<long long>(job_.total), static_cast<int>(100 * done / total),
                  RateText(rate_).c_str(), FormatDuration(eta).c_str());
    const size_t tail_width = DisplayWidth(tail);
    std::string head;
    // The bar takes what is left, 10 to 30 columns; none when not even 10 are.
    const size_t room = usable > tail_width + 2 ? usable - tail_width - 2 : 0;
    if (room >= 10) {
      const size_t bar = std::min<size_t>(room, 30);
      const size_t filled = static_cast<size_t>(static_cast<double>(bar) * done / total);
      head = "[" + std::string(filled, '#') + std::string(bar - filled, '-') + "]";
    }
    head += tail;
    std::vector<std::string> gpus;  // by GPU; Slurm's (no GPU yet) last
    std::vector<std::pair<int, std::string>> order;
    for (const auto& [task, where] : running_) {
      const auto& [gpu, what] = where;
      order.emplace_back(gpu >= 0 ? gpu : INT_MAX,
                         (gpu >= 0 ? "GPU" + std::to_string(gpu) : std::string("Slurm")) + " " +
                             EscapeControl(what));
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& o : order) gpus.push_back(std::move(o.second));
    std::vector<std::string> lines;
    std::string one = head;
    for (const auto& g : gpus) one += "  " + g;
    if (DisplayWidth(one) <= usable) {
      lines.push_back(one);
    } else {
      lines.push_back(CutToWidth(head, usable));
      for (size_t i = 0; i < gpus.size(); ++i) {
        if (i == kGpuLinesShown && gpus.size() > kGpuLinesShown + 1) {
          lines.push_back("  ... and " + std::to_string(gpus.size() - i) + " more running");
          break;
        }
        lines.push_back(CutToWidth("  " + gpus[i], usable));
      }
    }
    ClearBlock();
    for (size_t i = 0; i < lines.size(); ++i) std::cout << (i ? "\n" : "") << lines[i];
    std::cout << std::flush;
    drawn_lines_ = lines.size();
  }

  // The ends the rate is measured over; the most GPU lines drawn below the bar.
  static constexpr size_t kRateWindow = 16;
  static constexpr size_t kGpuLinesShown = 16;

  bool live_;
  int64_t job_id_;
  std::string socket_;
  std::set<std::pair<int64_t, int>> shown_;  // (task, attempt) whose end has been printed
  Clock::time_point start_;
  int64_t start_done_ = 0;
  JobSummary job_;
  std::map<int64_t, std::pair<int, std::string>> running_;  // task -> (GPU, what); -1: Slurm's
  bool ended_ = false;
  std::deque<std::pair<Clock::time_point, int64_t>> ends_;  // (when, done) at recent ends
  double rate_ = 0;                                         // tasks per second; 0 = not known yet
  double eta_ = -1;         // seconds, as of the last end; -1 = not known
  size_t drawn_lines_ = 0;  // lines of the block on the screen now (its last holds the cursor)
};

// What follows "the daemon went away": the jobs are in its state dir and go on when it is back.
std::string KeptHint(const std::vector<int64_t>& ids) {
  std::string list;
  for (int64_t id : ids) list += (list.empty() ? "" : ", ") + std::to_string(id);
  const std::string first = std::to_string(ids.front());
  return (ids.size() == 1 ? "; job " + list + " is kept" : "; jobs " + list + " are kept") +
         ": see 'ckprof status " + first + "' once ckprofd is back";
}

// How a job is followed: the progress view (watch), silently (wait), or each frame the daemon
// sends as one JSON line (watch --json).
enum class Follow { kShow, kSilent, kJson };

// The exit code of a wait that ran out of time (as timeout(1)'s).
constexpr int kExitTimedOut = 124;

// Follows one job on `conn` to its end. Returns the exit code (0: every task succeeded, 1: one
// did not or the daemon refused the watch, kExitUnreachable: the daemon went away,
// kExitTimedOut: the connection's deadline passed) after printing why it is not 0. `last`
// receives the job as last seen.
int FollowJob(Connection& conn, int64_t job_id, Follow mode, bool live, double timeout_s,
              JobSummary* last) {
  const std::string cmd = mode == Follow::kSilent ? "wait" : "watch";
  ProgressView view(live, job_id, conn.path());
  const bool show = mode == Follow::kShow;
  Status s = Status::Ok();
  if (mode == Follow::kJson) {
    // The daemon's frames as they are: the first answer, then each event, one per line.
    s = conn.Watch(job_id, [&](const nlohmann::json& frame) {
      if (auto it = frame.find("job"); it != frame.end() && it->is_object()) {
        if (auto job = JobSummaryFromJson(*it); job) *last = *job;
      }
      std::cout << JsonForTerminal(frame.dump()) << std::endl;
      return true;
    });
  } else {
    // Silent: only the job's end is asked for (a sweep's task events are not even built).
    s = conn.Watch(
        job_id,
        [&](const WatchReply& w) {
          if (w.job) *last = *w.job;
          if (show) view.OnStart(w);
          return true;
        },
        [&](const JobEventFrame& e) {
          if (e.job) *last = *e.job;
          if (show) view.OnEvent(e);
          return true;
        },
        /*end_only=*/!show);
  }
  if (!s) {
    if (show && live) std::cout << "\n";  // below the progress bar
    if (conn.timed_out()) {
      PrintError(cmd, "job " + std::to_string(job_id) + " has not ended within --timeout " +
                          FormatNumber(timeout_s) + " s; it goes on (see 'ckprof status " +
                          std::to_string(job_id) + "')");
      return kExitTimedOut;
    }
    if (!conn.lost()) {
      PrintError(cmd, "job " + std::to_string(job_id) + ": " + s.error());
      return 1;
    }
    // Not a task's failure: the daemon stopped (or died) while we waited. Its jobs are in its
    // state dir and go on when it is back.
    PrintError(cmd, s.error() + KeptHint({job_id}));
    return kExitUnreachable;
  }
  if (show) view.End();
  return last->total > 0 && last->counts.succeeded() == last->total ? 0 : 1;
}

}  // namespace

int RunWatchCommand(const GlobalOptions& global, const Args& args, bool silent) {
  const std::string cmd = silent ? "wait" : "watch";
  std::string job, timeout;
  std::vector<std::string> jobs;
  bool json_out = false;
  ArgParser p("ckprof " + cmd,
              silent ? "Wait silently until each job ends. Exit 0 only if every task of every "
                       "job succeeded, 1 if one did not (or a job does not exist), 2 if ckprofd "
                       "cannot be reached or goes away, 124 if --timeout passed first."
                     : "Follow a job live: progress bar, rate, ETA, which task runs on which GPU, "
                       "failures as they happen (one line per event when not on a terminal); "
                       "a watch begun late lists the failures before it. Exit 0 only if every "
                       "task succeeded, 1 if one did not, 2 if ckprofd cannot be reached or goes "
                       "away.",
              silent ? "example:\n  ckprof wait 12 13 && ckprof compare 12 13\n"
                       "  ckprof wait 12 --timeout 3600 || echo \"not done: $?\""
                     : "example:\n  ckprof watch 12 && ckprof results 12\n"
                       "  ckprof watch 12 --json | jq -c 'select(.event == \"task_finished\")'");
  if (silent) {
    p.Positionals("JOB", &jobs, true, "the job ids");
    p.Option("--timeout", &timeout, "S", "give up after S seconds (exit 124; the jobs go on)");
    p.Flag("--json", &json_out,
           "print the jobs as they ended as JSON, a list in the order named (after a "
           "--timeout: every job, those that have not ended as they stand)");
  } else {
    p.Positional("JOB", &job, true, "the job id");
    p.Flag("--json", &json_out,
           "print the daemon's frames as they come, one JSON object per line: the first answer, "
           "then each event (task_started, task_finished, job_finished)");
  }
  if (auto code = p.Parse(args)) return *code;
  if (!silent) jobs = {job};
  const auto parsed_ids = ParseJobIds(jobs, cmd);
  if (!parsed_ids) return 2;
  const std::vector<int64_t>& ids = *parsed_ids;
  double timeout_s = 0;
  if (!timeout.empty()) {
    char* end = nullptr;
    timeout_s = std::strtod(timeout.c_str(), &end);
    // (At most 1e9 s, 31 years: a larger deadline would overflow the clock.)
    if (*end != '\0' || !(timeout_s > 0) || !(timeout_s <= 1e9)) {
      PrintError(cmd, "--timeout must be a number of seconds > 0, got '" + timeout + "'" +
                          (timeout_s > 1e9 ? " (at most 1e9)" : ""));
      return 2;
    }
  }
  bool went_away = false;
  auto opened = Connection::Open(ResolveSocketPath(global.socket), &went_away);
  if (!opened) {
    // A daemon that dies as we connect keeps the jobs as surely as one that dies later.
    PrintError(cmd, opened.error() + (went_away ? KeptHint(ids) : std::string()));
    return kExitUnreachable;
  }
  auto& conn = *opened;
  if (timeout_s > 0) {
    conn->SetDeadline(std::chrono::steady_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  }
  const Follow mode = json_out && !silent ? Follow::kJson
                      : silent            ? Follow::kSilent
                                          : Follow::kShow;
  // The worst end wins: a timeout (124) over unreachable (2) over a failure (1) over success.
  int worst = 0;
  std::vector<JobSummary> ended;
  for (int64_t id : ids) {
    JobSummary last;
    const int code =
        FollowJob(*conn, id, mode, mode == Follow::kShow && StdoutIsTerminal(), timeout_s, &last);
    worst = std::max(worst, code);
    if (last.id > 0) ended.push_back(last);
    if (conn->lost() || conn->timed_out()) break;  // the rest cannot be waited for
  }
  if (silent && json_out) {
    // Every job named, in the order named, as without --timeout: those not followed to their
    // end (the timeout came first) as they stand now, asked on a connection of its own.
    std::vector<JobSummary> listed;
    for (int64_t id : conn->timed_out() ? ids : std::vector<int64_t>{}) {
      auto seen =
          std::find_if(ended.begin(), ended.end(), [&](const JobSummary& j) { return j.id == id; });
      if (seen != ended.end() && IsEnded(seen->state)) {
        listed.push_back(*seen);
        continue;
      }
      StatusRequest r;
      r.job_id = id;
      StatusReply now;
      if (Ask(global, cmd, r, &now) == 0 && now.job) {
        listed.push_back(*now.job);
      } else if (seen != ended.end()) {
        listed.push_back(*seen);  // not answered: as last seen
      }
    }
    std::cout << JsonForTerminal(JobsJson(conn->timed_out() ? listed : ended).dump(2)) << "\n";
  }
  return worst;
}

}  // namespace ckprof
