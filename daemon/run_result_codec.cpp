#include "daemon/run_result_codec.h"

#include <cmath>
#include <string>
#include <type_traits>

namespace ckprof {

using json = nlohmann::json;

namespace {

double UnixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

std::chrono::system_clock::time_point FromUnixSeconds(double s) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::duration<double>(s)));
}

// JSON has no inf or nan (CK prints them for an instance that did not run): null stands for
// them, and reads back as nan.
json Number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// Reads the fields of one JSON object, each checked, the first error kept.
class Fields {
 public:
  Fields(const json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) Fail("", "must be an object");
  }
  const std::string& error() const { return error_; }

  template <typename T>
  void Int(const char* key, T* out) {
    auto it = Find(key);
    if (!it) return;
    if (!(*it)->is_number_integer()) return Fail(key, "must be an integer");
    if (std::is_unsigned_v<T> && !(*it)->is_number_unsigned()) {
      return Fail(key, "must not be negative");
    }
    *out = (*it)->get<T>();
  }
  void Double(const char* key, double* out) {
    auto it = Find(key);
    if (!it) return;
    if ((*it)->is_null()) {
      *out = std::nan("");
    } else if ((*it)->is_number()) {
      *out = (*it)->get<double>();
    } else {
      Fail(key, "must be a number");
    }
  }
  void Bool(const char* key, bool* out) {
    auto it = Find(key);
    if (!it) return;
    if (!(*it)->is_boolean()) return Fail(key, "must be true or false");
    *out = (*it)->get<bool>();
  }
  void String(const char* key, std::string* out) {
    auto it = Find(key);
    if (!it) return;
    if (!(*it)->is_string()) return Fail(key, "must be a string");
    *out = (*it)->get<std::string>();
  }
  const json* Object(const char* key) {
    auto it = Find(key);
    if (!it) return nullptr;
    return &**it;
  }
  void Fail(const std::string& key, const std::string& what) {
    if (error_.empty()) {
      error_ = where_ + (key.empty() ? "" : " field '" + key + "'") + " " + what;
    }
  }

 private:
  // The field, or nullopt when it is absent (every field is optional: absent keeps the default).
  std::optional<json::const_iterator> Find(const char* key) {
    if (!error_.empty() || !j_.is_object()) return std::nullopt;
    auto it = j_.find(key);
    if (it == j_.end()) return std::nullopt;
    return it;
  }
  const json& j_;
  std::string where_;
  std::string error_;
};

json InstanceToJson(const InstancePerf& p) {
  return {{"name", p.name},
          {"avg_ms", Number(p.avg_ms)},
          {"tflops", Number(p.tflops)},
          {"gbps", Number(p.gbps)},
          {"split_k", p.split_k}};
}

}  // namespace

json RunResultToJson(const RunResult& r) {
  const CkPerf& p = r.perf;
  json top = json::array();
  for (const auto& t : p.top) top.push_back(InstanceToJson(t));
  json j = {
      {"outcome",
       {{"kind", OutcomeKindName(r.outcome.kind)},
        {"exit_code", r.outcome.exit_code},
        {"signal", r.outcome.signal},
        {"reason", r.outcome.reason}}},
      {"perf",
       {{"has_best", p.has_best},
        {"best_name", p.best_name},
        {"avg_ms", Number(p.avg_ms)},
        {"tflops", Number(p.tflops)},
        {"gbps", Number(p.gbps)},
        {"split_k", p.split_k},
        {"valids", p.valids},
        {"instances_found", p.instances_found},
        {"instances_tried", p.instances_tried},
        {"instances_supported", p.instances_supported},
        {"top", std::move(top)},
        {"verification_failed", p.verification_failed},
        {"not_implemented", p.not_implemented},
        {"usage_printed", p.usage_printed},
        {"unknown_operation", p.unknown_operation},
        {"best_from_summary", p.best_from_summary},
        {"lines", p.lines},
        {"truncated_lines", p.truncated_lines}}},
      {"stdout", r.stdout_capture},
      {"stderr", r.stderr_capture},
      {"stdout_bytes", r.stdout_bytes},
      {"stderr_bytes", r.stderr_bytes},
      {"pid", r.pid},
      {"started_at", UnixSeconds(r.started_at)},
      {"ended_at", UnixSeconds(r.ended_at)},
      {"elapsed_s", r.elapsed_s},
      {"usage_from", r.usage_from},
  };
  if (r.cpu_s) j["cpu_s"] = *r.cpu_s;
  if (r.peak_memory_bytes) j["peak_memory_bytes"] = *r.peak_memory_bytes;
  return j;
}

Result<RunResult> RunResultFromJson(const json& j) {
  RunResult r;
  Fields f(j, "run result");
  if (const json* o = f.Object("outcome")) {
    Fields of(*o, "run result's outcome");
    std::string kind;
    of.String("kind", &kind);
    if (auto k = ParseOutcomeKindName(kind)) {
      r.outcome.kind = *k;
    } else if (of.error().empty()) {
      of.Fail("kind", "is not an outcome: '" + kind + "'");
    }
    of.Int("exit_code", &r.outcome.exit_code);
    of.Int("signal", &r.outcome.signal);
    of.String("reason", &r.outcome.reason);
    if (!of.error().empty()) return Error{of.error()};
  } else {
    f.Fail("outcome", "is missing");
  }
  if (const json* pj = f.Object("perf")) {
    Fields pf(*pj, "run result's perf");
    CkPerf& p = r.perf;
    pf.Bool("has_best", &p.has_best);
    pf.String("best_name", &p.best_name);
    pf.Double("avg_ms", &p.avg_ms);
    pf.Double("tflops", &p.tflops);
    pf.Double("gbps", &p.gbps);
    pf.String("split_k", &p.split_k);
    pf.Int("valids", &p.valids);
    pf.Int("instances_found", &p.instances_found);
    pf.Int("instances_tried", &p.instances_tried);
    pf.Int("instances_supported", &p.instances_supported);
    pf.Bool("verification_failed", &p.verification_failed);
    pf.Bool("not_implemented", &p.not_implemented);
    pf.Bool("usage_printed", &p.usage_printed);
    pf.Bool("unknown_operation", &p.unknown_operation);
    pf.Bool("best_from_summary", &p.best_from_summary);
    pf.Int("lines", &p.lines);
    pf.Int("truncated_lines", &p.truncated_lines);
    if (const json* top = pf.Object("top")) {
      if (!top->is_array()) {
        pf.Fail("top", "must be an array");
      } else {
        for (size_t i = 0; i < top->size(); ++i) {
          Fields tf((*top)[i], "run result's perf.top[" + std::to_string(i) + "]");
          InstancePerf t;
          tf.String("name", &t.name);
          tf.Double("avg_ms", &t.avg_ms);
          tf.Double("tflops", &t.tflops);
          tf.Double("gbps", &t.gbps);
          tf.String("split_k", &t.split_k);
          if (!tf.error().empty()) return Error{tf.error()};
          p.top.push_back(std::move(t));
        }
      }
    }
    if (!pf.error().empty()) return Error{pf.error()};
  }
  f.String("stdout", &r.stdout_capture);
  f.String("stderr", &r.stderr_capture);
  f.Int("stdout_bytes", &r.stdout_bytes);
  f.Int("stderr_bytes", &r.stderr_bytes);
  f.Int("pid", &r.pid);
  double started = 0, ended = 0;
  f.Double("started_at", &started);
  f.Double("ended_at", &ended);
  r.started_at = FromUnixSeconds(std::isfinite(started) ? started : 0);
  r.ended_at = FromUnixSeconds(std::isfinite(ended) ? ended : 0);
  f.Double("elapsed_s", &r.elapsed_s);
  f.String("usage_from", &r.usage_from);
  if (j.is_object() && j.contains("cpu_s")) {
    double cpu = 0;
    f.Double("cpu_s", &cpu);
    r.cpu_s = cpu;
  }
  if (j.is_object() && j.contains("peak_memory_bytes")) {
    uint64_t peak = 0;
    f.Int("peak_memory_bytes", &peak);
    r.peak_memory_bytes = peak;
  }
  if (!f.error().empty()) return Error{f.error()};
  return r;
}

}  // namespace ckprof
