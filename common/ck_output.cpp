#include "common/ck_output.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

namespace ckprof {
namespace {

constexpr std::string_view kWhitespace = " \t\r\n\f\v";

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(kWhitespace);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(kWhitespace);
  return s.substr(b, e - b + 1);
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A number as iostream prints it: "0.123456", "1.2e-05", "inf", "-nan", "45".
bool ParseDouble(std::string_view s, double* out) {
  s = Trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  if (ec == std::errc::result_out_of_range) {
    // Denormals and overflow: from_chars leaves *out alone; take the limit.
    *out = (s.front() == '-') ? -std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::infinity();
    return ptr == s.data() + s.size();
  }
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool ParseInt(std::string_view s, int* out) {
  s = Trim(s);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
}

// "4", "-1", "4 (best occupancy)": what CK prints after ", SplitK ".
bool LooksLikeSplitK(std::string_view s) {
  s = Trim(s);
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  size_t digits = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  if (i == digits) return false;
  std::string_view rest = Trim(s.substr(i));
  return rest.empty() || (rest.front() == '(' && rest.back() == ')');
}

// Splits "<name>, SplitK <k>" into name and k; leaves names without the suffix alone.
void SplitOffSplitK(std::string_view text, std::string* name, std::string* split_k) {
  text = Trim(text);
  constexpr std::string_view kTag = ", SplitK ";
  size_t pos = text.rfind(kTag);
  if (pos != std::string_view::npos && LooksLikeSplitK(text.substr(pos + kTag.size()))) {
    *split_k = std::string(Trim(text.substr(pos + kTag.size())));
    *name = std::string(Trim(text.substr(0, pos)));
    return;
  }
  // A bare "SplitK k" (a value printed with no name before it, e.g. "GB/s: 1, SplitK 4").
  constexpr std::string_view kBare = "SplitK ";
  if (StartsWith(text, kBare) && LooksLikeSplitK(text.substr(kBare.size()))) {
    *split_k = std::string(Trim(text.substr(kBare.size())));
    name->clear();
    return;
  }
  *name = std::string(text);
  split_k->clear();
}

// Removes a trailing " (instance 7)" from a best-instance name.
std::string_view StripInstanceSuffix(std::string_view name) {
  name = Trim(name);
  constexpr std::string_view kTag = "(instance ";
  if (name.empty() || name.back() != ')') return name;
  size_t pos = name.rfind(kTag);
  if (pos == std::string_view::npos) return name;
  int index = 0;
  if (!ParseInt(name.substr(pos + kTag.size(), name.size() - 1 - pos - kTag.size()), &index)) {
    return name;
  }
  return Trim(name.substr(0, pos));
}

// Orders instances best first: highest TFlops; nan counts as the worst.
double RankKey(double tflops) {
  return std::isnan(tflops) ? -std::numeric_limits<double>::infinity() : tflops;
}

// "Perf:" / "Best Perf:" body: " 0.1 ms, 2 TFlops, 3 GB/s, name[, SplitK k]".
bool ParsePerfBody(std::string_view rest, InstancePerf* out) {
  struct Field {
    std::string_view suffix;
    double* target;
  } fields[] = {{" ms,", &out->avg_ms}, {" TFlops,", &out->tflops}, {" GB/s,", &out->gbps}};
  for (const Field& f : fields) {
    size_t pos = rest.find(f.suffix);
    if (pos == std::string_view::npos) return false;
    if (!ParseDouble(rest.substr(0, pos), f.target)) return false;
    rest.remove_prefix(pos + f.suffix.size());
  }
  SplitOffSplitK(rest, &out->name, &out->split_k);
  return !out->name.empty();
}

}  // namespace

std::string StripAnsi(std::string_view in) {
  std::string out;
  StripAnsiTo(in, &out);
  return out;
}

void StripAnsiTo(std::string_view in, std::string* out_ptr) {
  std::string& out = *out_ptr;
  out.clear();
  if (in.find('\033') == std::string_view::npos) {  // most lines: copied whole
    out.assign(in);
    return;
  }
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\033') {
      out.push_back(in[i]);
      continue;
    }
    size_t j = i + 1;
    if (j < in.size() && in[j] == '[') {
      // CSI: parameters and intermediates, then one final byte in 0x40..0x7e.
      ++j;
      while (j < in.size() && !(in[j] >= 0x40 && in[j] <= 0x7e)) ++j;
    } else if (j < in.size() && in[j] == ']') {
      // OSC: up to BEL or ESC backslash.
      while (j < in.size() && in[j] != '\a' && !(in[j] == '\\' && in[j - 1] == '\033')) ++j;
    } else {
      // Intermediates (0x20..0x2f), then the final byte: "\033(B", "\033=".
      while (j < in.size() && in[j] >= 0x20 && in[j] <= 0x2f) ++j;
    }
    i = j;  // the loop's ++i skips the final byte
  }
}

bool ParsePerfLine(std::string_view line, InstancePerf* out) {
  line = Trim(line);
  constexpr std::string_view kTag = "Perf:";
  if (!StartsWith(line, kTag)) return false;
  InstancePerf p;
  if (!ParsePerfBody(line.substr(kTag.size()), &p)) return false;
  *out = std::move(p);
  return true;
}

CkOutputParser::CkOutputParser(size_t top_k) : top_k_(top_k) {}

template <typename OnLine>
void CkOutputParser::Split(LineBuffer& buf, std::string_view chunk, OnLine on_line) {
  while (!chunk.empty()) {
    size_t nl = chunk.find('\n');
    std::string_view piece = chunk.substr(0, nl);
    if (!buf.overflow) {
      size_t room = kMaxLineBytes - buf.line.size();
      if (piece.size() > room) {
        buf.line.append(piece.substr(0, room));
        buf.overflow = true;
      } else {
        buf.line.append(piece);
      }
    }
    if (nl == std::string_view::npos) return;
    on_line(std::string_view(buf.line), buf.overflow);
    buf.line.clear();
    buf.overflow = false;
    chunk.remove_prefix(nl + 1);
  }
}

void CkOutputParser::Feed(std::string_view chunk) {
  Split(out_, chunk,
        [this](std::string_view line, bool truncated) { OnStdoutLine(line, truncated); });
}

void CkOutputParser::FeedStderr(std::string_view chunk) {
  Split(err_, chunk, [this](std::string_view line, bool) { OnStderrLine(line); });
}

void CkOutputParser::Finish() {
  if (!out_.line.empty() || out_.overflow) {
    std::string last = std::move(out_.line);
    bool truncated = out_.overflow;
    out_.line.clear();
    out_.overflow = false;
    OnStdoutLine(last, truncated);
  }
  if (!err_.line.empty()) {
    std::string last = std::move(err_.line);
    err_.line.clear();
    err_.overflow = false;
    OnStderrLine(last);
  }
  if (in_summary_) CommitSummary();
}

void CkOutputParser::ScanErrorMarkers(std::string_view line) {
  if (line.find("Incorrect results") != std::string_view::npos) perf_.verification_failed = true;
  if (line.find("not implemented") != std::string_view::npos) perf_.not_implemented = true;
  if (line.find("arg1: tensor operation") != std::string_view::npos) perf_.usage_printed = true;
  if (line.find("cannot find operation") != std::string_view::npos) {
    perf_.unknown_operation = true;
  }
}

void CkOutputParser::OnStderrLine(std::string_view raw) {
  StripAnsiTo(raw, &clean_);
  ScanErrorMarkers(clean_);
}

void CkOutputParser::AddPerf(InstancePerf p) {
  ++perf_.instances_tried;
  ++perf_.instances_supported;
  if (!have_line_best_ || p.tflops > line_best_.tflops) {
    have_line_best_ = true;
    line_best_ = p;
    if (!perf_.best_from_summary) {
      perf_.has_best = true;
      perf_.best_name = p.name;
      perf_.avg_ms = p.avg_ms;
      perf_.tflops = p.tflops;
      perf_.gbps = p.gbps;
      perf_.split_k = p.split_k;
    }
  }
  if (top_k_ == 0) return;
  auto& top = perf_.top;
  const double key = RankKey(p.tflops);
  if (top.size() >= top_k_ && RankKey(top.back().tflops) >= key) return;
  size_t pos = top.size();
  while (pos > 0 && RankKey(top[pos - 1].tflops) < key) --pos;
  top.insert(top.begin() + static_cast<std::ptrdiff_t>(pos), std::move(p));
  if (top.size() > top_k_) top.pop_back();
}

void CkOutputParser::CommitSummary() {
  in_summary_ = false;
  if (!summary_has_name_ || summary_.name.empty()) return;  // "name:" empty: no valid instance
  perf_.best_from_summary = true;
  perf_.has_best = true;
  perf_.best_name = summary_.name;
  perf_.avg_ms = summary_.avg_ms;
  perf_.tflops = summary_.tflops;
  perf_.gbps = summary_.gbps;
  perf_.split_k = summary_.split_k;
}

void CkOutputParser::OnStdoutLine(std::string_view raw, bool truncated) {
  ++perf_.lines;
  if (truncated) ++perf_.truncated_lines;
  StripAnsiTo(raw, &clean_);
  std::string_view line = Trim(clean_);
  if (line.empty()) return;

  InstancePerf p;
  if (StartsWith(line, "Perf:")) {
    if (ParsePerfLine(line, &p)) AddPerf(std::move(p));
    return;
  }
  if (StartsWith(line, "Best Perf:")) {  // older CK's one-line summary
    if (ParsePerfBody(line.substr(10), &p)) {
      summary_ = std::move(p);
      summary_.name = std::string(StripInstanceSuffix(summary_.name));
      summary_has_name_ = true;
      CommitSummary();
    }
    return;
  }
  constexpr std::string_view kDoesNotSupport = "does not support this problem";
  if (line.size() >= kDoesNotSupport.size() &&
      line.substr(line.size() - kDoesNotSupport.size()) == kDoesNotSupport) {
    ++perf_.instances_tried;
    return;
  }
  if (StartsWith(line, "valids:")) {
    int v = 0;
    if (ParseInt(line.substr(7), &v)) perf_.valids = v;
    return;
  }
  if (StartsWith(line, "Best configuration parameters")) {
    in_summary_ = true;
    summary_has_name_ = false;
    summary_ = InstancePerf{};
    return;
  }
  if (in_summary_) {
    if (StartsWith(line, "name:")) {
      summary_.name = std::string(StripInstanceSuffix(line.substr(5)));
      summary_has_name_ = true;
      return;
    }
    if (StartsWith(line, "avg_time:")) {
      ParseDouble(line.substr(9), &summary_.avg_ms);
      return;
    }
    if (StartsWith(line, "tflops:")) {
      ParseDouble(line.substr(7), &summary_.tflops);
      return;
    }
    if (StartsWith(line, "GB/s:")) {
      std::string value, split_k;
      SplitOffSplitK(line.substr(5), &value, &split_k);
      ParseDouble(value, &summary_.gbps);
      summary_.split_k = split_k;
      CommitSummary();
      return;
    }
  }
  // Header: "found 42 instances" (wording varies: "xdl found", "ckProfiler found").
  size_t found = line.find("found ");
  if (found != std::string_view::npos && perf_.instances_found < 0) {
    std::string_view rest = line.substr(found + 6);
    size_t sp = rest.find(' ');
    int n = 0;
    if (sp != std::string_view::npos && StartsWith(rest.substr(sp + 1), "instance") &&
        ParseInt(rest.substr(0, sp), &n)) {
      perf_.instances_found = n;
      return;
    }
  }
  ScanErrorMarkers(line);
}

Outcome ClassifyExit(bool signaled, int exit_code_or_signal, const CkPerf& perf,
                     std::string_view stderr_text) {
  Outcome o;
  if (signaled) {
    o.kind = Outcome::Kind::kCrashed;
    o.signal = exit_code_or_signal;
    o.reason = SignalName(o.signal);
    return o;
  }
  const int code = exit_code_or_signal;
  if (code != 0) {
    o.kind = Outcome::Kind::kFailed;
    o.exit_code = code;
    std::string detail;
    if (perf.verification_failed) {
      detail = "verification failed (Error: Incorrect results!)";
    } else if (perf.unknown_operation) {
      detail = "the profiler does not know this operation (cannot find operation)";
    } else if (perf.not_implemented) {
      detail = "this data_type & layout is not implemented";
    } else if (perf.usage_printed) {
      detail = "wrong arguments: the profiler printed its usage";
    } else if (code > 128 && code < 128 + 65) {
      detail = "as a shell reports death by " + SignalName(code - 128);
    } else {
      // The last non-empty line of stderr, if any.
      std::string_view s = Trim(stderr_text);
      size_t nl = s.find_last_of('\n');
      if (nl != std::string_view::npos) s = Trim(s.substr(nl + 1));
      if (s.size() > 200) s = s.substr(0, 200);
      detail = StripAnsi(s);
    }
    o.reason = "exit code " + std::to_string(code);
    if (!detail.empty()) o.reason += ": " + detail;
    return o;
  }
  if (perf.has_best && perf.valids != 0) {
    o.kind = Outcome::Kind::kSucceeded;
    return o;
  }
  o.kind = Outcome::Kind::kUnsupported;
  o.reason = perf.valids == 0 ? "no instance supports this problem (valids: 0)"
                              : "no valid instance in the profiler's output";
  return o;
}

}  // namespace ckprof
