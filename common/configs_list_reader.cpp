// A large configs list read on several threads (see configs_list_reader.h).
#include "common/configs_list_reader.h"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/fast_json.h"
#include "common/file_util.h"
#include "common/json_util.h"
#include "common/parallel.h"

namespace ckprof {
namespace {

using json = nlohmann::ordered_json;

constexpr size_t kPartMinBytes = size_t{2} << 20;  // the least text worth a thread

// Where a list is cut: parts.size() runs; run k starts with element first_index[k] and, but for
// the last, ends at the comma at offset commas[k].
struct ListCuts {
  std::vector<size_t> commas;
  std::vector<size_t> first_index;
};

// Scans the JSON list `text` for top-level commas: the first one (the end of the first element),
// and the first at or after each of the `parts` - 1 marks that share the text out evenly.
// nullopt when text does not start with '[' or has no top-level comma.
struct ListScan {
  size_t first_element = 0;  // offset of the first element's first character
  size_t first_comma = 0;
  ListCuts cuts;
};
std::optional<ListScan> ScanList(std::string_view text, size_t parts) {
  size_t i = text.find_first_not_of(" \t\r\n");
  if (i == std::string_view::npos || text[i] != '[') return std::nullopt;
  ListScan scan;
  scan.first_element = i + 1;
  scan.cuts.first_index.push_back(0);
  size_t depth = 0, commas = 0;
  size_t mark = text.size() / parts;
  JsonStringState strings;
  for (; i < text.size(); ++i) {
    const char ch = text[i];
    if (!strings.Outside(ch)) continue;
    if (ch == '[' || ch == '{') {
      ++depth;
    } else if (ch == ']' || ch == '}') {
      if (depth <= 1) break;  // the end of the list (or not JSON: the parse will say so)
      --depth;
    } else if (ch == ',' && depth == 1) {
      if (commas++ == 0) scan.first_comma = i;
      if (i >= mark && parts > 1) {
        scan.cuts.commas.push_back(i);
        scan.cuts.first_index.push_back(commas);
        mark = text.size() / parts * (scan.cuts.commas.size() + 1);
      }
      if (scan.cuts.commas.size() + 1 >= parts) break;
    }
  }
  if (commas == 0) return std::nullopt;
  return scan;
}

// True when the one-thread reading would take the list for a configs list: its first element
// is an object with operation_type and no op_name.
bool FirstElementIsConfig(std::string_view text, const ListScan& scan) {
  json first = json::parse(text.substr(scan.first_element, scan.first_comma - scan.first_element),
                           nullptr, /*allow_exceptions=*/false);
  return first.is_object() && !first.contains("op_name") && first.contains("operation_type");
}

// Run `run` (the first of the list when `first`, the last when `last`: they hold its brackets)
// read by FastJsonValue, its first element element `first_index` of the list; nullopt when that
// reader declines any of it, or an element is no valid config.
std::optional<Conversion> FastListRun(std::string_view run, bool first, bool last,
                                      size_t first_index) {
  size_t pos = 0;
  auto skip_space = [&] {
    while (pos < run.size() &&
           (run[pos] == ' ' || run[pos] == '\n' || run[pos] == '\r' || run[pos] == '\t')) {
      ++pos;
    }
  };
  if (first) {
    skip_space();
    if (pos >= run.size() || run[pos] != '[') return std::nullopt;
    ++pos;
  }
  Conversion conv;
  conv.format = InputFormat::kConfigs;
  for (size_t index = first_index;; ++index) {
    const size_t start = pos;
    auto element = FastJsonValue(run, &pos);
    if (!element || !AddListConfig(std::move(*element), index, &conv).ok()) return std::nullopt;
    if (index == first_index) {  // room for as many more as the first's size suggests
      const size_t expected = run.size() / std::max<size_t>(pos - start, 1) * 9 / 8 + 1;
      conv.configs.reserve(expected);
      conv.records.reserve(expected);
    }
    skip_space();
    if (pos < run.size() && run[pos] == ',') {
      ++pos;
      continue;
    }
    if (last) {
      if (pos >= run.size() || run[pos] != ']') return std::nullopt;
      ++pos;
      skip_space();
    }
    if (pos != run.size()) return std::nullopt;
    return conv;
  }
}

// Reads run `k` of the cut list `text`; nullopt unless every element is a valid config. The
// fast reader first; where it declines, the document reader.
std::optional<Conversion> ConvertListRun(std::string_view text, const ListCuts& cuts, size_t k,
                                         const ConvertOptions& options) noexcept {
  const size_t runs = cuts.first_index.size();
  const size_t begin = k == 0 ? 0 : cuts.commas[k - 1] + 1;
  const size_t end = k + 1 == runs ? text.size() : cuts.commas[k];
  const std::string_view run = text.substr(begin, end - begin);
  try {
    if (auto fast = FastListRun(run, k == 0, k + 1 == runs, cuts.first_index[k])) return fast;
  } catch (...) {  // e.g. a bad_alloc: the document reader tries, then the one-thread reading
  }
  const std::string_view pieces[] = {k == 0 ? "" : "[", run, k + 1 == runs ? "" : "]"};
  return ConvertConfigsRun(pieces, 3, cuts.first_index[k], options);
}

}  // namespace

std::optional<Conversion> ConvertConfigsListInParts(std::string_view text,
                                                    const ConvertOptions& options,
                                                    unsigned threads) {
  if (threads < 2 || text.size() < kPartsMinBytes) return std::nullopt;
  const size_t parts = std::min<size_t>(threads, text.size() / kPartMinBytes);
  const auto scan = ScanList(text, parts);
  if (!scan || scan->cuts.commas.empty() || !FirstElementIsConfig(text, *scan)) {
    return std::nullopt;
  }
  const ListCuts& cuts = scan->cuts;
  const size_t runs = cuts.first_index.size();
  std::vector<std::optional<Conversion>> out(runs);
  RunInParallel(runs, [&](size_t k) { out[k] = ConvertListRun(text, cuts, k, options); });
  for (const auto& run : out) {
    if (!run) return std::nullopt;
  }
  Conversion all = std::move(*out[0]);
  all.reader_threads = runs;
  size_t records = 0, configs = 0;
  for (const auto& run : out) {
    records += run->records.size();
    configs += run->configs.size();
  }
  all.records.reserve(records);
  all.configs.reserve(configs);
  for (size_t k = 1; k < runs; ++k) {
    std::move(out[k]->records.begin(), out[k]->records.end(), std::back_inserter(all.records));
    std::move(out[k]->configs.begin(), out[k]->configs.end(), std::back_inserter(all.configs));
    out[k].reset();
  }
  return all;
}

std::optional<std::string> InflateConfigsList(std::string_view gz, uint64_t max_bytes) {
  // Inflated straight into the string (through a stream that cut whitespace runs, the
  // inflating of a million configs took twice as long). The first MiB tells whether the rest
  // is worth inflating here.
  auto text = GunzipAtMost(gz, max_bytes, [](std::string_view head) {
    const auto scan = ScanList(head, 1);
    return scan && FirstElementIsConfig(head, *scan);
  });
  if (!text || text->find('\0') != std::string::npos) return std::nullopt;
  return std::move(*text);
}

}  // namespace ckprof
