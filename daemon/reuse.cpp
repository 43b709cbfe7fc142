// Reuse and the tuning table: Scheduler::ApplyReuse (at submit), Scheduler::MeasurementOf (at a
// run's end) and Scheduler::Best. The Store holds the measurements (its `measurements` table);
// the profiler builds come from ProfilerIdentities.
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/ck_config.h"
#include "common/json_util.h"
#include "common/wire_fields.h"
#include "daemon/scheduler.h"

namespace ckprof {

namespace {

// The stored result with "reused_from" added: where, when and on which GPU it was measured.
std::string ReusedResultJson(const ReusableRecord& from, const std::string& gpu_model) {
  std::string text = from.result;
  while (!text.empty() && text.back() != '}') text.pop_back();
  if (text.empty()) return text;
  text.pop_back();
  ReusedFrom r;
  r.job_id = from.job_id;
  r.task_id = from.task_id;
  r.position = from.position;
  r.measured_at = from.measured_at;
  r.gpu = from.gpu;
  r.gpu_model = gpu_model;
  text += text.size() > 1 ? ",\"reused_from\":" : "\"reused_from\":";
  AppendObject(text, r);
  text += '}';
  return text;
}

}  // namespace

int64_t Scheduler::ApplyReuse(const JobRecord& job, std::span<TaskRecord> records,
                              ReuseLookups& lookups) {
  if (!lookups.ready) {
    lookups.ready = true;
    if (!job.reuse || job.repeat > 1 || options_.reuse_max_age_s <= 0) return 0;
    // A job that sets its own environment (--env) asked for runs under it: what others measured
    // without it is not its answer (MeasurementOf keeps its own numbers out of reuse in turn).
    if (!job.env.empty()) return 0;
    // The GPU model the job's tasks would run on: one for all of its GPUs, else each task's
    // model is known only once it is placed, and nothing is reused.
    std::set<std::string> models;
    for (const auto& g : gpus_) {
      if (job.gpus.empty() || std::count(job.gpus.begin(), job.gpus.end(), g.index))
        models.insert(board_->ModelOf(g.index));
    }
    if (models.size() != 1) {
      if (models.size() > 1) {
        spdlog::info("job from {}: not reusing results: its GPUs are of {} models", job.owner,
                     models.size());
      }
      return 0;
    }
    auto target = ResolveProfiler(job.profiler_path);
    if (!target) return 0;
    for (ConvOp op : {ConvOp::kFwd, ConvOp::kBwdData, ConvOp::kBwdWeight}) {
      if (!target->Supports(op)) continue;
      // Hashed on the conversion pool before this (Service::HandleSubmit): never here.
      if (auto id = identities_.Cached(target->ExecutableFor(op))) lookups.builds[op] = *id;
    }
    lookups.model = *models.begin();
    lookups.since = UnixNow() - options_.reuse_max_age_s;
    lookups.uid = options_.share_results ? -1 : int64_t{job.uid};
    lookups.active = true;
  }
  if (!lookups.active) return 0;
  const double now = UnixNow();
  int64_t reused = 0;
  for (auto& r : records) {
    if (r.problem.empty()) continue;
    auto op = ParseOperationType(r.op);
    if (!op) continue;
    auto build = lookups.builds.find(*op);
    if (build == lookups.builds.end()) continue;
    // One lookup per problem: a sweep that holds a shape twice asks once.
    auto key = std::make_pair(r.problem, build->second);
    auto it = lookups.found.find(key);
    if (it == lookups.found.end()) {
      auto hit =
          store_.FindReusable(r.problem, build->second, lookups.model, lookups.since, lookups.uid);
      if (!hit) {
        spdlog::warn("not reusing results: {}", hit.error());
        lookups.active = false;
        return reused;
      }
      if (lookups.found.size() >= kMaxReuseLookups) lookups.found.clear();
      it = lookups.found.emplace(std::move(key), std::move(*hit)).first;
    }
    if (!it->second) continue;
    r.result = ReusedResultJson(*it->second, lookups.model);
    if (r.result.empty()) continue;
    r.reused_from = it->second->task_id;
    r.started_at = r.ended_at = now;
    ++reused;
  }
  return reused;
}

std::optional<MeasurementRecord> Scheduler::MeasurementOf(const Task& task, const Job& job,
                                                          const Gpu* gpu, const RunResult& r,
                                                          const RunContext& context) {
  if (r.outcome.kind != Outcome::Kind::kSucceeded || !r.perf.has_best || !(r.perf.avg_ms > 0) ||
      !context.contended.empty() || !job.target) {
    return std::nullopt;
  }
  // The build is the file that ran (the runner executed the descriptor opened at its start),
  // not whatever its path names now: identified at submit and unchanged since, and not one its
  // submitter could have changed (a root daemon's users' own builds stay in their results).
  // A remote run's file is on its node: its path is all there is.
  const std::string path = job.target->ExecutableFor(task.op);
  std::optional<std::string> build;
  struct stat st {};
  bool stat_ok = false;
  if (launcher_.Remote()) {
    build = identities_.Cached(path);
    stat_ok = stat(path.c_str(), &st) == 0;
  } else {
    const int fd = gpu ? gpu->exec_fd.get() : -1;
    build = identities_.OfOpenFile(fd);
    stat_ok = fd >= 0 && fstat(fd, &st) == 0;
  }
  if (!build || !stat_ok) {
    spdlog::info(
        "task {}: its result is not kept for reuse: the file that ran is not a build "
        "identified at submit (replaced, rebuilt or too large since)",
        task.id);
    return std::nullopt;
  }
  // A variable of the submitter's (--env: LD_PRELOAD, the HIP or emulator settings) may change
  // what the profiler does and prints, whoever owns the build: such a run measured her job,
  // not the build, the problem and the GPU that reuse and `best` speak for.
  if (!job.rec.env.empty()) {
    spdlog::info("task {}: its result is not shared: its job sets its own environment (--env)",
                 task.id);
    return std::nullopt;
  }
  const bool trusted_user = job.rec.uid == 0 || job.rec.uid == geteuid();
  if (!trusted_user && WritableBy(st, job.rec.uid, job.rec.gid, job.rec.groups)) {
    spdlog::info("task {}: its result is not shared: {} may change the build it ran ({})", task.id,
                 job.rec.owner, path);
    return std::nullopt;
  }
  MeasurementRecord m;
  m.profiler = std::move(*build);
  m.gpu_model = gpu ? board_->ModelOf(gpu->index) : "";
  m.gpu = gpu ? gpu->index : -1;
  m.best_name = r.perf.best_name;
  m.split_k = r.perf.split_k;
  m.avg_ms = r.perf.avg_ms;
  m.tflops = std::isfinite(r.perf.tflops) ? r.perf.tflops : 0;
  m.gbps = std::isfinite(r.perf.gbps) ? r.perf.gbps : 0;
  return m;
}

}  // namespace ckprof
