// The report of a job (`ckprof report`): what CK's best kernels would do to the model's
// convolution time, per problem and overall, as one self-contained HTML page (inline SVG charts,
// no script, no network) or as Markdown for a pull request.
//
// A pure renderer: it takes the job's results (a ResultsReply, as the `results` request answers
// or as read back from a results file), optionally a baseline job's, and options, and returns
// text. No sockets, no files, no clock; any thread. BuildReport exposes the figures the pages
// show, so that tests check the arithmetic apart from the markup.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/protocol.h"

namespace ckprof {

struct ReportOptions {
  std::string job_label = "job";  // "job 12 (resnet)" or a results file's path
  std::string baseline_label;     // the same for the baseline; unused without one
  // The GPU's peaks for the roofline; nullopt: the known peaks of the GPU model (gpu_state
  // name), else no peak line.
  std::optional<double> peak_tflops;
  std::optional<double> peak_gbps;
  // The results have no start times (a results file): the timeline lays each GPU's tasks end
  // to end by their elapsed time, and says so.
  bool approximate_timeline = false;
  std::string generated_at;  // shown in the footer; "" = not shown
  // At most this many problems in the bar chart, points in the roofline and bars in the
  // timeline (the tables list everything); the charts say what they left out.
  size_t max_chart_problems = 40;
  size_t max_chart_points = 2000;
  size_t max_timeline_bars = 3000;
};

// What a problem's CK result can be used for.
enum class Coverage {
  kCovered,      // every config of it succeeded, on a quiet GPU
  kUnsupported,  // CK has no instance for (one of) its configs
  kFailed,       // (one of) its configs failed, crashed, timed out, was cancelled
  kContended,    // measured beside a foreign process on the GPU: not trusted, not used
  kNotRun,       // still queued or running
};
std::string_view CoverageName(Coverage c);

// One problem: a trace record (a backward record's bwd_data and bwd_weight configs together)
// or, without trace figures, one config.
struct ReportProblem {
  int64_t rank = 0;                      // priority_rank of its configs
  std::string group;                     // "fwd" or "bwd" (data, weight or both)
  std::string ops;                       // "fwd", "bwd_data", "bwd_weight", "bwd_data+bwd_weight"
  std::string problem;                   // the description without its "Forward conv: " head
  std::string data_type;                 // "fp16", ... ; "" = unknown (no config)
  std::vector<const TaskResult*> parts;  // this job's configs of it
  std::vector<const TaskResult*> baseline_parts;  // matched baseline configs (may be fewer)
  int64_t calls = 1;                              // the trace's call count (1 when unknown)
  std::optional<double> trace_ms_per_call;        // PyTorch's, from the trace
  std::optional<double> ck_ms_per_call;           // sum over parts; only when covered
  std::optional<double> baseline_ms_per_call;     // sum over baseline parts; all must succeed
  Coverage coverage = Coverage::kCovered;
  bool noisy = false;   // a part's repeated runs spread widely
  bool reused = false;  // a part copied a stored result
  std::string best;     // best kernel(s), " + " between parts
  // The time the verdict compares against per call: the baseline's with one, else the
  // trace's; nullopt: not part of the verdict.
  std::optional<double> reference_ms_per_call;
  // Per-call time "with CK": CK's when covered, else the reference.
  std::optional<double> with_ck_ms_per_call() const {
    if (ck_ms_per_call && reference_ms_per_call) return ck_ms_per_call;
    return reference_ms_per_call;
  }
  // reference / CK (above 1: CK is faster); nullopt when either is missing.
  std::optional<double> speedup() const {
    if (!ck_ms_per_call || !reference_ms_per_call || *ck_ms_per_call <= 0) return std::nullopt;
    return *reference_ms_per_call / *ck_ms_per_call;
  }
  double trace_total_ms() const { return trace_ms_per_call.value_or(0) * calls; }
};

// Totals over the problems that have a reference time, in ms (time per call × calls).
struct ReportTotals {
  int64_t problems = 0;        // with a reference time
  int64_t covered = 0;         // of which CK covered
  double reference_ms = 0;     // the baseline's or the trace's
  double with_ck_ms = 0;       // CK where covered, the reference elsewhere
  double best_of_both_ms = 0;  // the faster of the two per problem
  double speedup() const { return with_ck_ms > 0 ? reference_ms / with_ck_ms : 0; }
};

// Each task once, and each problem once, by what its CK result can be used for.
struct ReportCoverage {
  int64_t configs = 0, succeeded = 0, unsupported = 0, failed = 0, contended = 0, noisy = 0,
          not_run = 0, reused = 0;
  int64_t problems = 0, problems_covered = 0, problems_unsupported = 0, problems_failed = 0,
          problems_contended = 0, problems_not_run = 0;
  int64_t baseline_unmatched = 0;  // problems with no usable baseline time (baseline given)
};

struct RooflinePeaks {
  std::optional<double> tflops, gbps;
  std::string source;  // where they came from, as the report says it
};

// The compute roof of one data type in the roofline.
struct ComputeRoof {
  std::string data_type;         // "fp32", "bf16", ...; "" = every type (--peak-tflops)
  std::optional<double> tflops;  // nullopt: no peak known for this type on this GPU
};

struct Report {
  bool has_baseline = false;
  bool has_trace = false;               // some problem carries trace figures
  double trace_total_ms = 0;            // the model's convolution GPU time in the trace
  std::vector<ReportProblem> problems;  // the most trace (else reference) time first
  ReportTotals overall;
  std::vector<std::pair<std::string, ReportTotals>> by_group;  // "fwd", "bwd"
  ReportCoverage coverage;
  RooflinePeaks peaks;  // the dominant data type's (the most trace time)
  // One compute roof per data type of the job's problems, by name; one for all types when
  // --peak-tflops was given. Each config's point is drawn against its own type's roof.
  std::vector<ComputeRoof> roofs;
};

// The figures: problems paired and matched, the verdict, the coverage and the peaks.
// The returned Report points into `job` and `baseline`: they must outlive it.
Report BuildReport(const ResultsReply& job, const ResultsReply* baseline,
                   const ReportOptions& options);

// The known dense peaks of a GPU model (by its name, e.g. "AMD Instinct MI300X") for a data
// type ("fp16", "bf16", "fp32", "tf32"; "" = fp16); nullopt fields when unknown (tflops also
// for a type the model has no known peak for, e.g. int8, whose peak is in TOPS).
RooflinePeaks KnownPeaks(const std::string& gpu_name, const std::string& data_type);

// The whole page: one HTML document, every style inline, charts as inline SVG
// (each an <svg> with data-chart="verdict|problems|roofline|timeline").
std::string RenderReportHtml(const ResultsReply& job, const ResultsReply* baseline,
                             const ReportOptions& options);
// The same figures as GitHub-flavoured Markdown tables (no images).
std::string RenderReportMarkdown(const ResultsReply& job, const ResultsReply* baseline,
                                 const ReportOptions& options);

// A time on the report's GPU timeline (ticks and tooltips alike): seconds since the first task
// started as "H:MM:SS", with `decimals` (0..3) digits of a second: TimelineTime(3725.25, 1) is
// "1:02:05.3". TimelineDecimals: the digits a tick step needs (0 for 1 s and above, 1 for
// 0.1 s, ... at most 3). "-" for a negative or non-finite time.
std::string TimelineTime(double seconds, int decimals);
int TimelineDecimals(double step_s);

// &, <, >, " and ' as HTML entities; control characters escaped first (EscapeControl, keeping
// line breaks and tabs).
std::string HtmlEscape(std::string_view text);

}  // namespace ckprof
