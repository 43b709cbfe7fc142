// Fuzzes the CK output parser: any bytes a profiler may print, fed whole and in chunks (the
// first input byte picks the chunk size). The parse must not depend on how the pipe split the
// stream, and classifying the run must never fail. Any exception, sanitizer report or
// difference is a crash.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/ck_output.h"

namespace {

bool Same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

bool Same(const ckprof::CkPerf& a, const ckprof::CkPerf& b) {
  if (a.has_best != b.has_best || a.best_name != b.best_name || !Same(a.avg_ms, b.avg_ms) ||
      !Same(a.tflops, b.tflops) || !Same(a.gbps, b.gbps) || a.split_k != b.split_k ||
      a.valids != b.valids || a.instances_found != b.instances_found ||
      a.instances_tried != b.instances_tried || a.instances_supported != b.instances_supported ||
      a.verification_failed != b.verification_failed || a.not_implemented != b.not_implemented ||
      a.usage_printed != b.usage_printed || a.unknown_operation != b.unknown_operation ||
      a.lines != b.lines || a.truncated_lines != b.truncated_lines ||
      a.top.size() != b.top.size()) {
    return false;
  }
  for (size_t i = 0; i < a.top.size(); ++i) {
    if (a.top[i].name != b.top[i].name || !Same(a.top[i].tflops, b.top[i].tflops)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 97;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  ckprof::CkOutputParser whole(3);
  whole.Feed(text);
  whole.FeedStderr(text);
  whole.Finish();

  ckprof::CkOutputParser split(3);
  for (size_t at = 0; at < text.size(); at += chunk) split.Feed(text.substr(at, chunk));
  for (size_t at = 0; at < text.size(); at += chunk) split.FeedStderr(text.substr(at, chunk));
  split.Finish();
  if (!Same(whole.perf(), split.perf())) __builtin_trap();

  for (bool signaled : {false, true}) {
    ckprof::Outcome o = ckprof::ClassifyExit(signaled, data[0] % 130, whole.perf(), text);
    (void)o.Summary();
  }
  (void)ckprof::StripAnsi(text);
  ckprof::InstancePerf p;
  (void)ckprof::ParsePerfLine(text, &p);
  return 0;
}
