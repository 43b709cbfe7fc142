#include "common/repeats.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace ckprof {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double CoefficientOfVariation(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  double mean = 0;
  for (double v : values) mean += v;
  mean /= static_cast<double>(values.size());
  if (mean == 0) return 0;
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  return std::sqrt(squares / static_cast<double>(values.size() - 1)) / std::fabs(mean);
}

namespace {

// The runs of one config, in run order, merged into one result.
TaskResult MergeRuns(std::vector<const TaskResult*> runs, double noise_threshold) {
  std::stable_sort(runs.begin(), runs.end(),
                   [](const TaskResult* a, const TaskResult* b) { return a->run < b->run; });
  RepeatStats stats;
  stats.runs = static_cast<int>(runs.size());
  stats.noise_threshold = noise_threshold;
  std::vector<const TaskResult*> ok;
  bool running = false, queued = false;
  for (const TaskResult* r : runs) {
    if (r->finished()) ++stats.finished;
    if (r->state == TaskState::kRunning) running = true;
    if (r->state == TaskState::kQueued) queued = true;
    if (!r->ok()) continue;
    ok.push_back(r);
    stats.times_ms.push_back(r->avg_ms);
    stats.gpus.push_back(r->gpu);
  }
  stats.succeeded = static_cast<int>(ok.size());

  // The run the result is: the lower middle of the succeeded runs by time, else the first.
  const TaskResult* base = runs.front();
  if (!ok.empty()) {
    std::vector<const TaskResult*> by_time = ok;
    std::stable_sort(by_time.begin(), by_time.end(), [](const TaskResult* a, const TaskResult* b) {
      return a->avg_ms < b->avg_ms;
    });
    base = by_time[(by_time.size() - 1) / 2];
    stats.median_ms = Median(stats.times_ms);
    stats.min_ms = by_time.front()->avg_ms;
    stats.max_ms = by_time.back()->avg_ms;
    stats.cv = CoefficientOfVariation(stats.times_ms);
    stats.noisy = stats.cv > noise_threshold;
    for (const TaskResult* r : ok) stats.same_best += r->best_name == base->best_name ? 1 : 0;
  }
  TaskResult merged = *base;
  merged.run = 0;
  if (!ok.empty()) {
    // The same work in the median time: TFlops and GB/s scale with 1/time.
    const double scale = stats.median_ms > 0 ? base->avg_ms / stats.median_ms : 1.0;
    merged.avg_ms = stats.median_ms;
    merged.tflops = base->tflops * scale;
    merged.gbps = base->gbps * scale;
  }
  if (running || queued) {
    merged.state = running ? TaskState::kRunning : TaskState::kQueued;
    merged.error.clear();
  } else if (!ok.empty()) {
    merged.state = TaskState::kSucceeded;
    merged.error.clear();
  } else if (stats.runs > 1) {
    merged.error = "all " + std::to_string(stats.runs) +
                   " runs ended without success; the first: " +
                   (base->error.empty() ? std::string(EnumName(base->state)) : base->error);
  }
  merged.attempts = 0;
  merged.elapsed_s = 0;
  for (const TaskResult* r : runs) {
    merged.attempts += r->attempts;
    merged.elapsed_s += r->elapsed_s;
  }
  // A run taken beside a foreign process taints the config's result.
  merged.contended.clear();
  for (const TaskResult* r : runs) {
    for (const GpuUser& u : r->contended) {
      const bool seen = std::any_of(merged.contended.begin(), merged.contended.end(),
                                    [&](const GpuUser& m) { return m.pid == u.pid; });
      if (!seen) merged.contended.push_back(u);
    }
  }
  merged.repeats = std::move(stats);
  return merged;
}

}  // namespace

std::vector<TaskResult> MergeRepeats(const std::vector<TaskResult>& tasks, double noise_threshold) {
  std::vector<TaskResult> out;
  // Where each position's runs are: their slot in `out` and the runs so far.
  std::unordered_map<int64_t, size_t> slot_of;
  std::vector<std::vector<const TaskResult*>> groups;
  std::vector<int64_t> group_slot;
  for (const TaskResult& t : tasks) {
    if (t.run <= 0) {
      out.push_back(t);
      continue;
    }
    auto [it, fresh] = slot_of.emplace(t.position, groups.size());
    if (fresh) {
      groups.emplace_back();
      group_slot.push_back(static_cast<int64_t>(out.size()));
      out.emplace_back();  // filled below
    }
    groups[it->second].push_back(&t);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    out[static_cast<size_t>(group_slot[g])] = MergeRuns(groups[g], noise_threshold);
  }
  return out;
}

}  // namespace ckprof
