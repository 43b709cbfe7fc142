#include "daemon/task_result_codec.h"

#include <charconv>
#include <cmath>

#include "common/ck_config.h"
#include "common/json_util.h"
#include "common/wire_fields.h"

namespace ckprof {

using json = nlohmann::json;

// The task's result as stored: outcome, command, parsed perf and bounded captures.
std::string ResultJson(const Outcome& o, const std::string& command, int gpu, const RunResult* r,
                       const RunContext* context) {
  // Written directly, once per task: through the DOM the captures (kilobytes a task) cost a
  // copy and nlohmann's byte-by-byte UTF-8 checks, and the rest a map node per key.
  std::string text;
  if (r) text.reserve(r->stdout_capture.size() + r->stderr_capture.size() + 1024);
  JsonObjectWriter w(text);
  w.Field("outcome", OutcomeKindName(o.kind))
      .Field("exit_code", o.exit_code)
      .Field("signal", o.signal)
      .Field("reason", o.reason)
      .Field("summary", o.Summary())
      .Field("command", command)
      .Field("gpu", gpu);
  if (r) {
    w.Field("elapsed_s", r->elapsed_s).Field("pid", r->pid);
    if (r->cpu_s) w.Field("cpu_s", *r->cpu_s);
    if (r->peak_memory_bytes) w.Field("peak_memory_bytes", *r->peak_memory_bytes);
    if (!r->usage_from.empty()) w.Field("usage_from", r->usage_from);
    const CkPerf& p = r->perf;
    {
      JsonObjectWriter perf(w.Key("perf"));
      perf.Field("has_best", p.has_best)
          .Field("best_name", p.best_name)
          .Field("avg_ms", std::isfinite(p.avg_ms) ? p.avg_ms : 0.0)
          .Field("tflops", std::isfinite(p.tflops) ? p.tflops : 0.0)
          .Field("gbps", std::isfinite(p.gbps) ? p.gbps : 0.0)
          .Field("split_k", p.split_k)
          .Field("valids", p.valids)
          .Field("instances_tried", p.instances_tried)
          .Field("instances_supported", p.instances_supported);
      std::string& top = perf.Key("top");
      top += '[';
      for (size_t i = 0; i < p.top.size(); ++i) {
        if (i) top += ',';
        const auto& t = p.top[i];
        JsonObjectWriter(top)
            .Field("name", t.name)
            .Field("avg_ms", t.avg_ms)
            .Field("tflops", t.tflops)
            .Field("gbps", t.gbps)
            .Field("split_k", t.split_k);
      }
      top += ']';
    }
    w.Field("stdout_bytes", r->stdout_bytes)
        .Field("stderr_bytes", r->stderr_bytes)
        .Field("stdout", r->stdout_capture)
        .Field("stderr", r->stderr_capture);
  }
  if (r && r->placement) wire::AppendValue(w.Key("placement"), *r->placement);
  if (context) {
    if (!context->contended.empty()) wire::AppendValue(w.Key("contended"), context->contended);
    if (context->gpu_state) AppendObject(w.Key("gpu_state"), *context->gpu_state);
  }
  w.Close();
  return text;
}

TaskResult TaskResultFromRecord(const TaskRecord& t, bool with_output) {
  TaskResult r;
  r.task_id = t.id;
  r.job_id = t.job_id;
  r.position = t.position;
  r.run = t.run;
  r.priority_rank = t.rank;
  r.operation = t.op;
  r.state = t.state;
  r.gpu = t.gpu;
  r.attempts = t.attempts;
  r.started_at = t.started_at;
  r.ended_at = t.ended_at;
  auto cfg = ParseOrderedJson(t.config);
  if (cfg.ok()) {
    auto c = ConfigFromJson(*cfg, static_cast<size_t>(t.position - 1));
    if (c.ok()) r.description = c->description();
    if (with_output) r.config = *cfg;
    // The trace's GPU time of the record the config came from (conversion's metadata).
    if (auto md = cfg->find("metadata"); md != cfg->end() && md->is_object()) {
      if (auto g = md->find("gpu_time_us"); g != md->end() && g->is_number())
        r.trace_gpu_us = g->get<double>();
      if (auto n = md->find("count"); n != md->end() && n->is_number_integer())
        r.trace_count = n->get<int64_t>();
    }
  }
  auto res = ParseJson(t.result);
  if (res.ok() && res->is_object()) {
    const json& j = *res;
    r.command = j.value("command", "");
    int exit_code = j.value("exit_code", 0), sig = j.value("signal", 0);
    const std::string outcome_name = j.value("outcome", "");
    const std::optional<Outcome::Kind> outcome = ParseOutcomeKindName(outcome_name);
    using Kind = Outcome::Kind;
    r.returncode = ReturnCodeOf(outcome, exit_code, sig);
    r.elapsed_s = j.value("elapsed_s", 0.0);
    if (auto c = j.find("cpu_s"); c != j.end()) wire::ReadValue(*c, &r.cpu_s);
    if (auto m = j.find("peak_memory_bytes"); m != j.end())
      wire::ReadValue(*m, &r.peak_memory_bytes);
    if (outcome != Kind::kSucceeded && !outcome_name.empty()) {
      r.error = j.value("summary", outcome_name);
    }
    if (auto p = j.find("perf"); p != j.end() && p->is_object()) {
      r.best_name = p->value("best_name", "");
      r.avg_ms = p->value("avg_ms", 0.0);
      r.tflops = p->value("tflops", 0.0);
      r.gbps = p->value("gbps", 0.0);
      r.split_k = p->value("split_k", "");
      r.valids = p->value("valids", -1);
    }
    if (with_output) {
      r.stdout_text = j.value("stdout", "");
      r.stderr_text = j.value("stderr", "");
    }
    if (auto c = j.find("contended"); c != j.end()) wire::ReadValue(*c, &r.contended);
    if (auto g = j.find("gpu_state"); g != j.end()) wire::ReadValue(*g, &r.gpu_state);
    if (auto u = j.find("reused_from"); u != j.end()) wire::ReadValue(*u, &r.reused_from);
    if (auto p = j.find("placement"); p != j.end() && p->is_object()) {
      wire::ReadValue(*p, &r.placement);
    } else if (auto sl = j.find("slurm"); sl != j.end() && sl->is_object()) {
      // Written by an earlier ckprofd (its Slurm executor's runs), kept as it was.
      r.placement = Placement{"slurm", sl->value("job_id", int64_t{0}), sl->value("state", ""),
                              sl->value("node", ""), sl->value("gpus", "")};
    }
    if (r.placement) {
      // Run remotely: the GPU is the one granted (the first, should it grant more).
      const std::string& gpus = r.placement->granted;
      int g = -1;
      if (!gpus.empty() &&
          std::from_chars(gpus.data(), gpus.data() + gpus.size(), g).ec == std::errc()) {
        r.gpu = g;
      }
    }
    if (r.reused_from) {  // it cost nothing: the figures of the run are the original's
      r.elapsed_s = 0;
      r.cpu_s.reset();
      r.peak_memory_bytes.reset();
    }
  }
  return r;
}

}  // namespace ckprof
