// Parsing of ckProfiler's output, and classification of a finished profiler process.
//
// CkOutputParser consumes a profiler's stdout incrementally, in chunks of any size, as it
// streams from the pipe: memory stays bounded however much the profiler prints (lines longer
// than kMaxLineBytes are truncated, only the k fastest instances are kept). It understands
// current and older CK output (docs/ck-profiler.md): with and without `valids:`,
// `(instance i)`, `, SplitK k` suffixes, `inf`, exponents, ANSI colour escapes. Instance names
// are never split on commas.
//
// A parser is a plain object used by one thread at a time; perf() returns a reference owned by
// the parser, valid until the next Feed/Finish or its destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/outcome.h"

namespace ckprof {

// One `Perf:` line: an instance that supports the problem, and how fast it ran.
struct InstancePerf {
  std::string name;   // e.g. "DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle<256, 128, ...>"
  double avg_ms = 0;  // may be inf or nan when CK printed so
  double tflops = 0;
  double gbps = 0;
  std::string split_k;  // backward ops: as printed, e.g. "4" or "4 (best occupancy)"; else empty
};

// What one profiler run printed, as far as it has been parsed.
struct CkPerf {
  // The best instance: from the `Best configuration parameters:` block (or an older
  // `Best Perf:` line) when present, else the highest-TFlops `Perf:` line seen so far.
  bool has_best = false;
  std::string best_name;  // without the " (instance i)" suffix
  double avg_ms = 0, tflops = 0, gbps = 0;
  std::string split_k;
  int valids = -1;                   // from "valids: N"; -1 when the output had no such line
  int instances_found = -1;          // from the header "found N instances"; -1 when absent
  int instances_tried = 0;           // Perf lines + "does not support this problem" lines
  int instances_supported = 0;       // Perf lines
  std::vector<InstancePerf> top;     // the k fastest (highest TFlops), best first
  bool verification_failed = false;  // "Error: Incorrect results!" (stdout or stderr)
  bool not_implemented = false;      // "this data_type & layout is not implemented"
  bool usage_printed = false;        // CK's help text: wrong argument count
  bool unknown_operation = false;    // "cannot find operation: X"
  bool best_from_summary = false;    // best came from the final block, not from Perf lines
  uint64_t lines = 0;                // stdout lines seen
  uint64_t truncated_lines = 0;      // stdout lines longer than kMaxLineBytes
};

class CkOutputParser {
 public:
  // Longest line kept; the rest of a longer line is dropped (tensor dumps with log=1).
  static constexpr size_t kMaxLineBytes = 64 * 1024;

  // `top_k`: how many of the fastest instances perf().top keeps.
  explicit CkOutputParser(size_t top_k = 5);

  // Consumes the next piece of stdout; lines may be split anywhere between chunks.
  void Feed(std::string_view chunk);
  // Consumes the next piece of stderr, looking only for error markers (verification failure,
  // "not implemented", "cannot find operation").
  void FeedStderr(std::string_view chunk);
  // Parses a final unterminated line, if any. Feeding after Finish is allowed.
  void Finish();

  const CkPerf& perf() const { return perf_; }

 private:
  struct LineBuffer {
    std::string line;
    bool overflow = false;
  };
  template <typename OnLine>
  static void Split(LineBuffer& buf, std::string_view chunk, OnLine on_line);
  void OnStdoutLine(std::string_view raw, bool truncated);
  void OnStderrLine(std::string_view raw);
  void ScanErrorMarkers(std::string_view line);
  void AddPerf(InstancePerf p);
  void CommitSummary();

  size_t top_k_;
  CkPerf perf_;
  LineBuffer out_, err_;
  std::string clean_;  // scratch: the current line without ANSI escapes

  // Best of the Perf lines (CK's rule: highest TFlops, the first one on ties).
  bool have_line_best_ = false;
  InstancePerf line_best_;

  // The `Best configuration parameters:` block being read.
  bool in_summary_ = false;
  bool summary_has_name_ = false;
  InstancePerf summary_;
};

// Removes ANSI escape sequences (CSI "\033[...m" and two-byte escapes) from `in`.
std::string StripAnsi(std::string_view in);
// The same into *out (its capacity reused: the parser strips every line of a profiler's output).
void StripAnsiTo(std::string_view in, std::string* out);

// Parses one `Perf:` line (after ANSI stripping): "Perf:   0.123 ms, 45.6 TFlops, 789 GB/s,
// <name>[, SplitK <k>]". False when the line is not one.
bool ParsePerfLine(std::string_view line, InstancePerf* out);

// Classifies a finished profiler process. `exit_code_or_signal` is the exit code when
// !signaled, else the signal number. `stderr_text` (optional, e.g. the stderr capture) lends
// its last line to the reason of a failure the output does not explain.
//   signaled                      -> kCrashed(signal)
//   exit != 0                     -> kFailed(exit) with the cause when recognised
//   exit 0, no valid instance     -> kUnsupported
//   exit 0, a best instance       -> kSucceeded
Outcome ClassifyExit(bool signaled, int exit_code_or_signal, const CkPerf& perf,
                     std::string_view stderr_text = {});

}  // namespace ckprof
