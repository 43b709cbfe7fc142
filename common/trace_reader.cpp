#include "common/trace_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace ckprof {
namespace {

bool IsKernelCat(const std::string& cat) { return cat == "kernel" || cat == "Kernel"; }

void AppendInt(std::string* out, int64_t v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  (void)ec;
  out->append(buf, p);
}

int64_t SaturatedNanos(double micros) {
  if (!std::isfinite(micros)) return 0;
  double ns = micros * 1000.0;
  if (ns >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (ns <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return std::llround(ns);
}

int64_t IntMicrosToNanos(int64_t micros) {
  int64_t ns = 0;
  if (__builtin_mul_overflow(micros, int64_t{1000}, &ns)) {
    return micros < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }
  return ns;
}

// a + b, saturating (kernel durations come from untrusted input).
int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    return b < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }
  return r;
}

}  // namespace

int64_t MicrosTextToNanos(std::string_view text, double value) {
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && s.front() == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  int64_t whole = 0;
  size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (__builtin_mul_overflow(whole, int64_t{10}, &whole) ||
        __builtin_add_overflow(whole, int64_t{s[i] - '0'}, &whole)) {
      return SaturatedNanos(value);
    }
  }
  if (i == 0) return SaturatedNanos(value);
  int64_t frac = 0;
  int frac_digits = 0;
  bool round_up = false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      if (frac_digits < 3) {
        frac = frac * 10 + (s[i] - '0');
        ++frac_digits;
      } else if (frac_digits == 3) {
        round_up = s[i] >= '5';
        ++frac_digits;
      }
    }
  }
  if (i != s.size()) return SaturatedNanos(value);  // an exponent: use the double
  for (int d = std::min(frac_digits, 3); d < 3; ++d) frac *= 10;
  int64_t ns = 0;
  if (__builtin_mul_overflow(whole, int64_t{1000}, &ns) ||
      __builtin_add_overflow(ns, frac + (round_up ? 1 : 0), &ns)) {
    return SaturatedNanos(value);
  }
  return negative ? -ns : ns;
}

TraceReader::TraceReader() = default;
TraceReader::~TraceReader() = default;

void TraceReader::Scalar(const std::string* text, int64_t int_value, bool is_int,
                         double float_value, const std::string* float_text) {
  if (depth_ == 3 && in_event_) {
    switch (event_key_) {
      case EventKey::kName:
        if (text) name_ = *text;
        break;
      case EventKey::kCat:
        if (text) cat_ = *text;
        break;
      case EventKey::kPid:
      case EventKey::kTid: {
        std::string& target = event_key_ == EventKey::kPid ? pid_ : tid_;
        if (text) {
          target = *text;
        } else if (is_int) {
          target.clear();
          AppendInt(&target, int_value);
        } else if (float_text) {
          target = *float_text;
        }
        break;
      }
      case EventKey::kTs:
      case EventKey::kDur: {
        int64_t ns = 0;
        if (is_int) {
          ns = IntMicrosToNanos(int_value);
        } else if (float_text) {
          ns = MicrosTextToNanos(*float_text, float_value);
        } else {
          break;
        }
        if (event_key_ == EventKey::kTs) {
          ts_ns_ = ns;
          has_ts_ = true;
        } else {
          dur_ns_ = ns;
          has_dur_ = true;
        }
        break;
      }
      default:
        break;
    }
    return;
  }
  if (depth_ == 4 && in_args_ && args_key_ == ArgsKey::kExternalId) {
    if (is_int) {
      ext_id_ = int_value;
      has_ext_id_ = true;
    } else if (float_text && std::isfinite(float_value) && float_value == std::floor(float_value) &&
               std::fabs(float_value) < 9e18) {
      ext_id_ = static_cast<int64_t>(float_value);
      has_ext_id_ = true;
    } else if (text) {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
      if (ec == std::errc() && p == text->data() + text->size() && !text->empty()) {
        ext_id_ = v;
        has_ext_id_ = true;
      }
    }
    return;
  }
  if (depth_ == 5 && (field_ == ArgsKey::kTypes || field_ == ArgsKey::kConcrete)) {
    auto& list = field_ == ArgsKey::kTypes ? raw_.types : raw_.concrete;
    if (text) {
      list.push_back(*text);
    } else if (is_int) {
      list.push_back(std::to_string(int_value));
    } else if (float_text) {
      list.push_back(*float_text);
    } else {
      list.emplace_back();
    }
    return;
  }
  if (depth_ == 5 && (field_ == ArgsKey::kDims || field_ == ArgsKey::kStrides)) {
    // A scalar where a list of sizes belongs: keep the position, with no sizes.
    (field_ == ArgsKey::kDims ? raw_.dims : raw_.strides).emplace_back();
    return;
  }
  if (depth_ == 6 && (field_ == ArgsKey::kDims || field_ == ArgsKey::kStrides)) {
    auto& list = field_ == ArgsKey::kDims ? raw_.dims : raw_.strides;
    if (!list.empty()) list.back().push_back(is_int ? int_value : -1);
  }
}

bool TraceReader::null() {
  Scalar(nullptr, 0, false, 0, nullptr);
  return true;
}

bool TraceReader::boolean(bool val) {
  static const std::string kTrue = "True", kFalse = "False";
  // Booleans only matter as entries of Concrete Inputs.
  if (depth_ == 5 && field_ == ArgsKey::kConcrete) {
    Scalar(val ? &kTrue : &kFalse, 0, false, 0, nullptr);
  } else {
    Scalar(nullptr, 0, false, 0, nullptr);
  }
  return true;
}

bool TraceReader::number_integer(json::number_integer_t val) {
  Scalar(nullptr, val, true, 0, nullptr);
  return true;
}

bool TraceReader::number_unsigned(json::number_unsigned_t val) {
  if (val > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    static const std::string kHuge = "1e19";
    Scalar(nullptr, 0, false, static_cast<double>(val), &kHuge);
  } else {
    Scalar(nullptr, static_cast<int64_t>(val), true, 0, nullptr);
  }
  return true;
}

bool TraceReader::number_float(json::number_float_t val, const json::string_t& s) {
  Scalar(nullptr, 0, false, val, &s);
  return true;
}

bool TraceReader::string(json::string_t& val) {
  Scalar(&val, 0, false, 0, nullptr);
  return true;
}

bool TraceReader::binary(json::binary_t&) { return true; }

bool TraceReader::start_object(std::size_t) {
  ++depth_;
  if (depth_ == 3 && in_events_) {
    BeginEvent();
  } else if (depth_ == 4 && in_event_ && event_key_ == EventKey::kArgs) {
    in_args_ = true;
    args_key_ = ArgsKey::kNone;
    // Kineto writes cat and name before args; when they come later, keep the arguments and
    // decide at the end of the event.
    capture_args_ = (cat_.empty() || cat_ == "cpu_op") && (name_.empty() || IsConvOpName(name_));
  }
  return true;
}

bool TraceReader::key(json::string_t& val) {
  if (depth_ == 1) {
    root_key_events_ = val == "traceEvents";
  } else if (depth_ == 3 && in_event_) {
    EventKey k = EventKey::kNone;
    if (val == "name")
      k = EventKey::kName;
    else if (val == "cat")
      k = EventKey::kCat;
    else if (val == "pid")
      k = EventKey::kPid;
    else if (val == "tid")
      k = EventKey::kTid;
    else if (val == "ts")
      k = EventKey::kTs;
    else if (val == "dur")
      k = EventKey::kDur;
    else if (val == "args")
      k = EventKey::kArgs;
    event_key_ = k;
  } else if (depth_ == 4 && in_args_) {
    ArgsKey k = ArgsKey::kNone;
    if (val == "External id")
      k = ArgsKey::kExternalId;
    else if (!capture_args_)
      k = ArgsKey::kNone;
    else if (val == "Input Dims")
      k = ArgsKey::kDims;
    else if (val == "Input type")
      k = ArgsKey::kTypes;
    else if (val == "Input Strides")
      k = ArgsKey::kStrides;
    else if (val == "Concrete Inputs")
      k = ArgsKey::kConcrete;
    args_key_ = k;
  }
  return true;
}

bool TraceReader::end_object() {
  if (depth_ == 3 && in_event_) {
    EndEvent();
  } else if (depth_ == 4 && in_args_) {
    in_args_ = false;
  }
  --depth_;
  return true;
}

bool TraceReader::start_array(std::size_t) {
  ++depth_;
  if (depth_ == 2 && root_key_events_) {
    in_events_ = true;
    saw_trace_events_ = true;
  } else if (depth_ == 5 && in_args_ && capture_args_ && args_key_ != ArgsKey::kNone &&
             args_key_ != ArgsKey::kExternalId) {
    field_ = args_key_;
    auto clear = [](auto& v) { v.clear(); };
    switch (field_) {
      case ArgsKey::kDims:
        clear(raw_.dims);
        break;
      case ArgsKey::kStrides:
        clear(raw_.strides);
        break;
      case ArgsKey::kTypes:
        clear(raw_.types);
        break;
      case ArgsKey::kConcrete:
        clear(raw_.concrete);
        break;
      default:
        break;
    }
  } else if (depth_ == 6 && (field_ == ArgsKey::kDims || field_ == ArgsKey::kStrides)) {
    (field_ == ArgsKey::kDims ? raw_.dims : raw_.strides).emplace_back();
  } else if (depth_ == 6 && (field_ == ArgsKey::kTypes || field_ == ArgsKey::kConcrete)) {
    // A list where a string belongs: keep the position.
    (field_ == ArgsKey::kTypes ? raw_.types : raw_.concrete).emplace_back("?");
  }
  return true;
}

bool TraceReader::end_array() {
  if (depth_ == 2 && in_events_) {
    in_events_ = false;
  } else if (depth_ == 5 && field_ != ArgsKey::kNone) {
    field_ = ArgsKey::kNone;
  }
  --depth_;
  return true;
}

bool TraceReader::parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
  return false;
}

void TraceReader::BeginEvent() {
  in_event_ = true;
  in_args_ = false;
  capture_args_ = false;
  event_key_ = EventKey::kNone;
  args_key_ = ArgsKey::kNone;
  field_ = ArgsKey::kNone;
  name_.clear();
  cat_.clear();
  pid_.clear();
  tid_.clear();
  has_ts_ = has_dur_ = has_ext_id_ = false;
  ts_ns_ = dur_ns_ = ext_id_ = 0;
  raw_.dims.clear();
  raw_.strides.clear();
  raw_.types.clear();
  raw_.concrete.clear();
}

void TraceReader::EndEvent() {
  in_event_ = false;
  in_args_ = false;
  const uint64_t index = event_index_++;
  if (IsKernelCat(cat_)) {
    if (has_ext_id_ && has_dur_) kernels_.push_back(Kernel{ext_id_, dur_ns_});
    return;
  }
  if (cat_ != "cpu_op" || !has_ts_ || !IsConvOpName(name_)) return;
  raw_.name = name_;
  const uint32_t problem = InternCall();
  key_buf_ = pid_;
  key_buf_ += '\x1f';
  key_buf_ += tid_;
  auto [it, inserted] =
      thread_ids_.try_emplace(key_buf_, static_cast<uint32_t>(thread_ids_.size()));
  const int64_t dur = has_dur_ ? std::max<int64_t>(dur_ns_, 0) : 0;
  int64_t end = 0;
  if (__builtin_add_overflow(ts_ns_, dur, &end)) end = std::numeric_limits<int64_t>::max();
  conv_events_.push_back(ConvEvent{it->second, problem, ts_ns_, end, ext_id_, has_ext_id_,
                                   IsBackendConvOp(name_), index});
}

uint32_t TraceReader::InternCall() {
  key_buf_.clear();
  key_buf_ += raw_.name;
  key_buf_ += '\x01';
  for (const auto& t : raw_.types) {
    key_buf_ += t;
    key_buf_ += '\x02';
  }
  key_buf_ += '\x01';
  for (const auto& c : raw_.concrete) {
    key_buf_ += c;
    key_buf_ += '\x02';
  }
  for (const auto* lists : {&raw_.dims, &raw_.strides}) {
    key_buf_ += '\x01';
    for (const auto& l : *lists) {
      for (int64_t v : l) {
        AppendInt(&key_buf_, v);
        key_buf_ += ',';
      }
      key_buf_ += ';';
    }
  }
  auto it = call_ids_.find(key_buf_);
  if (it != call_ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(calls_.size());
  call_ids_.emplace(key_buf_, id);
  calls_.push_back(raw_);
  return id;
}

ConvCall TraceReader::MakeCall(const RawCall& raw) const {
  ConvCall call;
  call.op_name = raw.name;
  auto schema = ConvOpSchema(raw.name);
  if (!schema) return call;
  static const std::vector<int64_t> kEmpty;
  for (size_t i = 0; i < schema->size(); ++i) {
    if (i >= raw.types.size() && i >= raw.concrete.size()) break;  // not recorded: missing
    const std::string& type = i < raw.types.size() ? raw.types[i] : std::string();
    const std::string& concrete = i < raw.concrete.size() ? raw.concrete[i] : std::string();
    ArgValue v;
    if (type == "Scalar" || type == "ScalarList" || type.empty() || !concrete.empty()) {
      v = ParseTraceScalar(concrete);
    } else {
      v = ArgValue::Tensor(i < raw.dims.size() ? raw.dims[i] : kEmpty,
                           i < raw.strides.size() ? raw.strides[i] : kEmpty, type);
    }
    call.args.emplace_back(std::string((*schema)[i]), std::move(v));
  }
  return call;
}

TraceSummary TraceReader::Finish() {
  TraceSummary summary;
  summary.events = event_index_;
  summary.conv_events = conv_events_.size();

  // Kernel time per External id, for the ids of conv events only. `nest` stamps the last nest
  // that counted an id, so that an id shared by two events of one nest counts once.
  struct IdTime {
    int64_t ns = 0;
    size_t nest = 0;
  };
  std::unordered_map<int64_t, IdTime> kernel_ns;
  kernel_ns.reserve(conv_events_.size());
  for (const auto& e : conv_events_) {
    if (e.has_ext_id) kernel_ns.emplace(e.ext_id, IdTime{});
  }
  for (const auto& k : kernels_) {
    auto it = kernel_ns.find(k.ext_id);
    if (it != kernel_ns.end()) it->second.ns = SatAdd(it->second.ns, k.dur_ns);
  }
  std::vector<Kernel>().swap(kernels_);
  size_t nest_number = 0;
  auto time_of = [&](const ConvEvent& e) -> int64_t {
    if (!e.has_ext_id) return 0;
    IdTime& t = kernel_ns[e.ext_id];
    if (t.nest == nest_number) return 0;
    t.nest = nest_number;
    return t.ns;
  };

  // Nests: per thread, by start time, outer (longer) events first.
  std::vector<ConvEvent>& ev = conv_events_;
  std::sort(ev.begin(), ev.end(), [](const ConvEvent& a, const ConvEvent& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;
    return a.index < b.index;
  });
  struct Agg {
    int64_t ns = 0;
    int64_t count = 0;
    uint64_t first = std::numeric_limits<uint64_t>::max();
  };
  std::vector<Agg> agg(calls_.size());
  std::vector<size_t> stack;
  auto contains = [](const ConvEvent& outer, const ConvEvent& inner) {
    return inner.thread == outer.thread && inner.start_ns >= outer.start_ns &&
           inner.end_ns <= outer.end_ns;
  };
  for (size_t i = 0; i < ev.size();) {
    const ConvEvent& outer = ev[i];
    stack.assign(1, i);
    size_t best_backend = outer.backend ? i : ev.size();
    size_t best_backend_depth = outer.backend ? 1 : 0;
    size_t best_any = i, best_any_depth = 1;
    ++nest_number;
    int64_t ns = time_of(outer);
    size_t j = i + 1;
    for (; j < ev.size() && contains(outer, ev[j]); ++j) {
      while (!contains(ev[stack.back()], ev[j])) stack.pop_back();
      stack.push_back(j);
      const size_t depth = stack.size();
      if (ev[j].backend && depth > best_backend_depth) {
        best_backend = j;
        best_backend_depth = depth;
      }
      if (depth > best_any_depth) {
        best_any = j;
        best_any_depth = depth;
      }
      ns = SatAdd(ns, time_of(ev[j]));
    }
    const ConvEvent& describing = ev[best_backend < ev.size() ? best_backend : best_any];
    Agg& a = agg[describing.problem];
    a.ns = SatAdd(a.ns, ns);
    a.count += 1;
    a.first = std::min(a.first, outer.index);
    ++summary.calls;
    i = j;
  }

  std::vector<uint32_t> order;
  for (uint32_t p = 0; p < agg.size(); ++p) {
    if (agg[p].count > 0) order.push_back(p);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (agg[a].ns != agg[b].ns) return agg[a].ns > agg[b].ns;
    return agg[a].first < agg[b].first;
  });
  summary.problems.reserve(order.size());
  for (uint32_t p : order) {
    summary.problems.push_back(TraceProblem{MakeCall(calls_[p]), agg[p].ns, agg[p].count});
  }
  return summary;
}

}  // namespace ckprof
