#include "client/job_options.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace ckprof {
namespace {

// A command that takes job options: its name and its rules.
struct Command {
  const char* name;
  const JobOptionRules& (*rules)();
};
const Command kSubmit{"submit", SubmitJobOptionRules}, kEdit{"edit", EditJobOptionRules},
    kRun{"run", RunJobOptionRules};

// The settings in a few words: "priority=5 gpus=0,1 max_gpus=0 not_before=now+30m
// timeout_s=-1", only those set; not_before in minutes from now (a second may pass meanwhile).
std::string Describe(const JobSettings& s) {
  std::string out;
  auto add = [&](const std::string& word) { out += (out.empty() ? "" : " ") + word; };
  if (s.priority) add("priority=" + std::to_string(*s.priority));
  if (s.gpus) {
    std::string list;
    for (int g : *s.gpus) list += (list.empty() ? "" : ",") + std::to_string(g);
    add("gpus=" + (list.empty() ? std::string("any") : list));
  }
  if (s.max_gpus) add("max_gpus=" + std::to_string(*s.max_gpus));
  if (s.not_before) {
    const double minutes = (*s.not_before - static_cast<double>(std::time(nullptr))) / 60;
    add("not_before=now+" + std::to_string(std::llround(minutes)) + "m");
  }
  if (s.timeout_s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", *s.timeout_s);
    add("timeout_s=" + std::string(buf));
  }
  return out;
}

// `args` parsed as `command` parses them: the parser's exit code when it stops (an option the
// command does not take), else what JobOptions::Read gives: "ok: <settings>" or "error: <msg>".
std::string ParseAs(const Command& command, const std::vector<std::string>& args) {
  ArgParser parser(std::string("ckprof ") + command.name, "test");
  JobOptions options(command.rules(), &parser);
  if (auto code = parser.Parse(args)) return "exit " + std::to_string(*code);
  auto settings = options.Read();
  return settings ? "ok: " + Describe(*settings) : "error: " + settings.error();
}

struct OptionCase {
  Command command;
  std::vector<std::string> args;
  std::string expected;
};

void Check(const std::vector<OptionCase>& cases) {
  for (const OptionCase& c : cases) {
    std::string line = c.command.name;
    for (const auto& a : c.args) line += " '" + a + "'";
    EXPECT_EQ(ParseAs(c.command, c.args), c.expected) << line;
  }
}

TEST(JobOptionsTest, AcceptedValuesPerCommand) {
  Check({
      {kSubmit, {}, "ok: "},
      {kEdit, {}, "ok: "},
      {kSubmit, {"--priority", "-1000"}, "ok: priority=-1000"},
      {kEdit, {"--priority", "1000"}, "ok: priority=1000"},
      {kSubmit, {"--gpus", "0-3"}, "ok: gpus=0,1,2,3"},
      {kEdit, {"--gpus", "1, 3"}, "ok: gpus=1,3"},
      {kRun, {"--gpus=0,1"}, "ok: gpus=0,1"},
      {kEdit, {"--gpus", "any"}, "ok: gpus=any"},
      {kEdit, {"--gpus", "all"}, "ok: gpus=any"},
      {kSubmit, {"--max-gpus", "1"}, "ok: max_gpus=1"},
      {kSubmit, {"--max-gpus", "1024"}, "ok: max_gpus=1024"},
      {kEdit, {"--max-gpus", "0"}, "ok: max_gpus=0"},
      {kSubmit, {"--not-before", "+30m"}, "ok: not_before=now+30m"},
      {kSubmit, {"--not-before", "now"}, "ok: not_before=now+0m"},
      {kEdit, {"--not-before", "now"}, "ok: not_before=now+0m"},
      {kEdit, {"--not-before", "+1h30m"}, "ok: not_before=now+90m"},
      {kSubmit, {"--timeout", "0"}, "ok: timeout_s=0"},
      {kSubmit, {"--timeout", "1800.5"}, "ok: timeout_s=1800.5"},
      {kRun, {"--timeout", "600"}, "ok: timeout_s=600"},
      {kEdit, {"--timeout", "10000000"}, "ok: timeout_s=1e+07"},
      {kEdit, {"--timeout", "default"}, "ok: timeout_s=-1"},
      // An empty value is as if left out where a given option need not change anything.
      {kSubmit, {"--priority", "", "--gpus", "", "--max-gpus", "", "--timeout", ""}, "ok: "},
      {kRun, {"--gpus", "", "--timeout", ""}, "ok: "},
      {kEdit,
       {"--priority", "5", "--gpus", "2", "--max-gpus", "1", "--timeout", "60"},
       "ok: priority=5 gpus=2 max_gpus=1 timeout_s=60"},
  });
}

TEST(JobOptionsTest, RefusedValuesSayWhatEachOptionTakes) {
  const std::string when = "a time such as +30m, 09:00, tomorrow 09:00 or 2026-12-01T02:00 or now";
  Check({
      {kSubmit,
       {"--priority", "9999"},
       "error: --priority must be an integer from -1000 to 1000, got '9999'"},
      {kEdit,
       {"--priority", "1.5"},
       "error: --priority must be an integer from -1000 to 1000, got '1.5'"},
      {kEdit,
       {"--priority", ""},
       "error: --priority must be an integer from -1000 to 1000, got ''"},
      {kSubmit,
       {"--max-gpus", "0"},
       "error: --max-gpus must be an integer from 1 to 1024, got '0' (leave it out for no limit)"},
      {kSubmit,
       {"--max-gpus", "1025"},
       "error: --max-gpus must be an integer from 1 to 1024, got '1025' (leave it out for no "
       "limit)"},
      {kEdit,
       {"--max-gpus", "-1"},
       "error: --max-gpus must be an integer from 0 (no limit) to 1024, got '-1'"},
      {kEdit,
       {"--max-gpus", "two"},
       "error: --max-gpus must be an integer from 0 (no limit) to 1024, got 'two'"},
      {kSubmit,
       {"--gpus", "any"},
       "error: --gpus: GPU list \"any\" is not valid: use \"auto\", \"0,1,2\" or \"0-7\""},
      {kRun,
       {"--gpus", "0-x"},
       "error: --gpus: GPU list \"0-x\" is not valid: use \"auto\", \"0,1,2\" or \"0-7\""},
      {kSubmit, {"--gpus", "3-1"}, "error: --gpus: GPU range \"3-1\" is not valid"},
      {kEdit, {"--gpus", ""}, "error: --gpus: GPU list is empty"},
      {kEdit, {"--not-before", "25:00"}, "error: --not-before must be " + when + ", got '25:00'"},
      {kSubmit, {"--not-before", "soon"}, "error: --not-before must be " + when + ", got 'soon'"},
      {kSubmit,
       {"--timeout", "-1"},
       "error: --timeout must be a number of seconds from 0 to 10000000, got '-1'"},
      {kSubmit,
       {"--timeout", "default"},
       "error: --timeout must be a number of seconds from 0 to 10000000, got 'default'"},
      {kSubmit,
       {"--timeout", "10s"},
       "error: --timeout must be a number of seconds from 0 to 10000000, got '10s'"},
      {kSubmit,
       {"--timeout", "nan"},
       "error: --timeout must be a number of seconds from 0 to 10000000, got 'nan'"},
      {kRun,
       {"--timeout", "inf"},
       "error: --timeout must be a number of seconds from 0 to 10000000, got 'inf'"},
      {kRun,
       {"--timeout", "20000000"},
       "error: --timeout must be a number of seconds from 0 to 10000000, got '20000000'"},
      {kEdit,
       {"--timeout", ""},
       "error: --timeout must be a number of seconds from 0 to 10000000 or 'default', got ''"},
      {kEdit,
       {"--timeout", "-5"},
       "error: --timeout must be a number of seconds from 0 to 10000000 or 'default', got '-5'"},
      // run takes --gpus and --timeout only: the others are unknown options (exit 2).
      {kRun, {"--priority", "1"}, "exit 2"},
      {kRun, {"--max-gpus", "1"}, "exit 2"},
      {kRun, {"--not-before", "now"}, "exit 2"},
  });
}

TEST(JobOptionsTest, HelpListsTheOptionsEachCommandTakes) {
  struct {
    Command command;
    std::vector<std::string> listed, not_listed;
  } cases[] = {
      {kSubmit,
       {"--priority P", "--gpus LIST", "--max-gpus M", "--not-before TIME", "--timeout S",
        "(default 0)", "M >= 1"},
       {"'any'", "'default'"}},
      {kEdit,
       {"--priority P", "--gpus LIST", "--max-gpus M", "--not-before TIME", "--timeout S", "'any'",
        "'default'"},
       {"M >= 1", "(default 0)"}},
      {kRun,
       {"--gpus LIST", "--timeout S", "(default: all)"},
       {"--priority", "--max-gpus", "--not-before", "'any'"}},
  };
  for (const auto& c : cases) {
    ArgParser parser(std::string("ckprof ") + c.command.name, "test");
    JobOptions options(c.command.rules(), &parser);
    const std::string help = parser.Help();
    for (const auto& w : c.listed) EXPECT_NE(help.find(w), help.npos) << c.command.name << help;
    for (const auto& w : c.not_listed) EXPECT_EQ(help.find(w), help.npos) << c.command.name << help;
  }
}

// A request gets the settings given and keeps its own values for the others.
TEST(JobOptionsTest, ApplyToSetsOnlyWhatWasGiven) {
  JobSettings given;
  given.max_gpus = 2;
  SubmitOptions submit;
  submit.priority = 7;
  given.ApplyTo(&submit);
  EXPECT_EQ(submit.max_gpus, 2);
  EXPECT_EQ(submit.priority, 7);
  EXPECT_EQ(submit.timeout_s, -1);  // the daemon's default
  EXPECT_TRUE(submit.gpus.empty());
  EditOptions edit;
  given.ApplyTo(&edit);
  EXPECT_EQ(edit.max_gpus, 2);
  EXPECT_FALSE(edit.priority || edit.gpus || edit.not_before || edit.timeout_s);
  EXPECT_TRUE(EditOptions().empty());
  JobSettings none;
  none.ApplyTo(&edit);
  EXPECT_EQ(edit.max_gpus, 2);
}

}  // namespace
}  // namespace ckprof
