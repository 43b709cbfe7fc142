// Fuzzes the converter: any submitted file (IR list, Kineto trace, configs file, gzipped or not)
// through ConvertText. What it accepts must be usable: every config re-reads from the configs
// file it writes, builds a command line and has a finite cost. And the fast reader of large
// configs lists (FastJsonParse) never accepts what nlohmann's parser does not, nor reads it to
// another value. Any exception, sanitizer report or broken property is a crash.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/ck_command.h"
#include "common/convert.h"
#include "common/fast_json.h"
#include "common/profiler_path.h"

namespace {

void Check(const ckprof::Conversion& c) {
  (void)ckprof::FormatConversionReport(c, false);
  for (const auto& r : c.records) (void)ckprof::FormatRecordLine(r, c.records.size(), c.format);
  ckprof::ProfilerTarget target;
  target.path = "/opt/ck/bin/ckProfiler";
  for (const auto& cfg : c.configs) {
    if (!std::isfinite(cfg.Flops()) || !std::isfinite(cfg.Bytes(2))) __builtin_trap();
    auto argv = ckprof::BuildCommand(target, cfg);
    if (!argv.ok()) __builtin_trap();  // conversion produced a config CK cannot be asked
  }
  if (c.configs.empty()) return;
  const std::string text = ckprof::FormatConfigsText(c.configs);
  auto again = ckprof::ConvertText(text, ckprof::ConvertOptions{});
  if (!again.ok() || again->configs.size() != c.configs.size()) __builtin_trap();
  if (ckprof::FormatConfigsText(again->configs) != text) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto fast = ckprof::FastJsonParse(text)) {
    const auto slow = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (slow.is_discarded() || !ckprof::JsonIdentical(*fast, slow)) __builtin_trap();
  }
  auto r = ckprof::ConvertText(text, ckprof::ConvertOptions{});
  if (!r.ok()) return 0;
  Check(*r);
  // Forced types and layouts take other paths through the mapping.
  ckprof::ConvertOptions forced;
  forced.data_type = ckprof::DataType::kBf16;
  forced.layout = ckprof::Layout::kNhwc;
  auto f = ckprof::ConvertText(text, forced);
  if (f.ok()) Check(*f);
  return 0;
}
