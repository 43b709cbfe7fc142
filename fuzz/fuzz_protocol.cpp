// Fuzzes the protocol decoder: every frame a client can send (ParseRequest), the re-encoding of
// what it accepts (which must parse back to the same request), and the client's readers of
// daemon answers. Any exception, sanitizer report or broken round trip is a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/json_util.h"
#include "common/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view frame(reinterpret_cast<const char*>(data), size);
  ckprof::Result<ckprof::Request> r = ckprof::ParseRequest(frame);
  if (r.ok()) {
    std::string out = ckprof::Frame(ckprof::RequestToJson(*r));
    if (out.empty() || out.back() != '\n' || out.find('\n') != out.size() - 1) __builtin_trap();
    out.pop_back();
    auto back = ckprof::ParseRequest(out);
    if (!back.ok()) __builtin_trap();
    if (ckprof::Frame(ckprof::RequestToJson(*back)) != out + "\n") __builtin_trap();
  } else {
    // The error goes back to the client as a frame: it must always be encodable.
    std::string answer = ckprof::Frame(ckprof::ErrorResponse(0, r.error()));
    if (!ckprof::ParseJson(answer).ok()) __builtin_trap();
  }
  auto j = ckprof::ParseJson(frame);
  if (j.ok()) {
    (void)ckprof::JobSummaryFromJson(*j);
    (void)ckprof::TaskResultFromJson(*j);
    (void)ckprof::GpuInfoFromJson(*j);
    if (j->is_object()) {
      for (const auto& [key, value] : j->items()) {
        (void)ckprof::JobSummaryFromJson(value);
        (void)ckprof::TaskResultFromJson(value);
      }
    }
  }
  return 0;
}
