// TextTable: the client's tables (results, list, compare), fitted to the terminal.
//
// Columns take the width of their widest cell. When the rows do not fit `width`, the columns
// marked `shrink` give up space (the widest first, never below their `min`), and a cell cut
// short ends in "..."; other columns are never cut. A width of 0 means unlimited: nothing is
// cut (`--wide`, or output that is not a terminal). Widths count UTF-8 code points, so "✓"
// is one column. Cells hold users' text (names, owners, errors): their control characters are
// shown escaped (EscapeControl, common/terminal_text.h), except in a column marked `styled`,
// whose cells carry our own colour sequences and no user text.
// Plain value type; no terminal access (see TerminalWidth in the client).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ckprof {

class TextTable {
 public:
  struct Column {
    std::string header;
    bool right = false;   // right-aligned (numbers)
    bool shrink = false;  // may be cut to fit the width
    size_t min = 8;       // a shrinking column keeps at least this many columns
    bool styled = false;  // cells are ours, with colour sequences kept (never user text)
  };

  explicit TextTable(std::vector<Column> columns);

  // One row; missing cells are blank, extra cells are an error of the caller (dropped).
  void AddRow(std::vector<std::string> cells);

  // The table, one line per row after the header, each line ending in '\n'. The last column
  // is not padded. `width` 0 = unlimited.
  std::string Render(size_t width) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Display columns of UTF-8 text (code points; combining marks and wide glyphs are not told apart;
// terminal escape sequences such as colours take none).
size_t DisplayWidth(const std::string& text);
// `text` cut to at most `width` display columns, ending in "..." when it was cut.
std::string CutToWidth(const std::string& text, size_t width);
// Rows told apart (issue 31.11): what every cell of a column shares, taken out so that the
// narrowed column shows what differs.
// The parts (split at ", " outside brackets: "G=1", "[3, 3] kernel") that every one of `cells`
// holds, removed from each and returned joined by ", " ("G=1, N=32"); "" (cells unchanged) when
// there are fewer than two cells, none is shared, or a cell would be left empty.
std::string TakeCommonParts(std::vector<std::string>* cells);
// The template name every one of `cells` starts with ("DeviceGroupedConvFwd_Xdl_CShuffle" of
// "DeviceGroupedConvFwd_Xdl_CShuffle<256, 128, ...>"), removed from each, leaving "<256, ...>",
// and returned; "" (cells unchanged) when fewer than two cells or they do not all share one.
std::string TakeCommonTemplate(std::vector<std::string>* cells);

// The last `n` lines of `text` (as `tail -n`; a final newline does not start a line); n <= 0:
// all of it.
std::string LastLines(std::string_view text, int n);
// A count with its thousands grouped: 1204 -> "1,204", -5000 -> "-5,000".
std::string GroupThousands(int64_t n);
// A job's tasks by #N as a person reads them: "#2", "#1, #3", and runs of three or more as
// "#4000-#6000" (2,000 named tasks in a line, not in 2,000 numbers).
std::string TaskListText(const std::vector<int>& tasks);

}  // namespace ckprof
