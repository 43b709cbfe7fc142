// Tables fit the terminal: the shrinkable columns give way, the numbers never do, and an
// unlimited width (--wide, a pipe) cuts nothing.
#include "common/text_table.h"

#include <gtest/gtest.h>

#include <sstream>

#include "common/protocol.h"
#include "common/results_file.h"

namespace ckprof {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

const std::string kKernel =
    "DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle<256, 128, 256, 32, Default, 8, 8, 1, 32, 32, "
    "2, 4, 8, 8, 1, 1, Intrawave, v3>";
const std::string kProblem =
    "G=1, N=32, K=256, C=128, [3, 3] kernel, [56, 56] input, stride [1, 1]";

TaskResult Succeeded() {
  TaskResult t;
  t.task_id = 1;
  t.position = 1;
  t.priority_rank = 1;
  t.operation = "profile_grouped_conv_fwd";
  t.description = "Forward conv: " + kProblem;
  t.state = TaskState::kSucceeded;
  t.best_name = kKernel;
  t.avg_ms = 0.123456;
  t.tflops = 123.4;
  t.gbps = 456.7;
  return t;
}

TEST(TextTable, FitsTheWidthByShorteningOnlyTheShrinkableColumns) {
  const std::vector<TaskResult> tasks = {Succeeded()};
  for (size_t width : {80u, 100u, 120u}) {
    const auto lines = Lines(ResultsTable(tasks, width));
    ASSERT_GE(lines.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_LE(DisplayWidth(lines[i]), width) << "width " << width << ": " << lines[i];
    }
    // The numbers are whole, and what was cut ends in "...".
    EXPECT_NE(lines[1].find("0.12346"), std::string::npos) << lines[1];
    EXPECT_NE(lines[1].find("123.4"), std::string::npos) << lines[1];
    EXPECT_NE(lines[1].find("456.7"), std::string::npos) << lines[1];
    EXPECT_NE(lines[1].find("..."), std::string::npos) << lines[1];
  }
  // A wider terminal shows more of the kernel name than a narrow one.
  const auto narrow = Lines(ResultsTable(tasks, 90)), wider = Lines(ResultsTable(tasks, 200));
  EXPECT_GT(wider[1].size(), narrow[1].size());
}

TEST(TextTable, UnlimitedWidthNeverCutsTheKernelOrTheProblem) {
  const auto lines = Lines(ResultsTable({Succeeded()}, 0));
  ASSERT_GE(lines.size(), 2u);
  EXPECT_NE(lines[1].find(kKernel), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find(kProblem), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("..."), std::string::npos) << lines[1];
}

TEST(TextTable, ColumnsAlignAndANarrowTerminalKeepsTheMinimum) {
  TextTable t({{"n", true}, {"name", false, true, 6}, {"ms", true}});
  t.AddRow({"1", "short", "1.5"});
  t.AddRow({"10", "a rather long name indeed", "12.25"});
  const auto wide = Lines(t.Render(0));
  ASSERT_EQ(wide.size(), 3u);
  EXPECT_EQ(wide[0], " n name                         ms");
  EXPECT_EQ(wide[1], " 1 short                       1.5");
  EXPECT_EQ(wide[2], "10 a rather long name indeed 12.25");
  const auto narrow = Lines(t.Render(20));
  EXPECT_EQ(narrow[2], "10 a rather... 12.25");
  EXPECT_EQ(DisplayWidth(narrow[2]), 20u);
  // Narrower than the fixed columns allow: the shrinkable one stops at its minimum.
  const auto tiny = Lines(t.Render(5));
  EXPECT_EQ(tiny[2], "10 a r... 12.25");
}

TEST(TextTable, CountsCodePointsNotBytes) {
  EXPECT_EQ(DisplayWidth("✓ ok"), 4u);
  EXPECT_EQ(CutToWidth("αβγδεζηθ", 6), "αβγ...");
  EXPECT_EQ(CutToWidth("short", 6), "short");
}

TEST(TextTable, ColoursTakeNoColumns) {
  EXPECT_EQ(DisplayWidth("\x1b[32mfinished\x1b[0m"), 8u);
  // (A styled column: our colours; any other column shows them escaped, as users' text.)
  TextTable t({{"STATE", false, false, 8, /*styled=*/true}, {"N", true}});
  t.AddRow({"\x1b[31mfailed\x1b[0m", "1"});
  t.AddRow({"succeeded", "2"});
  const std::string out = t.Render(0);
  EXPECT_NE(out.find("\x1b[31mfailed\x1b[0m    1\n"), std::string::npos) << out;
}

TEST(TextTable, LastLinesIsTailN) {
  EXPECT_EQ(LastLines("a\nb\nc\n", 2), "b\nc\n");
  EXPECT_EQ(LastLines("a\nb\nc", 2), "b\nc");
  EXPECT_EQ(LastLines("a\nb\nc\n", 1), "c\n");
  EXPECT_EQ(LastLines("a\nb\n", 5), "a\nb\n");
  EXPECT_EQ(LastLines("a\nb\n", 0), "a\nb\n");
  EXPECT_EQ(LastLines("", 3), "");
  EXPECT_EQ(LastLines("\n\n", 1), "\n");
}

TEST(TextTable, GroupThousandsAsTheLimitsSayThem) {
  const struct {
    int64_t n;
    const char* text;
  } cases[] = {{0, "0"},
               {999, "999"},
               {1000, "1,000"},
               {1204, "1,204"},
               {1000000, "1,000,000"},
               {-5000, "-5,000"},
               {INT64_MIN, "-9,223,372,036,854,775,808"}};
  for (const auto& c : cases) EXPECT_EQ(GroupThousands(c.n), c.text) << c.n;
}

// A cancel of 2,000 named tasks answers in a line: runs of three or more as a range.
TEST(TextTable, TaskListsShowRunsAsRanges) {
  EXPECT_EQ(TaskListText({}), "");
  EXPECT_EQ(TaskListText({2}), "#2");
  EXPECT_EQ(TaskListText({1, 2}), "#1, #2");
  EXPECT_EQ(TaskListText({1, 2, 3}), "#1-#3");
  EXPECT_EQ(TaskListText({7, 1, 2, 3, 4, 9, 10}), "#7, #1-#4, #9, #10");
  EXPECT_EQ(TaskListText({5, 4, 3}), "#5, #4, #3");  // (as named: not sorted)
  std::vector<int> many;
  for (int p = 4000; p <= 6000; ++p) many.push_back(p);
  many.push_back(12);
  EXPECT_EQ(TaskListText(many), "#4000-#6000, #12");
}

// Issue 31.11: rows that would be cut alike lose what they all share instead.
TEST(TextTable, CommonPartsAndTemplateNamesAreTakenOut) {
  std::vector<std::string> problems = {"G=1, N=10, K=64, C=32, [3, 3] kernel, [56, 56] input",
                                       "G=1, N=10, K=128, C=32, [1, 1] kernel, [56, 56] input"};
  EXPECT_EQ(TakeCommonParts(&problems), "G=1, N=10, C=32, [56, 56] input");
  EXPECT_EQ(problems, (std::vector<std::string>{"K=64, [3, 3] kernel", "K=128, [1, 1] kernel"}));
  std::vector<std::string> same = {"G=1, N=10", "G=1, N=10"};
  EXPECT_EQ(TakeCommonParts(&same), "") << "nothing would be left to tell them apart";
  EXPECT_EQ(same[0], "G=1, N=10");
  std::vector<std::string> one = {"G=1"};
  EXPECT_EQ(TakeCommonParts(&one), "");
  std::vector<std::string> kernels = {"DeviceX_Xdl<256, 128, Default>", "DeviceX_Xdl<64, 32, Pad>"};
  EXPECT_EQ(TakeCommonTemplate(&kernels), "DeviceX_Xdl");
  EXPECT_EQ(kernels, (std::vector<std::string>{"<256, 128, Default>", "<64, 32, Pad>"}));
  std::vector<std::string> mixed = {"DeviceX_Xdl<256>", "DeviceX_Wmma<256>"};
  EXPECT_EQ(TakeCommonTemplate(&mixed), "");
  EXPECT_EQ(mixed[1], "DeviceX_Wmma<256>");
}

TEST(TextTable, NarrowResultsTablesShowWhatTellsRowsApart) {
  std::vector<TaskResult> tasks = {Succeeded(), Succeeded()};
  tasks[1].task_id = tasks[1].position = tasks[1].priority_rank = 2;
  tasks[1].description =
      "Forward conv: G=1, N=32, K=512, C=128, [1, 1] kernel, [56, 56] input, "
      "stride [1, 1]";
  tasks[1].best_name =
      "DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle<64, 64, 64, 32, Default, 8, 8, 1, 32, 32, "
      "2, 2, 8, 8, 1, 1, Intrawave, v1>";
  const std::string narrow = ResultsTable(tasks, 120);
  EXPECT_NE(narrow.find("K=256"), std::string::npos) << narrow;
  EXPECT_NE(narrow.find("K=512"), std::string::npos) << narrow;
  EXPECT_NE(narrow.find("<64, 64, 64"), std::string::npos) << narrow;
  EXPECT_NE(narrow.find("problem: every row has G=1, N=32, C=128, [56, 56] input"),
            std::string::npos)
      << narrow;
  EXPECT_NE(
      narrow.find("best kernel: every one is DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle<...>"),
      std::string::npos)
      << narrow;
  // Unlimited (--wide, a pipe): every cell whole.
  const std::string wide = ResultsTable(tasks, 0);
  EXPECT_NE(wide.find(kProblem), std::string::npos) << wide;
  EXPECT_NE(wide.find(kKernel), std::string::npos) << wide;
  EXPECT_EQ(wide.find("every row has"), std::string::npos) << wide;
}

}  // namespace
}  // namespace ckprof
