#include "common/text_table.h"

#include <algorithm>

namespace ckprof {

std::string LastLines(std::string_view text, int n) {
  if (n <= 0 || text.empty()) return std::string(text);
  size_t end = text.size();
  if (text[end - 1] == '\n') --end;  // the last line's newline
  size_t start = end;
  for (int lines = 0; start > 0; --start) {
    if (text[start - 1] == '\n' && ++lines == n) break;
  }
  return std::string(text.substr(start));
}

size_t DisplayWidth(const std::string& text) {
  size_t n = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {  // a colour: none wide
      i += 2;
      while (i < text.size() && !(text[i] >= '@' && text[i] <= '~')) ++i;
      continue;
    }
    n += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;  // count lead bytes only
  }
  return n;
}

std::string CutToWidth(const std::string& text, size_t width) {
  if (DisplayWidth(text) <= width) return text;
  if (width <= 3) return std::string(width, '.');
  // Keep width - 3 code points, then "...".
  size_t keep = width - 3, seen = 0, i = 0;
  for (; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (seen == keep) break;
      ++seen;
    }
  }
  return text.substr(0, i) + "...";
}

TextTable::TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render(size_t width) const {
  const size_t n = columns_.size();
  std::vector<size_t> w(n, 0);
  for (size_t c = 0; c < n; ++c) {
    w[c] = DisplayWidth(columns_[c].header);
    for (const auto& row : rows_) w[c] = std::max(w[c], DisplayWidth(row[c]));
  }
  if (width > 0 && n > 0) {
    size_t total = n - 1;  // one space between columns
    for (size_t x : w) total += x;
    // Take one column at a time from the widest shrinkable column that is above its minimum.
    while (total > width) {
      size_t pick = n;
      for (size_t c = 0; c < n; ++c) {
        const size_t floor = std::max(columns_[c].min, DisplayWidth(columns_[c].header));
        if (columns_[c].shrink && w[c] > floor && (pick == n || w[c] > w[pick])) pick = c;
      }
      if (pick == n) break;  // nothing left to give: the line stays longer than the width
      const size_t floor = std::max(columns_[pick].min, DisplayWidth(columns_[pick].header));
      // Shrink in one step to the next-widest shrinkable width (or what is needed).
      size_t next = floor;
      for (size_t c = 0; c < n; ++c) {
        if (c != pick && columns_[c].shrink && w[c] < w[pick]) next = std::max(next, w[c]);
      }
      const size_t give = std::min(w[pick] - next, total - width);
      w[pick] -= std::max<size_t>(give, 1);
      total -= std::max<size_t>(give, 1);
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < n; ++c) {
      std::string cell = columns_[c].shrink ? CutToWidth(cells[c], w[c]) : cells[c];
      const size_t pad = w[c] > DisplayWidth(cell) ? w[c] - DisplayWidth(cell) : 0;
      if (c) out += ' ';
      if (columns_[c].right) {
        out += std::string(pad, ' ') + cell;
      } else if (c + 1 < n) {
        out += cell + std::string(pad, ' ');
      } else {
        out += cell;
      }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::vector<std::string> header;
  for (const auto& col : columns_) header.push_back(col.header);
  std::string out = line(header);
  for (const auto& row : rows_) out += line(row);
  return out;
}

std::string GroupThousands(int64_t n) {
  const std::string digits =
      std::to_string(n < 0 ? static_cast<uint64_t>(-(n + 1)) + 1 : static_cast<uint64_t>(n));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

}  // namespace ckprof
