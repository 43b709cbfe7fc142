#include "common/protocol.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/base64.h"
#include "common/file_util.h"
#include "common/json_util.h"

namespace ckprof {

bool IsJobOrder(std::string_view order) {
  return order.empty() || order == "rank" || order == "longest-first";
}

namespace {

using json = nlohmann::json;

struct TypeName {
  RequestType type;
  const char* name;
};
constexpr TypeName kTypeNames[] = {
    {RequestType::kHello, "hello"},   {RequestType::kPing, "ping"},
    {RequestType::kSubmit, "submit"}, {RequestType::kStatus, "status"},
    {RequestType::kList, "list"},     {RequestType::kResults, "results"},
    {RequestType::kCancel, "cancel"}, {RequestType::kRetry, "retry"},
    {RequestType::kWatch, "watch"},   {RequestType::kGpus, "gpus"},
    {RequestType::kDrain, "drain"},   {RequestType::kResume, "resume"},
    {RequestType::kBoost, "boost"},
};

// Reads optional typed fields of an untrusted object, remembering the first error.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string what) : obj_(obj), what_(std::move(what)) {}

  void Int(const char* key, int64_t* out, int64_t min, int64_t max) {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return;
    if (!it->is_number_integer()) return Fail(key, "must be an integer");
    const bool too_big =
        it->is_number_unsigned() &&
        it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    int64_t v = too_big ? 0 : it->get<int64_t>();
    if (too_big || v < min || v > max) {
      return Fail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max));
    }
    *out = v;
  }
  void Int(const char* key, int* out, int min, int max) {
    int64_t v = *out;
    Int(key, &v, min, max);
    *out = static_cast<int>(v);
  }
  void Double(const char* key, double* out, double min, double max) {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return;
    if (!it->is_number()) return Fail(key, "must be a number");
    double v = it->get<double>();
    if (!std::isfinite(v) || v < min || v > max) return Fail(key, "is out of range");
    *out = v;
  }
  void Bool(const char* key, bool* out) {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return;
    if (!it->is_boolean()) return Fail(key, "must be true or false");
    *out = it->get<bool>();
  }
  void String(const char* key, std::string* out, size_t max_len) {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return;
    if (!it->is_string()) return Fail(key, "must be a string");
    const auto& s = it->get_ref<const std::string&>();
    if (s.size() > max_len)
      return Fail(key, "is too long (" + std::to_string(s.size()) + " bytes)");
    *out = s;
  }
  void IntList(const char* key, std::vector<int>* out, int min, int max) {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return;
    if (!it->is_array() || it->size() > 4096) return Fail(key, "must be a list of integers");
    out->clear();
    for (const auto& e : *it) {
      if (!e.is_number_integer() || e.get<int64_t>() < min || e.get<int64_t>() > max) {
        return Fail(key, "must hold integers between " + std::to_string(min) + " and " +
                             std::to_string(max));
      }
      out->push_back(static_cast<int>(e.get<int64_t>()));
    }
  }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  void Fail(const char* key, const std::string& why) {
    if (error_.empty()) error_ = what_ + " field '" + key + "' " + why;
  }
  const json& obj_;
  std::string what_;
  std::string error_;
};

constexpr int64_t kMaxId = std::numeric_limits<int64_t>::max();
constexpr double kMaxNotBefore = 4102444800;  // 2100-01-01T00:00:00Z

}  // namespace

std::string_view RequestTypeName(RequestType t) {
  for (const auto& tn : kTypeNames) {
    if (tn.type == t) return tn.name;
  }
  return "unknown";
}

std::optional<RequestType> ParseRequestTypeName(std::string_view name) {
  for (const auto& tn : kTypeNames) {
    if (name == tn.name) return tn.type;
  }
  return std::nullopt;
}

Result<Request> ParseRequest(std::string_view frame) {
  auto parsed = ParseJson(frame);
  if (!parsed) return MakeError("malformed request: " + parsed.error());
  json& j = *parsed;
  if (!j.is_object()) return MakeError("malformed request: a request must be a JSON object");
  auto type_it = j.find("type");
  if (type_it == j.end() || !type_it->is_string()) {
    return MakeError("malformed request: field 'type' is missing or not a string");
  }
  auto type = ParseRequestTypeName(type_it->get<std::string>());
  if (!type) {
    return MakeError("unknown request type '" + type_it->get<std::string>() + "'");
  }
  Request r;
  r.type = *type;
  FieldReader f(j, "request");
  f.Int("id", &r.id, 0, kMaxId);
  switch (r.type) {
    case RequestType::kHello:
      f.Int("protocol", &r.protocol, 0, 1 << 20);
      f.String("client", &r.client, 256);
      break;
    case RequestType::kSubmit: {
      auto& s = r.submit;
      auto content = j.find("content");
      if (content == j.end() || !content->is_string()) {
        return MakeError("submit: field 'content' (the input file's text) is missing");
      }
      // Moved, not copied: a submit frame may be hundreds of MB, nearly all of it content.
      s.content = std::move(content->get_ref<std::string&>());
      f.String("content_encoding", &s.content_encoding, 32);
      if (f.ok() && !s.content_encoding.empty() && s.content_encoding != "gzip+base64") {
        return MakeError("submit: content_encoding must be \"\" or \"gzip+base64\", got '" +
                         s.content_encoding + "'");
      }
      f.String("input_name", &s.input_name, 4096);
      f.String("name", &s.name, 256);
      f.Int("priority", &s.priority, -1000, 1000);
      f.IntList("gpus", &s.gpus, 0, 1023);
      f.Int("max_gpus", &s.max_gpus, 0, 1024);
      f.String("order", &s.order, 32);
      if (f.ok() && !IsJobOrder(s.order)) {
        return MakeError("submit: order must be \"rank\" or \"longest-first\", got '" + s.order +
                         "'");
      }
      // Up to 2100-01-01: a later time would overflow the daemon's nanosecond timers.
      f.Double("not_before", &s.not_before, 0, kMaxNotBefore);
      f.Double("timeout_s", &s.timeout_s, -1, 1e7);
      f.Int("max_ops", &s.max_ops, 0, kMaxId);
      f.Bool("dry_run", &s.dry_run);
      f.String("data_type", &s.data_type, 16);
      f.String("layout", &s.layout, 16);
      f.String("profiler_path", &s.profiler_path, 4096);
      f.String("cwd", &s.cwd, 4096);
      break;
    }
    case RequestType::kStatus:
    case RequestType::kList:
    case RequestType::kResults:
      f.Int("job_id", &r.job_id, 0, kMaxId);
      f.Bool("all", &r.all);
      break;
    case RequestType::kCancel:
    case RequestType::kRetry:
    case RequestType::kWatch:
      f.Int("job_id", &r.job_id, 1, kMaxId);
      if (r.type == RequestType::kWatch) f.Bool("end_only", &r.end_only);
      if (f.ok() && r.job_id <= 0) return MakeError("request field 'job_id' is missing");
      break;
    case RequestType::kBoost:
      f.Int("job_id", &r.job_id, 1, kMaxId);
      f.Int("priority", &r.priority, -1000, 1000);
      if (f.ok() && r.job_id <= 0) return MakeError("request field 'job_id' is missing");
      break;
    case RequestType::kDrain:
    case RequestType::kResume:
      f.Int("gpu", &r.gpu, 0, 1023);
      if (f.ok() && r.gpu < 0) return MakeError("request field 'gpu' is missing");
      break;
    case RequestType::kPing:
    case RequestType::kGpus:
      break;
  }
  if (!f.ok()) return MakeError(f.error());
  return r;
}

json RequestToJson(const Request& r) {
  json j = {{"type", RequestTypeName(r.type)}, {"id", r.id}};
  switch (r.type) {
    case RequestType::kHello:
      j["protocol"] = r.protocol;
      j["client"] = r.client;
      break;
    case RequestType::kSubmit: {
      const auto& s = r.submit;
      j["content"] = s.content;
      if (!s.content_encoding.empty()) j["content_encoding"] = s.content_encoding;
      j["input_name"] = s.input_name;
      j["name"] = s.name;
      j["priority"] = s.priority;
      j["gpus"] = s.gpus;
      j["max_gpus"] = s.max_gpus;
      if (!s.order.empty()) j["order"] = s.order;
      j["not_before"] = s.not_before;
      j["timeout_s"] = s.timeout_s;
      j["max_ops"] = s.max_ops;
      j["dry_run"] = s.dry_run;
      j["data_type"] = s.data_type;
      j["layout"] = s.layout;
      j["profiler_path"] = s.profiler_path;
      j["cwd"] = s.cwd;
      break;
    }
    case RequestType::kStatus:
    case RequestType::kList:
    case RequestType::kResults:
      if (r.job_id > 0) j["job_id"] = r.job_id;
      j["all"] = r.all;
      break;
    case RequestType::kCancel:
    case RequestType::kRetry:
      j["job_id"] = r.job_id;
      break;
    case RequestType::kWatch:
      j["job_id"] = r.job_id;
      if (r.end_only) j["end_only"] = true;
      break;
    case RequestType::kBoost:
      j["job_id"] = r.job_id;
      j["priority"] = r.priority;
      break;
    case RequestType::kDrain:
    case RequestType::kResume:
      j["gpu"] = r.gpu;
      break;
    case RequestType::kPing:
    case RequestType::kGpus:
      break;
  }
  return j;
}

Status EncodeSubmitContent(std::string bytes, SubmitOptions* s) {
  constexpr size_t kCompressAbove = 1u << 20;
  if (HasGzipMagic(bytes)) {
    s->content = Base64Encode(bytes);
    s->content_encoding = "gzip+base64";
  } else if (bytes.size() > kCompressAbove) {
    auto gz = Gzip(bytes, 1);
    if (!gz) return Error{gz.error()};
    s->content = Base64Encode(*gz);
    s->content_encoding = "gzip+base64";
  } else {
    s->content = std::move(bytes);
    s->content_encoding.clear();
  }
  return Status::Ok();
}

Result<std::string> DecodeSubmitContent(const SubmitOptions& s) {
  if (s.content_encoding.empty()) return s.content;
  auto raw = Base64Decode(s.content);
  if (!raw) return MakeError("submit: content: " + raw.error());
  if (!HasGzipMagic(*raw)) return MakeError("submit: content is not gzip data");
  return std::move(*raw);
}

json OkResponse(const Request& r) {
  return json{{"type", RequestTypeName(r.type)}, {"id", r.id}, {"ok", true}};
}

json ErrorResponse(int64_t id, std::string_view message) {
  return json{{"type", "error"}, {"id", id}, {"ok", false}, {"error", message}};
}

std::string Frame(const json& j) { return DumpJson(j) + "\n"; }

void TaskCounts::Add(std::string_view state) {
  if (state == "succeeded") {
    ++succeeded;
  } else if (state == "unsupported") {
    ++unsupported;
  } else if (state == "timed_out") {
    ++timed_out;
  } else if (state == "crashed") {
    ++crashed;
  } else if (state == "cancelled") {
    ++cancelled;
  } else if (state == "queued") {
    ++queued;
  } else if (state == "running") {
    ++running;
  } else {
    ++failed;  // failed, spawn_failed, interrupted
  }
}

int64_t TaskCounts::total() const { return ran() + cancelled + queued + running; }

int64_t TaskCounts::ran() const { return succeeded + failed + unsupported + timed_out + crashed; }

std::string TaskCounts::Describe() const {
  std::string out = std::to_string(succeeded) + " succeeded, " + std::to_string(failed) + " failed";
  const std::pair<int64_t, const char*> others[] = {
      {unsupported, "unsupported"}, {timed_out, "timed out"}, {crashed, "crashed"},
      {cancelled, "cancelled"},     {queued, "queued"},       {running, "running"}};
  for (const auto& [n, word] : others) {
    if (n > 0) out += ", " + std::to_string(n) + " " + word;
  }
  return out;
}

namespace {

// f(key, v) when the value is there, else f(key, nullptr): an absent value is null in JSON,
// never a 0 that could be read as one (uid 0 is root; time 0 is 1970).
template <typename F, typename T>
void Nullable(F& f, const char* key, const T& v, bool present) {
  if (present) {
    f(key, v);
  } else {
    f(key, nullptr);
  }
}

// Each struct's fields, in one place, for both ways of writing it: f(key, value).
template <typename F>
void VisitFields(const JobSummary& s, F&& f) {
  f("id", s.id);
  f("owner_uid", s.owner_uid);
  f("owner", s.owner);
  f("name", s.name);
  f("state", s.state);
  f("priority", s.priority);
  f("order", s.order);
  f("total", s.total);
  f("queued", s.queued);
  f("running", s.running);
  f("done", s.done());
  f("succeeded", s.succeeded);
  f("failed", s.failed);
  f("unsupported", s.unsupported);
  f("timed_out", s.timed_out);
  f("crashed", s.crashed);
  f("cancelled", s.cancelled);
  f("gpus_in_use", s.gpus_in_use);
  f("allowed_gpus", s.allowed_gpus);
  Nullable(f, "max_gpus", s.max_gpus, s.max_gpus > 0);
  Nullable(f, "timeout_s", s.timeout_s, s.timeout_s > 0);
  Nullable(f, "not_before", s.not_before, s.not_before > 0);
  f("submitted_at", s.submitted_at);
  Nullable(f, "started_at", s.started_at, s.started_at > 0);
  Nullable(f, "finished_at", s.finished_at, s.finished_at > 0);
  Nullable(f, "eta_s", s.eta_s, s.eta_s >= 0);
  f("profiler", s.profiler);
}

template <typename F>
void VisitFields(const TaskResult& t, F&& f) {
  f("task_id", t.task_id);
  f("job_id", t.job_id);
  f("position", t.position);
  f("priority_rank", t.priority_rank);
  f("operation", t.operation);
  f("description", t.description);
  f("command", t.command);
  f("state", t.state);
  Nullable(f, "gpu", t.gpu, t.gpu >= 0);
  f("attempts", t.attempts);
  f("returncode", t.returncode);
  f("elapsed_s", t.elapsed_s);
  Nullable(f, "started_at", t.started_at, t.started_at > 0);
  Nullable(f, "ended_at", t.ended_at, t.ended_at > 0);
  f("best_name", t.best_name);
  f("avg_ms", t.avg_ms);
  f("tflops", t.tflops);
  f("gbps", t.gbps);
  f("split_k", t.split_k);
  Nullable(f, "valids", t.valids, t.valids >= 0);
  f("error", t.error);
  if (!t.stdout_text.empty()) f("stdout", t.stdout_text);
  if (!t.stderr_text.empty()) f("stderr", t.stderr_text);
  if (!t.config.is_null()) f("config", t.config);
}

template <typename T>
json DomOf(const T& x) {
  json j = json::object();
  VisitFields(x, [&j](const char* key, const auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, nlohmann::ordered_json>) {
      j[key] = json::parse(v.dump());
    } else if constexpr (std::is_floating_point_v<std::decay_t<decltype(v)>>) {
      // Non-finite numbers are written as null, as DumpJson writes them.
      j[key] = std::isfinite(v) ? json(v) : json(nullptr);
    } else {
      j[key] = v;
    }
  });
  return j;
}

template <typename T>
void AppendObject(std::string& out, const T& x) {
  JsonObjectWriter w(out);
  VisitFields(x, [&w](const char* key, const auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, nlohmann::ordered_json>) {
      w.RawField(key, DumpJson(v));
    } else {
      w.Field(key, v);
    }
  });
}

}  // namespace

json ToJson(const JobSummary& s) { return DomOf(s); }
json ToJson(const TaskResult& t) { return DomOf(t); }
void AppendJson(std::string& out, const JobSummary& s) { AppendObject(out, s); }
void AppendJson(std::string& out, const TaskResult& t) { AppendObject(out, t); }

namespace {

// True when a JSON number converts to the integer type T without undefined behaviour: nlohmann
// casts a float such as 1e300 with static_cast, which is UB outside T's range.
template <typename T>
bool FitsInteger(const json& v) {
  if (!v.is_number_float()) return true;
  const double d = v.get<double>();
  const double limit = std::ldexp(1.0, std::numeric_limits<T>::digits);  // 2^31, 2^63, 2^32...
  return std::isfinite(d) && d > (std::is_signed_v<T> ? -limit - 1 : -1.0) && d < limit;
}

// Tolerant readers for daemon-produced JSON (the client trusts the shape, not the values).
template <typename T>
void Get(const json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!FitsInteger<T>(*it)) return;
  }
  if constexpr (std::is_same_v<T, std::vector<int>>) {
    if (it->is_array()) {
      for (const auto& e : *it) {
        if (!FitsInteger<int>(e)) return;
      }
    }
  }
  try {
    *out = it->get<T>();
  } catch (const std::exception&) {
  }
}

}  // namespace

Result<JobSummary> JobSummaryFromJson(const json& j) {
  if (!j.is_object()) return MakeError("a job summary must be an object");
  JobSummary s;
  Get(j, "id", &s.id);
  Get(j, "owner_uid", &s.owner_uid);
  Get(j, "owner", &s.owner);
  Get(j, "name", &s.name);
  Get(j, "state", &s.state);
  Get(j, "priority", &s.priority);
  Get(j, "order", &s.order);
  Get(j, "total", &s.total);
  Get(j, "queued", &s.queued);
  Get(j, "running", &s.running);
  Get(j, "succeeded", &s.succeeded);
  Get(j, "failed", &s.failed);
  Get(j, "unsupported", &s.unsupported);
  Get(j, "timed_out", &s.timed_out);
  Get(j, "crashed", &s.crashed);
  Get(j, "cancelled", &s.cancelled);
  Get(j, "gpus_in_use", &s.gpus_in_use);
  Get(j, "allowed_gpus", &s.allowed_gpus);
  Get(j, "max_gpus", &s.max_gpus);
  Get(j, "timeout_s", &s.timeout_s);
  Get(j, "not_before", &s.not_before);
  Get(j, "submitted_at", &s.submitted_at);
  Get(j, "started_at", &s.started_at);
  Get(j, "finished_at", &s.finished_at);
  Get(j, "eta_s", &s.eta_s);
  Get(j, "profiler", &s.profiler);
  return s;
}

Result<TaskResult> TaskResultFromJson(const json& j) {
  if (!j.is_object()) return MakeError("a task result must be an object");
  TaskResult t;
  Get(j, "task_id", &t.task_id);
  Get(j, "job_id", &t.job_id);
  Get(j, "position", &t.position);
  Get(j, "priority_rank", &t.priority_rank);
  Get(j, "operation", &t.operation);
  Get(j, "description", &t.description);
  Get(j, "command", &t.command);
  Get(j, "state", &t.state);
  Get(j, "gpu", &t.gpu);
  Get(j, "attempts", &t.attempts);
  Get(j, "returncode", &t.returncode);
  Get(j, "elapsed_s", &t.elapsed_s);
  Get(j, "started_at", &t.started_at);
  Get(j, "ended_at", &t.ended_at);
  Get(j, "best_name", &t.best_name);
  Get(j, "avg_ms", &t.avg_ms);
  Get(j, "tflops", &t.tflops);
  Get(j, "gbps", &t.gbps);
  Get(j, "split_k", &t.split_k);
  Get(j, "valids", &t.valids);
  Get(j, "error", &t.error);
  Get(j, "stdout", &t.stdout_text);
  Get(j, "stderr", &t.stderr_text);
  if (auto it = j.find("config"); it != j.end() && it->is_object()) {
    t.config = nlohmann::ordered_json::parse(it->dump());
  }
  return t;
}

json ToJson(const GpuInfo& g) {
  const bool busy = g.task_id > 0;  // an idle GPU has no task, job, owner (0 is root) or start
  auto present = [busy](const auto& v) { return busy ? json(v) : json(nullptr); };
  return json{{"index", g.index},
              {"drained", g.drained},
              {"task_id", present(g.task_id)},
              {"position", present(g.position)},
              {"job_id", present(g.job_id)},
              {"owner_uid", present(g.owner_uid)},
              {"busy_since", present(g.busy_since)},
              {"tasks_run", g.tasks_run},
              {"held_by", g.held_by}};
}

Result<GpuInfo> GpuInfoFromJson(const json& j) {
  if (!j.is_object()) return MakeError("a GPU entry must be an object");
  GpuInfo g;
  Get(j, "index", &g.index);
  Get(j, "drained", &g.drained);
  Get(j, "task_id", &g.task_id);
  Get(j, "position", &g.position);
  Get(j, "job_id", &g.job_id);
  Get(j, "owner_uid", &g.owner_uid);
  Get(j, "busy_since", &g.busy_since);
  Get(j, "tasks_run", &g.tasks_run);
  Get(j, "held_by", &g.held_by);
  return g;
}

}  // namespace ckprof
