#include "common/protocol.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/base64.h"
#include "common/file_util.h"
#include "common/json_util.h"
#include "common/wire_fields.h"

namespace ckprof {

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
    {RequestType::kBoost, "boost"},   {RequestType::kLog, "log"},
    {RequestType::kEdit, "edit"},     {RequestType::kClean, "clean"},
    {RequestType::kBest, "best"},
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
  template <typename T>
  void IntList(const char* key, std::vector<T>* out, int64_t min, int64_t max) {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return;
    if (!it->is_array() || it->size() > 4096) return Fail(key, "must be a list of integers");
    out->clear();
    for (const auto& e : *it) {
      if (!e.is_number_integer() || e.get<int64_t>() < min || e.get<int64_t>() > max) {
        return Fail(key, "must hold integers between " + std::to_string(min) + " and " +
                             std::to_string(max));
      }
      out->push_back(static_cast<T>(e.get<int64_t>()));
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

namespace {

// The one table of each request type's fields and their limits, read by ParseRequest (through
// RequestReader, which validates) and written by RequestToJson (RequestWriter).
template <typename R, typename V>
void VisitRequestFields(R& r, V& v) {
  v.Int("id", r.id, 0, kMaxId);
  switch (r.type) {
    case RequestType::kHello:
      v.Int("protocol", r.protocol, 0, 1 << 20);
      v.String("client", r.client, 256);
      break;
    case RequestType::kSubmit: {
      auto& s = r.submit;
      v.Content("content", s.content);
      v.String("content_encoding", s.content_encoding, 32);
      v.String("input_name", s.input_name, 4096);
      v.String("name", s.name, 256);
      v.Int("priority", s.priority, -1000, 1000);
      v.IntList("gpus", s.gpus, 0, 1023);
      v.Int("max_gpus", s.max_gpus, 0, 1024);
      v.Order("order", s.order);
      // Up to 2100-01-01: a later time would overflow the daemon's nanosecond timers.
      v.Double("not_before", s.not_before, 0, kMaxNotBefore);
      v.Double("timeout_s", s.timeout_s, -1, 1e7);
      v.Int("max_ops", s.max_ops, 0, kMaxId);
      v.Int("repeat", s.repeat, 1, kMaxRepeat);
      v.Bool("dry_run", s.dry_run);
      v.String("data_type", s.data_type, 16);
      v.String("layout", s.layout, 16);
      v.String("profiler_path", s.profiler_path, 4096);
      v.String("cwd", s.cwd, 4096);
      v.String("on_end", s.on_end, 8192);
      v.String("reuse", s.reuse, 16);
      v.String("env", s.env, 65536);
      break;
    }
    case RequestType::kStatus:
    case RequestType::kList:
      v.Int("job_id", r.job_id, 0, kMaxId);
      v.Bool("all", r.all);
      break;
    case RequestType::kResults:
      v.Int("job_id", r.job_id, 0, kMaxId);
      v.Bool("all", r.all);
      v.Bool("runs", r.runs);
      break;
    case RequestType::kCancel:
      v.RequiredInt("job_id", r.job_id, 1, kMaxId);
      v.IntList("tasks", r.tasks, 1, std::numeric_limits<int>::max());
      break;
    case RequestType::kRetry:
      v.RequiredInt("job_id", r.job_id, 1, kMaxId);
      v.IntList("tasks", r.tasks, 1, std::numeric_limits<int>::max());
      v.Bool("failed", r.failed_only);
      v.Double("timeout_s", r.timeout_s, -1, 1e7);
      v.String("profiler_path", r.profiler_path, 4096);
      break;
    case RequestType::kWatch:
      v.RequiredInt("job_id", r.job_id, 1, kMaxId);
      v.Bool("end_only", r.end_only);
      break;
    case RequestType::kBoost:
      v.RequiredInt("job_id", r.job_id, 1, kMaxId);
      v.Int("priority", r.priority, -1000, 1000);
      break;
    case RequestType::kDrain:
    case RequestType::kResume:
      v.RequiredInt("gpu", r.gpu, 0, 1023);
      break;
    case RequestType::kLog:
      v.RequiredInt("job_id", r.job_id, 1, kMaxId);
      v.IntList("tasks", r.tasks, 1, std::numeric_limits<int>::max());
      v.Bool("follow", r.follow);
      v.Int("lines", r.lines, 0, 1 << 30);
      break;
    case RequestType::kEdit: {
      auto& e = r.edit;
      v.RequiredInt("job_id", r.job_id, 1, kMaxId);
      v.OptInt("priority", e.priority, -1000, 1000);
      v.OptDouble("not_before", e.not_before, 0, kMaxNotBefore);
      v.OptIntList("gpus", e.gpus, 0, 1023);
      v.OptInt("max_gpus", e.max_gpus, 0, 1024);
      v.OptDouble("timeout_s", e.timeout_s, -1, 1e7);
      v.OptString("name", e.name, 256);
      break;
    }
    case RequestType::kClean:
      v.Double("older_than_s", r.older_than_s, 0, 1e10);
      v.Bool("all", r.all);
      v.IntList("job_ids", r.job_ids, 1, kMaxId);
      v.Bool("dry_run", r.dry_run);
      break;
    case RequestType::kBest:
      v.String("op", r.op, 64);
      v.String("profiler_path", r.profiler_path, 4096);
      v.String("gpu_model", r.gpu_model, 256);
      break;
    case RequestType::kPing:
    case RequestType::kGpus:
      break;
  }
}

// Reads a request's fields from an untrusted object, remembering the first error.
class RequestReader {
 public:
  explicit RequestReader(json& obj) : f_(obj, "request"), obj_(obj) {}
  template <typename T>
  void Int(const char* key, T& out, int64_t min, int64_t max) {
    f_.Int(key, &out, static_cast<T>(min), static_cast<T>(max));
  }
  template <typename T>
  void RequiredInt(const char* key, T& out, int64_t min, int64_t max) {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null())
      return Fail("request field '" + std::string(key) + "' is missing");
    Int(key, out, min, max);
  }
  void Double(const char* key, double& out, double min, double max) {
    f_.Double(key, &out, min, max);
  }
  void Bool(const char* key, bool& out) { f_.Bool(key, &out); }
  void String(const char* key, std::string& out, size_t max_len) { f_.String(key, &out, max_len); }
  template <typename T>
  void IntList(const char* key, std::vector<T>& out, int64_t min, int64_t max) {
    f_.IntList(key, &out, min, max);
  }
  // Optional fields (edit): set only when the request holds them (null: not set).
  template <typename T>
  void OptInt(const char* key, std::optional<T>& out, int64_t min, int64_t max) {
    if (!Present(key)) return;
    T v{};
    Int(key, v, min, max);
    out = v;
  }
  void OptDouble(const char* key, std::optional<double>& out, double min, double max) {
    if (!Present(key)) return;
    double v = 0;
    Double(key, v, min, max);
    out = v;
  }
  void OptIntList(const char* key, std::optional<std::vector<int>>& out, int min, int max) {
    if (!Present(key)) return;
    std::vector<int> v;
    IntList(key, v, min, max);
    out = std::move(v);
  }
  void OptString(const char* key, std::optional<std::string>& out, size_t max_len) {
    if (!Present(key)) return;
    std::string v;
    String(key, v, max_len);
    out = std::move(v);
  }
  // The input's text: moved, not copied (a submit frame may be hundreds of MB, nearly all
  // of it content).
  void Content(const char* key, std::string& out) {
    auto it = obj_.find(key);
    if (it == obj_.end() || !it->is_string()) {
      return Fail("submit: field 'content' (the input file's text) is missing");
    }
    out = std::move(it->get_ref<std::string&>());
  }
  void Order(const char* key, TaskOrder& out) {
    std::string text;
    f_.String(key, &text, 32);
    if (f_.ok() && !text.empty() && !ParseEnum(text, &out)) {
      Fail("submit: order must be \"rank\" or \"longest-first\", got '" + text + "'");
    }
  }
  bool ok() const { return error_.empty() && f_.ok(); }
  std::string error() const { return error_.empty() ? f_.error() : error_; }

 private:
  bool Present(const char* key) const {
    auto it = obj_.find(key);
    return it != obj_.end() && !it->is_null();
  }
  void Fail(std::string why) {
    if (error_.empty() && f_.ok()) error_ = std::move(why);
  }
  FieldReader f_;
  json& obj_;
  std::string error_;
};

class RequestWriter {
 public:
  explicit RequestWriter(json& out) : out_(out) {}
  template <typename T>
  void Int(const char* key, const T& v, int64_t, int64_t) {
    out_[key] = v;
  }
  template <typename T>
  void RequiredInt(const char* key, const T& v, int64_t, int64_t) {
    out_[key] = v;
  }
  void Double(const char* key, double v, double, double) { out_[key] = v; }
  void Bool(const char* key, bool v) { out_[key] = v; }
  void String(const char* key, const std::string& v, size_t) { out_[key] = v; }
  template <typename T>
  void IntList(const char* key, const std::vector<T>& v, int64_t, int64_t) {
    out_[key] = v;
  }
  void Content(const char* key, const std::string& v) { out_[key] = v; }
  void Order(const char* key, TaskOrder v) { out_[key] = EnumName(v); }
  template <typename T>
  void OptInt(const char* key, const std::optional<T>& v, int64_t, int64_t) {
    if (v) out_[key] = *v;
  }
  void OptDouble(const char* key, const std::optional<double>& v, double, double) {
    if (v) out_[key] = *v;
  }
  void OptIntList(const char* key, const std::optional<std::vector<int>>& v, int, int) {
    if (v) out_[key] = *v;
  }
  void OptString(const char* key, const std::optional<std::string>& v, size_t) {
    if (v) out_[key] = *v;
  }

 private:
  json& out_;
};

}  // namespace

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
  RequestReader reader(j);
  VisitRequestFields(r, reader);
  if (!reader.ok()) return MakeError(reader.error());
  if (r.type == RequestType::kSubmit && !r.submit.content_encoding.empty() &&
      r.submit.content_encoding != "gzip+base64") {
    return MakeError("submit: content_encoding must be \"\" or \"gzip+base64\", got '" +
                     r.submit.content_encoding + "'");
  }
  return r;
}

std::string RequiredFeature(const Request& r) {
  switch (r.type) {
    case RequestType::kSubmit:
      return !r.submit.env.empty()      ? "env"
             : !r.submit.on_end.empty() ? "on_end"
             : r.submit.repeat > 1      ? "repeat"
                                        : "";
    case RequestType::kResults:
      return r.runs ? "repeat" : "";
    case RequestType::kCancel:
      return r.tasks.empty() ? "" : "task_control";
    case RequestType::kRetry:
      return r.tasks.empty() && !r.failed_only && r.timeout_s < 0 && r.profiler_path.empty()
                 ? ""
                 : "task_control";
    case RequestType::kLog:
      return "log";
    case RequestType::kEdit:
      return "edit";
    case RequestType::kClean:
      // An older daemon ignores job_ids and dry_run: it would remove every ended job.
      return r.job_ids.empty() && !r.dry_run ? "clean" : "clean_jobs";
    case RequestType::kBest:
      return "best";
    default:
      return "";
  }
}

json RequestToJson(const Request& r) {
  json j = {{"type", RequestTypeName(r.type)}};
  RequestWriter writer(j);
  VisitRequestFields(r, writer);
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

std::string GpuUser::Describe() const {
  std::string out =
      "pid " + std::to_string(pid) + " (" + (user.empty() ? std::to_string(uid) : user);
  if (!command.empty()) out += ", " + command;
  return out + ")";
}

json ToJson(const JobSummary& s) { return ToDom(s); }
json ToJson(const TaskResult& t) { return ToDom(t); }
json ToJson(const GpuInfo& g) { return ToDom(g); }
json ToJson(const UserUse& u) { return ToDom(u); }
void AppendJson(std::string& out, const JobSummary& s) { AppendObject(out, s); }
void AppendJson(std::string& out, const TaskResult& t) { AppendObject(out, t); }
Result<JobSummary> JobSummaryFromJson(const json& j) {
  return FromDom<JobSummary>(j, "a job summary");
}
Result<TaskResult> TaskResultFromJson(const json& j) {
  return FromDom<TaskResult>(j, "a task result");
}
Result<GpuInfo> GpuInfoFromJson(const json& j) { return FromDom<GpuInfo>(j, "a GPU entry"); }

namespace {
constexpr std::pair<EventKind, std::string_view> kEventKinds[] = {
    {EventKind::kTaskStarted, "task_started"},
    {EventKind::kTaskFinished, "task_finished"},
    {EventKind::kJobFinished, "job_finished"},
};
}  // namespace

std::string_view EnumName(EventKind k) {
  for (const auto& [kind, name] : kEventKinds) {
    if (kind == k) return name;
  }
  return "unknown";
}

bool ParseEnum(std::string_view name, EventKind* out) {
  for (const auto& [kind, n] : kEventKinds) {
    if (n == name) {
      *out = kind;
      return true;
    }
  }
  return false;
}

template <typename T>
json MakeReply(const Request& request, const T& reply) {
  json out = OkResponse(request);
  wire::DomWriter w(out);
  VisitFields(reply, w);
  return out;
}

template <typename T>
std::string MakeReplyFrame(const Request& request, const T& reply) {
  std::string body;
  AppendObject(body, reply);  // "{...}"
  std::string out = DumpJson(OkResponse(request));
  out.pop_back();  // its '}'
  if (body.size() > 2)
    out += "," + body.substr(1);
  else
    out += "}";
  out += "\n";
  return out;
}
template std::string MakeReplyFrame<BestReply>(const Request&, const BestReply&);

json MakeErrorReply(int64_t id, const ErrorReply& reply) {
  json out = ErrorResponse(id, reply.error);
  wire::DomWriter w(out);
  VisitFields(reply, w);
  return out;
}

template <typename T>
json ReplyJson(const T& reply) {
  return ToDom(reply);
}

template <typename T>
Result<T> ReadReply(const json& response) {
  return FromDom<T>(response, "ckprofd's answer");
}

// Every reply type, made and read here only.
#define CKPROF_REPLY(T)                                 \
  template json MakeReply<T>(const Request&, const T&); \
  template json ReplyJson<T>(const T&);                 \
  template Result<T> ReadReply<T>(const json&);
CKPROF_REPLY(HelloReply)
CKPROF_REPLY(SubmitReply)
CKPROF_REPLY(StatusReply)
CKPROF_REPLY(ResultsReply)
CKPROF_REPLY(JobReply)
CKPROF_REPLY(GpusReply)
CKPROF_REPLY(WatchReply)
CKPROF_REPLY(EmptyReply)
CKPROF_REPLY(ErrorReply)
CKPROF_REPLY(JobEventFrame)
CKPROF_REPLY(LogReply)
CKPROF_REPLY(TaskLogEvent)
CKPROF_REPLY(CleanReply)
CKPROF_REPLY(BestReply)
#undef CKPROF_REPLY

}  // namespace ckprof
