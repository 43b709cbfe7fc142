#include "common/text_table.h"

#include <algorithm>

#include "common/terminal_text.h"

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

namespace {

// `text` split at ", " outside (), [], <> and {}.
std::vector<std::string> SplitParts(const std::string& text) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '(' || c == '[' || c == '<' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '>' || c == '}') && depth > 0) --depth;
    if (depth == 0 && c == ',' && i + 1 < text.size() && text[i + 1] == ' ') {
      parts.push_back(text.substr(start, i - start));
      start = i + 2;
      ++i;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

std::string TakeCommonParts(std::vector<std::string>* cells) {
  if (cells->size() < 2) return "";
  std::vector<std::vector<std::string>> split;
  for (const auto& c : *cells) split.push_back(SplitParts(c));
  std::vector<std::string> common;
  for (const auto& part : split.front()) {
    const bool everywhere = std::all_of(split.begin() + 1, split.end(), [&](const auto& parts) {
      return std::find(parts.begin(), parts.end(), part) != parts.end();
    });
    if (everywhere && std::find(common.begin(), common.end(), part) == common.end()) {
      common.push_back(part);
    }
  }
  if (common.empty()) return "";
  std::vector<std::string> rest;
  for (const auto& parts : split) {
    std::vector<std::string> kept;
    for (const auto& p : parts) {
      if (std::find(common.begin(), common.end(), p) == common.end()) kept.push_back(p);
    }
    if (kept.empty()) return "";  // nothing would tell this row apart: leave them whole
    rest.push_back(Join(kept));
  }
  *cells = std::move(rest);
  return Join(common);
}

std::string TakeCommonTemplate(std::vector<std::string>* cells) {
  if (cells->size() < 2) return "";
  const std::string& first = cells->front();
  const size_t open = first.find('<');
  if (open == std::string::npos || open == 0) return "";
  const std::string name = first.substr(0, open);
  for (const auto& c : *cells) {
    if (c.compare(0, open + 1, name + "<") != 0) return "";
  }
  for (auto& c : *cells) c.erase(0, open);
  return name;
}

TextTable::TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  for (size_t c = 0; c < cells.size(); ++c) {
    if (!columns_[c].styled && HasControl(cells[c])) cells[c] = EscapeControl(cells[c]);
  }
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

std::string TaskListText(const std::vector<int>& tasks) {
  std::string text;
  for (size_t i = 0; i < tasks.size();) {
    size_t end = i + 1;
    while (end < tasks.size() && tasks[end] == tasks[end - 1] + 1) ++end;
    if (end - i < 3) end = i + 1;
    text += (text.empty() ? "#" : ", #") + std::to_string(tasks[i]);
    if (end - i >= 3) text += "-#" + std::to_string(tasks[end - 1]);
    i = end;
  }
  return text;
}

}  // namespace ckprof
