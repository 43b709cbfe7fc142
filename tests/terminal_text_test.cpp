// Other users' text reaches a terminal escaped (issue 30.9): EscapeControl's convention, the
// table cells, CSV fields, and the format a command writes picked from --format or --output's
// name, never from where stdout goes (issue 31.5).
#include "common/terminal_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "client/client_util.h"
#include "common/results_file.h"
#include "common/text_table.h"

namespace ckprof {
namespace {

// No byte a terminal acts on: C0 controls but \n, DEL, and C1 (0x80-0x9f not inside a valid
// UTF-8 sequence, or U+0080-U+009F itself); tabs are harmless.
bool Inert(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f) return false;
    if (b == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9f)
      return false;
  }
  return !HasControl(text, LineBreaks::kKeep);
}

TEST(TerminalText, EscapesEveryControlVisibly) {
  struct Case {
    const char* name;
    std::string input;
    LineBreaks breaks;
    std::string expected;
  } cases[] = {
      {"plain ascii", "resnet50 fwd", LineBreaks::kEscape, "resnet50 fwd"},
      {"empty", "", LineBreaks::kEscape, ""},
      {"utf-8 kept", "✓ ě 日本 😀", LineBreaks::kEscape, "✓ ě 日本 😀"},
      {"osc 52 clipboard", "x\x1b]52;c;cm0gLXJmIH4=\x07y", LineBreaks::kEscape,
       "x\\e]52;c;cm0gLXJmIH4=\\x07y"},
      {"clear screen", "\x1b[2J\x1b[H", LineBreaks::kEscape, "\\e[2J\\e[H"},
      {"bel", "\a", LineBreaks::kEscape, "\\x07"},
      {"nul", std::string("a\0b", 3), LineBreaks::kEscape, "a\\x00b"},
      {"cr overwrites", "ok\rFAILED", LineBreaks::kEscape, "ok\\x0dFAILED"},
      {"backspace", "ab\b", LineBreaks::kEscape, "ab\\x08"},
      {"del", "a\x7f", LineBreaks::kEscape, "a\\x7f"},
      {"newline, tab escaped in a cell", "a\nb\tc", LineBreaks::kEscape, "a\\x0ab\\x09c"},
      {"newline, tab kept in a log", "a\nb\tc\n", LineBreaks::kKeep, "a\nb\tc\n"},
      {"cr escaped in a log too", "50%\r100%\n", LineBreaks::kKeep, "50%\\x0d100%\n"},
      {"C1 CSI as UTF-8 (U+009B)",
       "a\xc2\x9b"
       "2Jb",
       LineBreaks::kEscape, "a\\u009b2Jb"},
      {"C1 NEL (U+0085)", "\xc2\x85", LineBreaks::kEscape, "\\u0085"},
      {"U+00A0 is no control", "\xc2\xa0", LineBreaks::kEscape, "\xc2\xa0"},
      {"raw 0x9b (not UTF-8)",
       "a\x9b"
       "2J",
       LineBreaks::kEscape, "a\\x9b2J"},
      {"latin-1 byte", "caf\xe9", LineBreaks::kEscape, "caf\\xe9"},
      {"cut sequence", "\xe2\x9c", LineBreaks::kEscape, "\\xe2\\x9c"},
      {"overlong slash", "\xc0\xaf", LineBreaks::kEscape, "\\xc0\\xaf"},
      {"surrogate", "\xed\xa0\x80", LineBreaks::kEscape, "\\xed\\xa0\\x80"},
      {"above U+10FFFF", "\xf4\x90\x80\x80", LineBreaks::kEscape, "\\xf4\\x90\\x80\\x80"},
      {"backslash stays", "C:\\e", LineBreaks::kEscape, "C:\\e"},
  };
  for (const Case& c : cases) {
    const std::string out = EscapeControl(c.input, c.breaks);
    EXPECT_EQ(out, c.expected) << c.name;
    EXPECT_EQ(HasControl(c.input, c.breaks), out != c.input) << c.name;
    EXPECT_TRUE(Inert(out)) << c.name;
    EXPECT_EQ(EscapeControl(out, c.breaks), out) << c.name << ": escaping twice changes nothing";
  }
}

TEST(TerminalText, EveryByteComesOutInert) {
  for (int b = 0; b < 256; ++b) {
    for (const std::string& text :
         {std::string(1, static_cast<char>(b)), "\xc2" + std::string(1, static_cast<char>(b)),
          "x" + std::string(1, static_cast<char>(b)) + "\x9b"}) {
      EXPECT_TRUE(Inert(EscapeControl(text))) << "byte " << b;
      EXPECT_TRUE(Inert(EscapeControl(text, LineBreaks::kKeep))) << "byte " << b;
    }
  }
}

TEST(TerminalText, TableCellsAreEscapedButOurColoursKept) {
  TextTable table({{"NAME"}, {"STATE", false, false, 8, /*styled=*/true}});
  table.AddRow({"evil\x1b]52;c;aGk=\x07\x1b[2J", "\x1b[32mfinished\x1b[0m"});
  const std::string out = table.Render(0);
  EXPECT_NE(out.find("evil\\e]52;c;aGk=\\x07\\e[2J"), std::string::npos) << out;
  EXPECT_NE(out.find("\x1b[32mfinished\x1b[0m"), std::string::npos) << out;
  EXPECT_EQ(out.find("\x07"), std::string::npos) << out;
  EXPECT_EQ(out.find("\x1b]"), std::string::npos) << out;
}

TEST(TerminalText, JsonCarriesTheTextExactlyWithNothingRaw) {
  const nlohmann::json j = {{"name",
                             "a\x1b[2J\x07\x7f\xc2\x9b"
                             "b ✓"}};
  const std::string out = JsonForTerminal(j.dump());
  EXPECT_EQ(out, R"({"name":"a\u001b[2J\u0007\u007f\u009bb ✓"})");
  EXPECT_TRUE(Inert(out)) << out;
  EXPECT_EQ(nlohmann::json::parse(out), j);
  EXPECT_EQ(JsonForTerminal("{\"a\":1}"), "{\"a\":1}");
}

TEST(TerminalText, CsvFieldsAreEscapedLineBreaksQuoted) {
  EXPECT_EQ(CsvField("a\x1b[2Jb"), "a\\e[2Jb");
  EXPECT_EQ(CsvField("a\rb"), "a\\x0db");
  EXPECT_EQ(CsvField("a\nb"), "\"a\nb\"");
  EXPECT_EQ(CsvField("a,\x07"), "\"a,\\x07\"");
}

TEST(OutputFormat, PickedFromFormatThenExtensionNeverFromStdout) {
  const std::vector<std::string> results = {"table", "json", "csv"};
  const std::vector<std::string> report = {"html", "md", "json"};
  struct Case {
    const char* name;
    std::string format;
    bool json;
    std::string output;
    const std::vector<std::string>& formats;
    std::string expected;  // "" = refused
    std::string error;     // a part of the refusal
  } cases[] = {
      {"stdout: the table", "", false, "", results, "table", ""},
      {"--output -: the default", "", false, "-", report, "html", ""},
      {".json", "", false, "res.json", results, "json", ""},
      {".csv", "", false, "out/res.csv", results, "csv", ""},
      {".CSV any case", "", false, "RES.CSV", results, "csv", ""},
      {".txt: the table", "", false, "res.txt", results, "table", ""},
      {"the seed's name", "", false, "profiler_results.json", results, "json", ""},
      {"--format wins", "csv", false, "res.json", results, "csv", ""},
      {"--format any case", "JSON", false, "", results, "json", ""},
      {"--json", "", true, "", results, "json", ""},
      {"--json and --format json", "json", true, "", results, "json", ""},
      {"report .md", "", false, "rep.md", report, "md", ""},
      {"report .markdown", "", false, "rep.markdown", report, "md", ""},
      {"report .htm", "", false, "rep.htm", report, "html", ""},
      {"report --format markdown", "markdown", false, "", report, "md", ""},
      {"report .json", "", false, "rep.json", report, "json", ""},
      {"report .csv: no such format", "", false, "rep.csv", report, "",
       "name it .json, .md, .markdown, .html, .htm, or say --format html, md or json"},
      {"no extension", "", false, "results", results, "", "cannot tell the format of results"},
      {"unknown extension", "", false, "res.dat", results, "", "--format table, json or csv"},
      {"dot file", "", false, "dir.d/.hidden", results, "", "cannot tell"},
      {"--json against --format", "csv", true, "", results, "",
       "--json and --format csv contradict"},
      {"unknown --format", "xml", false, "", results, "",
       "--format must be table, json or csv, got 'xml'"},
      {"results has no md", "md", false, "", results, "", "--format must be"},
  };
  for (const Case& c : cases) {
    auto picked = PickFormat(c.format, c.json, c.output, c.formats);
    if (c.expected.empty()) {
      ASSERT_FALSE(picked.ok()) << c.name << ": " << *picked;
      EXPECT_NE(picked.error().find(c.error), std::string::npos)
          << c.name << ": " << picked.error();
    } else {
      ASSERT_TRUE(picked.ok()) << c.name << ": " << picked.error();
      EXPECT_EQ(*picked, c.expected) << c.name;
    }
  }
}

TEST(OutputFormat, SplitKAndTimes) {
  EXPECT_EQ(SplitKNumber("64"), 64);
  EXPECT_EQ(SplitKNumber("64 (best occupancy)"), 64);
  EXPECT_EQ(SplitKNumber(""), std::nullopt);
  EXPECT_EQ(SplitKNumber("all"), std::nullopt);
  EXPECT_EQ(SplitKText("64 (best occupancy)"), "64");
  EXPECT_EQ(SplitKText(""), "");
  EXPECT_EQ(Iso8601(0), "");
  const std::string t = Iso8601(1764754473);  // 2025-12-03 09:34:33 UTC
  ASSERT_EQ(t.size(), 25u) << t;
  EXPECT_EQ(t[10], 'T') << t;
  EXPECT_EQ(t[22], ':') << t;  // +HH:MM
}

}  // namespace
}  // namespace ckprof
