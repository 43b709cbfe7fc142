#include "common/protocol.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "common/base64.h"
#include "common/file_util.h"
#include "common/json_util.h"
#include "common/wire_fields.h"

namespace ckprof {

namespace {

// The most entries a list field of a request holds (task numbers, GPUs, jobs waited for): a
// request that names more is refused, so that none makes the daemon look up more at once.
constexpr size_t kMaxListEntries = 4096;

// Each alternative of RequestBody is the request of the kind at its index.
template <size_t... I>
constexpr bool KindsInOrder(std::index_sequence<I...>) {
  return ((std::variant_alternative_t<I, RequestBody>::kType == static_cast<RequestType>(I)) &&
          ...);
}
static_assert(KindsInOrder(std::make_index_sequence<std::variant_size_v<RequestBody>>()),
              "RequestBody's alternatives must follow RequestType's order");

template <size_t... I>
constexpr std::array<const char*, sizeof...(I)> Names(std::index_sequence<I...>) {
  return {std::variant_alternative_t<I, RequestBody>::kName...};
}
constexpr auto kTypeNames = Names(std::make_index_sequence<std::variant_size_v<RequestBody>>());

// A default request of each kind, by index.
template <size_t... I>
std::array<RequestBody (*)(), sizeof...(I)> Makers(std::index_sequence<I...>) {
  return {[]() { return RequestBody(std::in_place_index<I>); }...};
}

// Reads optional typed fields of an untrusted object, remembering the first error.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& obj, std::string what) : obj_(obj), what_(std::move(what)) {}

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
    if (!it->is_array()) return Fail(key, "must be a list of integers");
    if (it->size() > kMaxListEntries) {
      return Fail(key, "holds " + std::to_string(it->size()) + " entries; at most " +
                           std::to_string(kMaxListEntries) + " are taken at once");
    }
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
  const nlohmann::json& obj_;
  std::string what_;
  std::string error_;
};

}  // namespace

std::string_view RequestTypeName(RequestType t) {
  const size_t i = static_cast<size_t>(t);
  return i < kTypeNames.size() ? kTypeNames[i] : "unknown";
}

std::optional<RequestType> ParseRequestTypeName(std::string_view name) {
  for (size_t i = 0; i < kTypeNames.size(); ++i) {
    if (name == kTypeNames[i]) return static_cast<RequestType>(i);
  }
  return std::nullopt;
}

namespace {

// Reads a request's fields from an untrusted object, remembering the first error.
class RequestReader {
 public:
  explicit RequestReader(nlohmann::json& obj) : f_(obj, "request"), obj_(obj) {}
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
  nlohmann::json& obj_;
  std::string error_;
};

class RequestWriter {
 public:
  explicit RequestWriter(nlohmann::json& out) : out_(out) {}
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
  nlohmann::json& out_;
};

}  // namespace

Result<Request> ParseRequest(std::string_view frame) {
  auto parsed = ParseJson(frame);
  if (!parsed) return MakeError("malformed request: " + parsed.error());
  nlohmann::json& j = *parsed;
  if (!j.is_object()) return MakeError("malformed request: a request must be a JSON object");
  auto type_it = j.find("type");
  if (type_it == j.end() || !type_it->is_string()) {
    return MakeError("malformed request: field 'type' is missing or not a string");
  }
  auto type = ParseRequestTypeName(type_it->get<std::string>());
  if (!type) {
    return MakeError("unknown request type '" + type_it->get<std::string>() + "'");
  }
  static const auto makers = Makers(std::make_index_sequence<std::variant_size_v<RequestBody>>());
  Request r;
  r.body = makers[static_cast<size_t>(*type)]();
  RequestReader reader(j);
  reader.Int("id", r.id, 0, kMaxId);
  std::string problem;
  std::visit(
      [&](auto& body) {
        body.Fields(body, reader);
        if constexpr (requires { body.Check(); }) {
          if (reader.ok()) problem = body.Check();
        }
      },
      r.body);
  if (!reader.ok()) return MakeError(reader.error());
  if (!problem.empty()) return MakeError(problem);
  return r;
}

std::string RequiredFeature(const Request& r) {
  return std::visit(
      [](const auto& body) -> std::string {
        if constexpr (requires { body.Feature(); }) {
          return body.Feature();
        } else {
          return "";
        }
      },
      r.body);
}

bool ReleasePayload(Request& r) {
  return std::visit(
      [](auto& body) {
        if constexpr (requires { body.Release(); }) {
          return body.Release();
        } else {
          return false;
        }
      },
      r.body);
}

std::optional<StreamSpec> StreamOf(const Request& r) {
  return std::visit(
      [](const auto& body) -> std::optional<StreamSpec> {
        if constexpr (requires { body.Stream(); }) {
          return body.Stream();
        } else {
          return std::nullopt;
        }
      },
      r.body);
}

nlohmann::json RequestToJson(const Request& r) {
  nlohmann::json j = {{"type", RequestTypeName(r.type())}};
  RequestWriter writer(j);
  writer.Int("id", r.id, 0, kMaxId);
  std::visit([&](const auto& body) { body.Fields(body, writer); }, r.body);
  return j;
}

namespace {
constexpr size_t kCompressAbove = 1u << 20;
}  // namespace

Status EncodeSubmitContent(std::string bytes, SubmitOptions* s) {
  if (HasGzipMagic(bytes) || bytes.size() > kCompressAbove) {
    return EncodeSubmitContentFrom(bytes, s);
  }
  s->content = std::move(bytes);
  s->content_encoding.clear();
  return Status::Ok();
}

Status EncodeSubmitContentFrom(std::string_view bytes, SubmitOptions* s) {
  if (HasGzipMagic(bytes)) {
    s->content = Base64Encode(bytes);
    s->content_encoding = "gzip+base64";
  } else if (bytes.size() > kCompressAbove) {
    // (On the cores the client has: the daemon waits for it meanwhile.)
    auto gz = GzipOnThreads(bytes, 1, std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
    if (!gz) return Error{gz.error()};
    s->content = Base64Encode(*gz);
    s->content_encoding = "gzip+base64";
  } else {
    s->content = std::string(bytes);
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

nlohmann::json OkResponse(const Request& r) {
  return nlohmann::json{{"type", RequestTypeName(r.type())}, {"id", r.id}, {"ok", true}};
}

nlohmann::json ErrorResponse(int64_t id, std::string_view message) {
  return nlohmann::json{{"type", "error"}, {"id", id}, {"ok", false}, {"error", message}};
}

std::string Frame(const nlohmann::json& j) { return DumpJson(j) + "\n"; }

std::string GpuUser::Describe() const {
  std::string out =
      "pid " + std::to_string(pid) + " (" + (user.empty() ? std::to_string(uid) : user);
  if (!command.empty()) out += ", " + command;
  return out + ")";
}

nlohmann::json ToJson(const JobSummary& s) { return ToDom(s); }
nlohmann::json ToJson(const TaskResult& t) { return ToDom(t); }
nlohmann::json ToJson(const GpuInfo& g) { return ToDom(g); }
nlohmann::json ToJson(const UserUse& u) { return ToDom(u); }
nlohmann::json ToJson(const AllocationInfo& a) { return ToDom(a); }
void AppendJson(std::string& out, const JobSummary& s) { AppendObject(out, s); }
void AppendJson(std::string& out, const TaskResult& t) { AppendObject(out, t); }
Result<JobSummary> JobSummaryFromJson(const nlohmann::json& j) {
  return FromDom<JobSummary>(j, "a job summary");
}
Result<TaskResult> TaskResultFromJson(const nlohmann::json& j) {
  return FromDom<TaskResult>(j, "a task result");
}
Result<GpuInfo> GpuInfoFromJson(const nlohmann::json& j) {
  return FromDom<GpuInfo>(j, "a GPU entry");
}

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
nlohmann::json MakeReply(const Request& request, const T& reply) {
  nlohmann::json out = OkResponse(request);
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

nlohmann::json MakeErrorReply(int64_t id, const ErrorReply& reply) {
  nlohmann::json out = ErrorResponse(id, reply.error);
  wire::DomWriter w(out);
  VisitFields(reply, w);
  return out;
}

template <typename T>
nlohmann::json ReplyJson(const T& reply) {
  return ToDom(reply);
}

template <typename T>
Result<T> ReadReply(const nlohmann::json& response) {
  return FromDom<T>(response, "ckprofd's answer");
}

// Every reply type, made and read here only.
#define CKPROF_REPLY(T)                                           \
  template nlohmann::json MakeReply<T>(const Request&, const T&); \
  template nlohmann::json ReplyJson<T>(const T&);                 \
  template Result<T> ReadReply<T>(const nlohmann::json&);
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
CKPROF_REPLY(UsageReply)
#undef CKPROF_REPLY

}  // namespace ckprof
