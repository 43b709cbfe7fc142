// The Scheduler's task output (ckprof log): stored captures of ended tasks, what running ones
// have written so far (the Launcher's captures), and followers of a task's live output or of
// every task of a job.
#include <algorithm>
#include <tuple>

#include "common/text_table.h"
#include "common/wire_fields.h"
#include "daemon/scheduler.h"
#include "daemon/task_result_codec.h"

namespace ckprof {
namespace {

// Tells a `log J -f` follower the job's end (job_finished, as `watch` gets it) and nothing else
// of the job's watch events: as an EndOnly watcher, it has none of them built.
class JobEndRelay final : public JobWatcher {
 public:
  explicit JobEndRelay(JobWatcher* to) : to_(to) {}
  void OnJobEvent(const JobEvent& event) override { to_->OnJobEvent(event); }
  bool EndOnly() const override { return true; }

 private:
  JobWatcher* to_;
};

}  // namespace

Scheduler::LiveLogs Scheduler::LiveLogsOf(int64_t job_id) const {
  LiveLogs live;
  for (const auto& g : gpus_) {
    auto task = g.task_id ? tasks_.find(g.task_id) : tasks_.end();
    if (task == tasks_.end() || task->second.job_id != job_id || task->second.gpu < 0) continue;
    live[g.task_id] = LiveLog{g.index, g.busy_since, launcher_.Output(g.run)};
  }
  return live;
}

TaskResult Scheduler::LogEntry(const TaskRecord& row, int lines, const LiveLogs& live) {
  TaskResult t = TaskResultFromRecord(row, /*with_output=*/true);
  t.config = nullptr;  // (log shows output; results --output has the config)
  if (auto it = live.find(row.id); it != live.end()) {
    if (it->second.output) {
      t.stdout_text = it->second.output->stdout_text;
      t.stderr_text = it->second.output->stderr_text;
    }
    t.state = TaskState::kRunning;
    t.gpu = it->second.gpu;
    t.started_at = it->second.started_at;
    t.ended_at = 0;
    t.error.clear();
  }
  t.stdout_text = LastLines(t.stdout_text, lines);
  t.stderr_text = LastLines(t.stderr_text, lines);
  return t;
}

LogReply Scheduler::LogOf(JobSummary job, const std::vector<TaskRecord>& rows, bool named,
                          int lines, size_t budget, const LiveLogs& live) {
  LogReply reply;
  reply.job = std::move(job);
  size_t used = 0;
  for (const auto& row : rows) {
    // Without named tasks, those that have not run yet say nothing.
    if (!named && row.state == TaskState::kQueued && row.result.empty()) continue;
    TaskResult t = LogEntry(row, lines, live);
    const size_t size = t.stdout_text.size() + t.stderr_text.size();
    if (!reply.tasks.empty() && used + size > budget) {
      ++reply.omitted;
      continue;
    }
    used += size;
    reply.tasks.push_back(std::move(t));
  }
  return reply;
}

Result<LogReply> Scheduler::Log(int64_t job_id, const std::vector<int>& positions, int lines,
                                size_t budget) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return MakeError("no job " + std::to_string(job_id));
  if (Status s = CheckPositions(it->second, positions); !s) return Error{s.error()};
  std::vector<TaskRecord> rows;
  if (positions.empty()) {
    auto all = store_.JobTasks(job_id);
    if (!all) return Error{all.error()};
    rows = std::move(*all);
  } else {
    for (int p : positions) {  // (in the order named)
      auto at = store_.JobTasksAt(job_id, {p}, /*brief=*/false);
      if (!at) return Error{at.error()};
      for (auto& r : *at) rows.push_back(std::move(r));
    }
  }
  return LogOf(MakeSummary(it->second), rows, !positions.empty(), lines, budget,
               LiveLogsOf(job_id));
}

Result<Scheduler::Following> Scheduler::FollowLog(int64_t job_id, int position, int lines,
                                                  JobWatcher* w) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return MakeError("no job " + std::to_string(job_id));
  if (Status s = CheckPositions(it->second, {position}); !s) return Error{s.error()};
  auto rows = store_.JobTasksAt(job_id, {position}, /*brief=*/false);
  if (!rows) return Error{rows.error()};
  // The run to follow: the one that runs, else the next to run, else (all ended) the last.
  const TaskRecord* chosen = nullptr;
  for (const auto& r : *rows) {
    auto t = tasks_.find(r.id);
    if (t == tasks_.end()) continue;
    if (t->second.gpu >= 0 &&
        std::any_of(gpus_.begin(), gpus_.end(), [&](const Gpu& g) { return g.task_id == r.id; })) {
      chosen = &r;
      break;
    }
    if (!chosen) chosen = &r;
  }
  Following f;
  f.ended = chosen == nullptr;
  if (!chosen) chosen = &rows->back();
  f.task_id = chosen->id;
  f.first.job = MakeSummary(it->second);
  f.first.tasks.push_back(LogEntry(*chosen, lines, LiveLogsOf(job_id)));
  if (!f.ended) followers_[f.task_id].push_back(w);
  return f;
}

Result<Scheduler::Following> Scheduler::FollowJobLog(int64_t job_id, int lines, size_t budget,
                                                     JobWatcher* w) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return MakeError("no job " + std::to_string(job_id));
  Following f;
  f.ended = Ended(it->second);
  if (f.ended) {  // every task's output, as `log J` shows it
    auto log = Log(job_id, {}, lines, budget);
    if (!log) return Error{log.error()};
    f.first = std::move(*log);
    return f;
  }
  // The tasks that run now, in position and run order (a GPU's: at most one each).
  std::vector<std::tuple<int64_t, int, int64_t>> running;  // position, run, task id
  for (const auto& g : gpus_) {
    auto t = g.task_id ? tasks_.find(g.task_id) : tasks_.end();
    if (t == tasks_.end() || t->second.job_id != job_id) continue;
    running.emplace_back(t->second.position, t->second.run, t->first);
  }
  std::sort(running.begin(), running.end());
  f.first.job = MakeSummary(it->second);
  size_t used = 0;
  const LiveLogs live = LiveLogsOf(job_id);
  for (const auto& [position, run, task_id] : running) {
    auto rows = store_.JobTasksAt(job_id, {static_cast<int>(position)}, /*brief=*/false);
    if (!rows) return Error{rows.error()};
    for (const auto& row : *rows) {
      if (row.id != task_id) continue;
      TaskResult t = LogEntry(row, lines, live);
      const size_t size = t.stdout_text.size() + t.stderr_text.size();
      if (!f.first.tasks.empty() && used + size > budget) {
        ++f.first.omitted;
        continue;
      }
      used += size;
      f.first.tasks.push_back(std::move(t));
    }
  }
  auto end = std::make_unique<JobEndRelay>(w);
  AddWatcher(job_id, end.get());
  job_followers_[job_id].push_back(JobLogFollower{w, std::move(end)});
  return f;
}

void Scheduler::StopFollowingJob(int64_t job_id, JobWatcher* w) {
  auto it = job_followers_.find(job_id);
  if (it == job_followers_.end()) return;
  auto& list = it->second;
  for (auto f = list.begin(); f != list.end(); ++f) {
    if (f->watcher != w) continue;
    RemoveWatcher(job_id, f->end.get());
    list.erase(f);
    break;
  }
  if (list.empty()) job_followers_.erase(it);
}

bool Scheduler::LogFollowed(int64_t task_id) const {
  if (followers_.count(task_id)) return true;
  if (job_followers_.empty()) return false;
  auto t = tasks_.find(task_id);
  return t != tasks_.end() && job_followers_.count(t->second.job_id);
}

void Scheduler::StopFollowing(int64_t task_id, JobWatcher* w) {
  auto it = followers_.find(task_id);
  if (it == followers_.end()) return;
  auto& list = it->second;
  list.erase(std::remove(list.begin(), list.end(), w), list.end());
  if (list.empty()) followers_.erase(it);
}

void Scheduler::EmitLogEvent(int64_t task_id, TaskLogEvent event, bool last) {
  auto of_task = followers_.find(task_id);
  auto t = tasks_.find(task_id);
  auto of_job = t != tasks_.end() ? job_followers_.find(t->second.job_id) : job_followers_.end();
  if (of_task == followers_.end() && of_job == job_followers_.end()) return;
  if (t != tasks_.end()) {
    event.job_id = t->second.job_id;
    event.position = t->second.position;
    event.run = t->second.run;
  }
  event.task_id = task_id;
  JobEvent frame;
  frame.frame = Frame(ToDom(event));
  frame.droppable = event.event == "output";
  // (A watcher told its last event is removed by its stream right after: copy the lists.)
  std::vector<JobWatcher*> followers;
  if (of_task != followers_.end()) {
    followers = of_task->second;
    if (last) followers_.erase(of_task);
  }
  std::vector<JobWatcher*> job_followers;
  if (of_job != job_followers_.end()) {
    for (const auto& f : of_job->second) job_followers.push_back(f.watcher);
  }
  // A task's end is not its job's: job followers are told the job's end by its watch event.
  for (JobWatcher* f : job_followers) f->OnJobEvent(frame);
  frame.job_finished = last;
  for (JobWatcher* f : followers) f->OnJobEvent(frame);
}

void Scheduler::EmitOutput(int64_t task_id, bool is_stderr, std::string_view data) {
  if (!LogFollowed(task_id)) return;
  TaskLogEvent e;
  e.event = "output";
  e.stream = is_stderr ? "stderr" : "stdout";
  e.data = std::string(data);
  EmitLogEvent(task_id, std::move(e), false);
}

void Scheduler::EmitStarted(int64_t task_id, int gpu, int attempt) {
  if (!LogFollowed(task_id)) return;
  TaskLogEvent started;
  started.event = "started";
  started.gpu = gpu;
  started.attempt = attempt;
  EmitLogEvent(task_id, std::move(started), false);
}

void Scheduler::Forget(int64_t task_id, TaskState state, const std::string& error) {
  if (LogFollowed(task_id)) {
    TaskLogEvent e;
    e.event = "ended";
    e.state = state;
    e.error = state == TaskState::kSucceeded ? "" : error;
    EmitLogEvent(task_id, std::move(e), true);
  }
  tasks_.erase(task_id);
}

}  // namespace ckprof
