// Tests of the job report's renderer (client/report.h): the verdict's arithmetic on a case
// worked by hand, backward records' bwd_data + bwd_weight paired against one trace time, the
// coverage counts, the baseline's matching, escaping of everything a user wrote, the Markdown
// tables, the known peaks, and that 10,000 problems stay bounded in the charts.
#include "client/report.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ckprof {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// One config's result: `ms` < 0 leaves it without a time; trace_us < 0: no trace figures.
TaskResult Task(int64_t position, int64_t rank, const std::string& op, const std::string& problem,
                TaskState state, double ms, double trace_us, int64_t calls) {
  TaskResult t;
  t.position = position;
  t.task_id = position;
  t.priority_rank = rank;
  t.operation = "profile_grouped_conv_" + op;
  const char* head = op == "fwd"        ? "Forward conv: "
                     : op == "bwd_data" ? "Backward data conv: "
                                        : "Backward weight conv: ";
  t.description = head + problem;
  t.state = state;
  if (state == TaskState::kSucceeded) {
    t.avg_ms = ms;
    t.tflops = 100;
    t.gbps = 1000;
    t.best_name = "kernel_" + std::to_string(position);
  } else {
    t.error = "exit 1: HIP error";
  }
  t.gpu = static_cast<int>(position % 2);
  t.started_at = 1000 + static_cast<double>(position);
  t.ended_at = t.started_at + 0.5;
  if (trace_us >= 0) {
    t.trace_gpu_us = trace_us;
    t.trace_count = calls;
  }
  return t;
}

// Hand-worked: per call (ms) and calls from the trace, CK's best time per call.
//   A fwd        trace 1000 us / 10 calls = 0.1 ms; CK 0.05  -> 1.0 ms against 0.5 ms
//   B bwd record trace 3000 us / 3 calls  = 1.0 ms; CK 0.3 + 0.5 = 0.8 -> 3.0 against 2.4
//   C fwd        trace  400 us / 4 calls  = 0.1 ms; unsupported -> keeps 0.4 (0.4 against 0.4)
//   D fwd        trace  200 us / 1 call   = 0.2 ms; CK 0.3 (slower) -> 0.2 against 0.3
// Reference 4.6 ms; with CK 0.5 + 2.4 + 0.4 + 0.3 = 3.6 ms; the faster of both 3.5 ms.
ResultsReply HandWorked() {
  ResultsReply r;
  r.job.id = 7;
  r.job.name = "resnet";
  r.tasks = {
      Task(1, 1, "bwd_data", "G=1, N=10, K=64, C=64, [3, 3] kernel, [56, 56] input",
           TaskState::kSucceeded, 0.3, 3000, 3),
      Task(2, 1, "bwd_weight", "G=1, N=10, K=64, C=64, [3, 3] kernel, [56, 56] input",
           TaskState::kSucceeded, 0.5, 3000, 3),
      Task(3, 2, "fwd", "G=1, N=10, K=64, C=3, [7, 7] kernel, [224, 224] input",
           TaskState::kSucceeded, 0.05, 1000, 10),
      Task(4, 3, "fwd", "G=1, N=10, K=128, C=64, [1, 1] kernel, [56, 56] input",
           TaskState::kUnsupported, -1, 400, 4),
      Task(5, 4, "fwd", "G=1, N=10, K=256, C=64, [1, 1] kernel, [56, 56] input",
           TaskState::kSucceeded, 0.3, 200, 1),
  };
  return r;
}

TEST(Report, VerdictArithmeticMatchesTheHandWorkedCase) {
  const ResultsReply job = HandWorked();
  const Report r = BuildReport(job, nullptr, ReportOptions{});
  EXPECT_TRUE(r.has_trace);
  EXPECT_NEAR(r.trace_total_ms, 4.6, 1e-9);
  EXPECT_EQ(r.overall.problems, 4);
  EXPECT_EQ(r.overall.covered, 3);
  EXPECT_NEAR(r.overall.reference_ms, 4.6, 1e-9);
  EXPECT_NEAR(r.overall.with_ck_ms, 3.6, 1e-9);
  EXPECT_NEAR(r.overall.best_of_both_ms, 3.5, 1e-9);
  EXPECT_NEAR(r.overall.speedup(), 4.6 / 3.6, 1e-9);
  ASSERT_EQ(r.by_group.size(), 2u);
  EXPECT_EQ(r.by_group[0].first, "fwd");
  EXPECT_NEAR(r.by_group[0].second.reference_ms, 1.6, 1e-9);
  EXPECT_NEAR(r.by_group[0].second.with_ck_ms, 1.2, 1e-9);
  EXPECT_EQ(r.by_group[1].first, "bwd");
  EXPECT_NEAR(r.by_group[1].second.reference_ms, 3.0, 1e-9);
  EXPECT_NEAR(r.by_group[1].second.with_ck_ms, 2.4, 1e-9);
  // Ranked by trace time: B (3.0), A (1.0), C (0.4), D (0.2).
  ASSERT_EQ(r.problems.size(), 4u);
  EXPECT_EQ(r.problems[0].rank, 1);
  EXPECT_EQ(r.problems[1].rank, 2);
  EXPECT_EQ(r.problems[2].rank, 3);
  EXPECT_EQ(r.problems[3].rank, 4);
  EXPECT_NEAR(*r.problems[1].speedup(), 2.0, 1e-9);
  EXPECT_FALSE(r.problems[2].speedup().has_value());

  const std::string html = RenderReportHtml(job, nullptr, ReportOptions{});
  EXPECT_NE(html.find("3.600 ms instead of 4.600 ms"), std::string::npos) << html.substr(0, 4000);
  EXPECT_NE(html.find("1.28×"), std::string::npos);
}

TEST(Report, BackwardRecordsPairTheirDataAndWeightConfigs) {
  const ResultsReply job = HandWorked();
  const Report r = BuildReport(job, nullptr, ReportOptions{});
  const ReportProblem& b = r.problems[0];
  EXPECT_EQ(b.ops, "bwd_data+bwd_weight");
  EXPECT_EQ(b.group, "bwd");
  ASSERT_EQ(b.parts.size(), 2u);
  EXPECT_NEAR(*b.ck_ms_per_call, 0.8, 1e-12);
  EXPECT_NEAR(*b.trace_ms_per_call, 1.0, 1e-12);
  EXPECT_EQ(b.calls, 3);
  EXPECT_EQ(b.best, "kernel_1 + kernel_2");

  // The same problem text in two records (different ranks or trace times) is two problems;
  // one failed half leaves the record's trace time in the total.
  ResultsReply two = job;
  two.tasks[1].priority_rank = 9;
  EXPECT_EQ(BuildReport(two, nullptr, ReportOptions{}).problems.size(), 5u);
  ResultsReply half = job;
  half.tasks[1] = Task(2, 1, "bwd_weight", "G=1, N=10, K=64, C=64, [3, 3] kernel, [56, 56] input",
                       TaskState::kFailed, -1, 3000, 3);
  const Report h = BuildReport(half, nullptr, ReportOptions{});
  EXPECT_EQ(h.problems[0].coverage, Coverage::kFailed);
  EXPECT_NEAR(h.overall.with_ck_ms, 3.0 + 0.5 + 0.4 + 0.3, 1e-9);
}

TEST(Report, CoverageCountsEachConfigAndProblemOnce) {
  ResultsReply job = HandWorked();
  job.tasks[4].contended.push_back(GpuUser{4242, 1000, "alice", "python3 train.py"});
  job.tasks[2].repeats = RepeatStats{};
  job.tasks[2].repeats->noisy = true;
  job.tasks.push_back(Task(6, 5, "fwd", "G=1, N=1, K=8, C=8, [3, 3] kernel, [8, 8] input",
                           TaskState::kQueued, -1, 100, 1));
  const Report r = BuildReport(job, nullptr, ReportOptions{});
  const ReportCoverage& c = r.coverage;
  EXPECT_EQ(c.configs, 6);
  EXPECT_EQ(c.succeeded, 4);
  EXPECT_EQ(c.unsupported, 1);
  EXPECT_EQ(c.contended, 1);
  EXPECT_EQ(c.not_run, 1);
  EXPECT_EQ(c.noisy, 1);
  EXPECT_EQ(c.problems, 5);
  EXPECT_EQ(c.problems_covered, 2);
  EXPECT_EQ(c.problems_unsupported, 1);
  EXPECT_EQ(c.problems_contended, 1);
  EXPECT_EQ(c.problems_not_run, 1);
  // A contended time is not used: D keeps its trace time.
  EXPECT_NEAR(r.overall.with_ck_ms, 0.5 + 2.4 + 0.4 + 0.2 + 0.1, 1e-9);
  const std::string html = RenderReportHtml(job, nullptr, ReportOptions{});
  EXPECT_NE(html.find("1 problem(s) (1 config(s)) are unsupported"), std::string::npos);
  EXPECT_NE(html.find("contended"), std::string::npos);
  EXPECT_NE(html.find("1 config(s) are noisy"), std::string::npos);
}

TEST(Report, BaselineTimesAreTheReferenceWeightedByCalls) {
  const ResultsReply job = HandWorked();
  ResultsReply base = HandWorked();
  base.job.id = 8;
  for (TaskResult& t : base.tasks) {
    if (t.ok()) t.avg_ms *= 2;  // the baseline takes twice CK's time
  }
  std::swap(base.tasks[0], base.tasks[4]);  // matched by description, not position
  const Report r = BuildReport(job, &base, ReportOptions{});
  EXPECT_TRUE(r.has_baseline);
  // A: 0.1 x 10 = 1.0 against 0.5; B: 1.6 x 3 = 4.8 against 2.4; D: 0.6 against 0.3;
  // C has no baseline time (unsupported there too): left out.
  EXPECT_EQ(r.overall.problems, 3);
  EXPECT_EQ(r.coverage.baseline_unmatched, 1);
  EXPECT_NEAR(r.overall.reference_ms, 1.0 + 4.8 + 0.6, 1e-9);
  EXPECT_NEAR(r.overall.with_ck_ms, 0.5 + 2.4 + 0.3, 1e-9);
  EXPECT_NEAR(r.overall.speedup(), 2.0, 1e-9);
}

TEST(Report, EveryUserStringIsEscaped) {
  ResultsReply job = HandWorked();
  job.job.name = "<script>alert('name')</script>";
  job.job.profiler = "/opt/\"ck\"&<b>";
  job.tasks[3].error = "HIP error: <img src=x onerror=alert(1)>";
  job.tasks[2].description = "Forward conv: <svg onload=alert(2)>";
  job.tasks[2].best_name = "kernel<'x'>";
  ReportOptions o;
  o.job_label = "job 7 (" + job.job.name + ")";
  const std::string html = RenderReportHtml(job, nullptr, o);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<svg onload"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(html.find("kernel&lt;&#39;x&#39;&gt;"), std::string::npos);
  EXPECT_EQ(HtmlEscape("a&b<c>\"d'"), "a&amp;b&lt;c&gt;&quot;d&#39;");

  const std::string md = RenderReportMarkdown(job, nullptr, o);
  EXPECT_EQ(md.find("<script"), std::string::npos);
  EXPECT_EQ(md.find("<img"), std::string::npos);
}

TEST(Report, MarkdownHasTheVerdictAndOneRowPerProblem) {
  ResultsReply job = HandWorked();
  job.tasks[2].description = "Forward conv: a|b";
  ReportOptions o;
  o.job_label = "job 7 (resnet)";
  const std::string md = RenderReportMarkdown(job, nullptr, o);
  EXPECT_NE(md.find("# ckprof report: job 7 (resnet)"), std::string::npos);
  EXPECT_NE(md.find("## Verdict"), std::string::npos);
  EXPECT_NE(md.find("| **all** | 4 | 3 | 4.600 | 3.600 | 1.28× | 3.500 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| # | rank | op | problem |"), std::string::npos);
  EXPECT_NE(md.find("| 1 | 1 | bwd_data+bwd_weight | G=1, N=10, K=64, C=64"), std::string::npos);
  EXPECT_NE(md.find("a\\|b"), std::string::npos);  // a pipe does not split the cell
  EXPECT_NE(md.find("## Failures"), std::string::npos);
  EXPECT_NE(md.find("| #4 | fwd |"), std::string::npos);
  EXPECT_EQ(md.find("<svg"), std::string::npos);
  // Problem rows: a header, the alignment row, and 4 problems between "## Problems" and the next.
  const size_t start = md.find("## Problems"), end = md.find("## Failures");
  EXPECT_EQ(Count(md.substr(start, end - start), "\n|"), 6u);
}

TEST(Report, PeaksComeFromTheOptionsElseTheGpuModel) {
  ResultsReply job = HandWorked();
  for (TaskResult& t : job.tasks) {
    t.gpu_state = GpuState{};
    t.gpu_state->name = "AMD Instinct MI300X";
  }
  Report r = BuildReport(job, nullptr, ReportOptions{});
  ASSERT_TRUE(r.peaks.tflops && r.peaks.gbps);
  EXPECT_DOUBLE_EQ(*r.peaks.tflops, 1307.4);
  EXPECT_DOUBLE_EQ(*r.peaks.gbps, 5300);
  EXPECT_NE(r.peaks.source.find("MI300X"), std::string::npos);
  ReportOptions o;
  o.peak_tflops = 100;
  r = BuildReport(job, nullptr, o);
  EXPECT_DOUBLE_EQ(*r.peaks.tflops, 100);
  EXPECT_DOUBLE_EQ(*r.peaks.gbps, 5300);
  EXPECT_NE(r.peaks.source.find("--peak-tflops"), std::string::npos);
  EXPECT_DOUBLE_EQ(*KnownPeaks("NVIDIA H200", "fp32").tflops, 67);
  EXPECT_DOUBLE_EQ(*KnownPeaks("NVIDIA H100 80GB HBM3", "bf16").gbps, 3350);
  EXPECT_FALSE(KnownPeaks("Radeon RX 7900", "fp16").tflops.has_value());
  // No model, no options: no peak line, and the page says why.
  const std::string html = RenderReportHtml(HandWorked(), nullptr, ReportOptions{});
  EXPECT_NE(html.find("no peaks: the GPU model is not known"), std::string::npos);
}

TEST(Report, TenThousandProblemsStayBoundedInTheCharts) {
  ResultsReply job;
  for (int64_t i = 1; i <= 10000; ++i) {
    job.tasks.push_back(Task(i, i, "fwd", "G=1, N=" + std::to_string(i) + ", K=8, C=8",
                             i % 10 ? TaskState::kSucceeded : TaskState::kFailed, 0.01, 50, 2));
  }
  ReportOptions o;
  const auto start = std::chrono::steady_clock::now();
  const std::string html = RenderReportHtml(job, nullptr, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 5.0);
  EXPECT_LT(html.size(), 30u * 1000 * 1000);
  EXPECT_LE(Count(html, "<circle"), o.max_chart_points);
  EXPECT_NE(html.find("The first 40 of 10000 problems are shown"), std::string::npos);
  EXPECT_NE(html.find("The 3000 longest of 10000 tasks are drawn"), std::string::npos);
  // The tables list everything: 10,000 problems and 1,000 failures.
  EXPECT_GE(Count(html, "<tr><td class=\"n\">"), 11000u);
  const std::string md = RenderReportMarkdown(job, nullptr, o);
  EXPECT_GE(Count(md, "\n| "), 11000u);
}

// A forward config of `data_type` (CK's fwd encoding: 0 fp32, 1 fp16, 2 bf16, 3 int8, 8 tf32)
// for problem N=`n`.
nlohmann::ordered_json FwdConfig(int data_type, int n) {
  auto c = nlohmann::ordered_json::parse(R"({"operation_type": "profile_grouped_conv_fwd",
 "profiler_args": {"data_type": 1, "layout": 3, "index_type": 0, "verify": 0, "init": 1, "log": 0,
   "time": 1, "num_dim_spatial": 2, "G": 1, "N": 1, "K": 64, "C": 64, "filter_spatial": [3, 3],
   "input_spatial": [56, 56], "strides": [1, 1], "dilations": [1, 1], "left_pads": [1, 1],
   "right_pads": [1, 1]},
 "metadata": {"priority_rank": 1, "description": "Forward conv"}})");
  c["profiler_args"]["data_type"] = data_type;
  c["profiler_args"]["N"] = n;
  return c;
}

TEST(Report, KnownPeaksDifferPerDataType) {
  struct Case {
    const char* model;
    const char* type;
    std::optional<double> tflops;
  };
  const Case cases[] = {
      {"AMD Instinct MI300X", "fp32", 163.4},
      {"AMD Instinct MI300X", "fp16", 1307.4},
      {"AMD Instinct MI300X", "bf16", 1307.4},
      {"AMD Instinct MI300X", "tf32", 653.7},
      {"AMD Instinct MI300X", "", 1307.4},
      {"AMD Instinct MI300X", "int8", std::nullopt},
      {"AMD Instinct MI250X", "fp32", 95.7},
      {"AMD Instinct MI250X", "bf16", 383},
      {"AMD Instinct MI250X", "tf32", std::nullopt},
      {"NVIDIA H100 80GB HBM3", "fp32", 67},
      {"NVIDIA H100 80GB HBM3", "tf32", 494.7},
      {"NVIDIA H100 80GB HBM3", "bf16", 989.4},
      {"NVIDIA H200", "fp16", 989.4},
      {"NVIDIA H200", "fp32", 67},
      {"Radeon RX 7900", "fp32", std::nullopt},
  };
  for (const Case& c : cases) {
    const RooflinePeaks p = KnownPeaks(c.model, c.type);
    EXPECT_EQ(p.tflops, c.tflops) << c.model << " " << c.type;
  }
}

TEST(Report, EachDataTypeHasItsOwnComputeRoof) {
  ResultsReply job;
  const int types[] = {0, 2, 2, 3};  // fp32, bf16 (two problems), int8
  for (int i = 0; i < 4; ++i) {
    TaskResult t =
        Task(i + 1, i + 1, "fwd", "N=" + std::to_string(i + 1), TaskState::kSucceeded, 0.1, 100, 1);
    t.config = FwdConfig(types[i], i + 1);
    t.gpu_state = GpuState{};
    t.gpu_state->name = "AMD Instinct MI300X";
    job.tasks.push_back(t);
  }
  struct Case {
    std::optional<double> given;
    std::vector<std::pair<std::string, std::optional<double>>> roofs;
    std::vector<std::string> in_html;
  };
  const Case cases[] = {
      {std::nullopt,
       {{"bf16", 1307.4}, {"fp32", 163.4}, {"int8", std::nullopt}},
       {"data-roof=\"fp32\"", "data-roof=\"bf16\"", "fp32 roof 163.4 TFlops",
        "bf16 roof 1307 TFlops", "int8: no compute peak known", "of the fp32 roof",
        "of the bf16 roof", "compute per data type: bf16 1307.4 TFlops, fp32 163.4 TFlops"}},
      {100.0, {{"", 100.0}}, {"data-roof=\"all\"", "every data type roof 100.0 TFlops"}},
  };
  for (const Case& c : cases) {
    ReportOptions o;
    o.peak_tflops = c.given;
    const Report r = BuildReport(job, nullptr, o);
    ASSERT_EQ(r.roofs.size(), c.roofs.size());
    for (size_t i = 0; i < c.roofs.size(); ++i) {
      EXPECT_EQ(r.roofs[i].data_type, c.roofs[i].first);
      EXPECT_EQ(r.roofs[i].tflops, c.roofs[i].second) << r.roofs[i].data_type;
    }
    const std::string html = RenderReportHtml(job, nullptr, o);
    for (const std::string& want : c.in_html) EXPECT_NE(html.find(want), std::string::npos) << want;
    if (c.given) {
      EXPECT_EQ(html.find("data-roof=\"fp32\""), std::string::npos);
      EXPECT_EQ(Count(html, "data-roof="), 1u);
    }
  }
}

TEST(Report, TimelineTimesHaveOneFormat) {
  struct Case {
    double seconds;
    int decimals;
    const char* text;
  };
  const Case cases[] = {
      {0, 0, "0:00:00"},         {5, 0, "0:00:05"},          {59.6, 0, "0:01:00"},
      {3725, 0, "1:02:05"},      {3725.25, 1, "1:02:05.3"},  {0.25, 2, "0:00:00.25"},
      {59.999, 2, "0:01:00.00"}, {0.0005, 3, "0:00:00.001"}, {-1, 0, "-"},
  };
  for (const Case& c : cases) EXPECT_EQ(TimelineTime(c.seconds, c.decimals), c.text);
  const std::pair<double, int> steps[] = {{600, 0},  {1, 0},     {0.5, 1}, {0.1, 1},
                                          {0.02, 2}, {0.001, 3}, {1e-5, 3}};
  for (const auto& [step, decimals] : steps) EXPECT_EQ(TimelineDecimals(step), decimals) << step;

  // Every label of the chart, ticks and tooltips, in H:MM:SS: none in "N.N s" or "N.NN s".
  struct Span {
    double length_s;
    const char* tick;     // a tick label it must have
    const char* tooltip;  // its one task's tooltip times
  };
  const Span spans[] = {
      {0.5, ">0:00:00.1<", "0:00:00.0–0:00:00.5 (0:00:00.5)"},
      {30, ">0:00:05<", "0:00:00–0:00:30 (0:00:30)"},
      {7200, ">0:15:00<", "0:00:00–2:00:00 (2:00:00)"},
  };
  for (const Span& sp : spans) {
    ResultsReply job;
    TaskResult t = Task(1, 1, "fwd", "N=1", TaskState::kSucceeded, 0.1, -1, 1);
    t.started_at = 1000;
    t.ended_at = 1000 + sp.length_s;
    job.tasks.push_back(t);
    const std::string html = RenderReportHtml(job, nullptr, ReportOptions{});
    const size_t a = html.find("data-chart=\"timeline\""), b = html.find("</svg>", a);
    ASSERT_NE(a, std::string::npos);
    const std::string chart = html.substr(a, b - a);
    EXPECT_NE(chart.find(sp.tick), std::string::npos) << sp.length_s << "\n" << chart;
    EXPECT_NE(chart.find(sp.tooltip), std::string::npos) << sp.length_s << "\n" << chart;
    EXPECT_EQ(chart.find(" s<"), std::string::npos) << chart;
    EXPECT_EQ(chart.find(" s)"), std::string::npos) << chart;
  }
}

// GPU 0 of two nodes (a cluster's) is two rows of the timeline, each named by its node.
TEST(Report, TimelineRowsAreKeyedByNodeAndGpu) {
  ResultsReply job;
  for (int i = 0; i < 3; ++i) {
    TaskResult t =
        Task(i + 1, i + 1, "fwd", "N=" + std::to_string(i), TaskState::kSucceeded, 0.1, -1, 1);
    t.gpu = 0;
    t.started_at = 1000 + i;
    t.ended_at = 1000.5 + i;
    t.placement = Placement{"slurm", 100 + i, "COMPLETED", i == 2 ? "node-b" : "node-a", "0"};
    job.tasks.push_back(t);
  }
  const std::string html = RenderReportHtml(job, nullptr, ReportOptions{});
  const size_t a = html.find("data-chart=\"timeline\""), b = html.find("</svg>", a);
  ASSERT_NE(a, std::string::npos);
  const std::string chart = html.substr(a, b - a);
  EXPECT_NE(chart.find(">node-a GPU 0<"), std::string::npos) << chart;
  EXPECT_NE(chart.find(">node-b GPU 0<"), std::string::npos) << chart;
}

TEST(Report, GpuTableCountsEachRunOnItsGpu) {
  // A config merged from its runs: `gpus` are its succeeded runs' GPUs; `finished` ended;
  // `gpu` the result's (its median run's, or its first run's when none succeeded).
  auto repeated = [](int64_t position, int gpu, std::vector<int> gpus, int finished) {
    TaskResult t = Task(position, position, "fwd", "N=" + std::to_string(position),
                        gpus.empty() ? TaskState::kFailed : TaskState::kSucceeded, 0.1, -1, 1);
    t.gpu = gpu;
    t.repeats = RepeatStats{};
    t.repeats->runs = 3;
    t.repeats->finished = finished;
    t.repeats->succeeded = static_cast<int>(gpus.size());
    t.repeats->times_ms.assign(gpus.size(), 0.1);
    t.repeats->gpus = std::move(gpus);
    return t;
  };
  struct Case {
    const char* what;
    std::vector<TaskResult> tasks;
    std::vector<std::string> rows;  // Markdown rows' first two cells, in order
    bool not_recorded;
  };
  const Case cases[] = {
      {"not repeated: one run per task",
       {Task(1, 1, "fwd", "N=1", TaskState::kSucceeded, 0.1, -1, 1),
        Task(2, 2, "fwd", "N=2", TaskState::kSucceeded, 0.1, -1, 1),
        Task(3, 3, "fwd", "N=3", TaskState::kFailed, -1, -1, 1)},
       {"| 0 | 1 |", "| 1 | 2 |"},
       false},
      {"repeat 3: 2 configs, 6 runs, each on its GPU",
       {repeated(1, 1, {0, 1, 1}, 3), repeated(2, 0, {0, 0, 0}, 3)},
       {"| 0 | 4 |", "| 1 | 2 |"},
       false},
      {"repeat 3: failed runs' GPUs are not recorded (but the first's), yet counted",
       {repeated(1, 1, {1}, 3), repeated(2, 0, {}, 3)},
       {"| 0 | 1 |", "| 1 | 1 |", "| not recorded | 4 |"},
       true},
  };
  for (const Case& c : cases) {
    ResultsReply job;
    job.tasks = c.tasks;
    const std::string md = RenderReportMarkdown(job, nullptr, ReportOptions{});
    const size_t start = md.find("## GPU state");
    ASSERT_NE(start, std::string::npos) << c.what;
    const std::string table = md.substr(start);
    EXPECT_NE(table.find("| GPU | runs |"), std::string::npos) << c.what;
    size_t at = 0;
    for (const std::string& row : c.rows) {
      const size_t found = table.find(row, at);
      EXPECT_NE(found, std::string::npos) << c.what << ": " << row << "\n" << table;
      if (found != std::string::npos) at = found;
    }
    EXPECT_EQ(table.find("| not recorded |") != std::string::npos, c.not_recorded) << c.what;
    const std::string html = RenderReportHtml(job, nullptr, ReportOptions{});
    EXPECT_NE(html.find("<th class=\"n\">runs</th>"), std::string::npos) << c.what;
    EXPECT_NE(html.find("once per run"), std::string::npos) << c.what;
  }
}

}  // namespace
}  // namespace ckprof
