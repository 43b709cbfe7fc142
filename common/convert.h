// Conversion of PyTorch convolutions into CK profiler configs (docs: shared conversion.md):
// what `ckprof convert` does and what the daemon does on submit.
//
// The input is recognised by content: a replay-IR list, a PyTorch profiler (Kineto) trace, or
// an already-converted configs file (validated and passed through); files may be gzipped.
// Parsing streams through nlohmann's SAX interface, so memory follows the convolutions found,
// not the size of a trace. Untrusted input never throws out of these functions: an input that
// cannot be used at all is an Error; a record that cannot be converted is skipped and reported.
//
// Stateless: any thread may call these functions. The caller owns what they return.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ck_config.h"
#include "common/configs_writer.h"  // what a conversion is written as
#include "common/conv_mapping.h"    // ConvertOptions
#include "common/result.h"

namespace ckprof {

// The kinds of input ConvertText and ConvertFile recognise.
enum class InputFormat { kReplayIr, kTrace, kConfigs };
// "replay-IR list", "PyTorch profiler trace", "CK configs file".
std::string_view InputFormatName(InputFormat f);

// What happened to one input record (an IR record, or one unique problem of a trace).
struct RecordOutcome {
  size_t position = 0;  // 1-based position among the records
  std::string op_name;  // "aten::miopen_convolution"
  int64_t priority_rank = 0;
  std::vector<ConvOp> produced;  // empty when skipped
  std::string skip_reason;       // why it was skipped ("not a convolution", ...)
  double gpu_time_us = 0;        // trace: total kernel time of the problem's calls
  int64_t count = 0;             // trace: number of calls
};

// The result of a conversion.
struct Conversion {
  InputFormat format = InputFormat::kReplayIr;
  std::vector<CkConfig> configs;  // in input order (for a trace: rank order)
  std::vector<RecordOutcome> records;
  std::vector<std::string> warnings;  // e.g. "record 3 (aten::conv2d): unknown dtype ..."
  size_t trace_calls = 0;             // trace: convolution calls found (before merging)
  size_t reader_threads = 1;          // threads that read the input (see ConvertText)
};

// Detects the format by content and converts. Error only when the input cannot be used at all:
// "input is not valid JSON at line 3, column 7: ...", "JSON nested deeper than 512 levels",
// neither format, or a configs file with an invalid config. Gzipped text is accepted too.
// A large configs list (over 4 MiB of text) is read on up to `threads` threads, 2 MiB or more
// each; the outcome, errors included, is the same as on one. Gzipped, it is then inflated whole
// (up to 512 MiB) rather than streamed.
Result<Conversion> ConvertText(std::string_view text, const ConvertOptions& options,
                               unsigned threads = 1);

// Same for a file (plain or gzipped), streamed. Errors name the file.
Result<Conversion> ConvertFile(const std::string& path, const ConvertOptions& options);

// The console report of the original tool: one line per record (unless quiet), then the
// summary block: the operations (converted + skipped), then the configs (fwd + bwd_data +
// bwd_weight), numbers in one column. Warnings are not included (see Conversion::warnings,
// SkipWarning).
std::string FormatConversionReport(const Conversion& c, bool quiet);

// Why a trace's convolution was skipped when the trace holds no argument shapes.
inline constexpr std::string_view kNoShapesReason =
    "the trace has no argument shapes (profile with record_shapes=True)";

// Why an input that gave no config cannot be profiled, for `ckprof convert` and `ckprof
// submit` alike: "no convolution to profile (all 2 records were skipped)", and when some were
// skipped for kNoShapesReason, the hint that the trace may have been recorded without
// record_shapes=True. `records`: the records (trace: unique problems) found; `without_shapes`:
// how many of them were skipped for kNoShapesReason.
std::string NoConfigsReason(size_t records, size_t without_shapes);
// The same for a conversion (empty when it has configs).
std::string NoConfigsReason(const Conversion& c);

// One record's console line: "✓ [1/22] Converted: aten::convolution_backward (rank 1) →
// bwd_data + bwd_weight" or "⚠ [5/78] Skipped: aten::addmm (rank 5): not a convolution".
std::string FormatRecordLine(const RecordOutcome& r, size_t total, InputFormat format);

// The warning for a skipped record: "record 5 (aten::addmm) skipped: not a convolution".
std::string SkipWarning(const RecordOutcome& r);

// The deepest JSON nesting accepted.
inline constexpr size_t kMaxInputDepth = 512;
// Gzipped text handed to ConvertText may inflate to at most this many bytes.
inline constexpr uint64_t kMaxInflatedInputBytes = uint64_t{4} << 30;

}  // namespace ckprof
