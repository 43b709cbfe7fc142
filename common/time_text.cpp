#include "common/time_text.h"

#include <cctype>
#include <string>

namespace ckprof {

const char kWhenExamples[] = "a time such as +30m, 09:00, tomorrow 09:00 or 2026-12-01T02:00";

namespace {

// Reads an unsigned number of 1..max_digits digits at text[*i]; advances *i.
std::optional<long> Digits(std::string_view text, size_t* i, size_t max_digits) {
  const size_t start = *i;
  long n = 0;
  while (*i < text.size() && std::isdigit(static_cast<unsigned char>(text[*i])) &&
         *i - start < max_digits) {
    n = n * 10 + (text[*i] - '0');
    ++*i;
  }
  if (*i == start) return std::nullopt;
  return n;
}

// "+1h30m": seconds; nullopt unless every part is a number and a unit (s, m, h, d).
std::optional<double> Offset(std::string_view text) {
  size_t i = 0;
  double total = 0;
  while (i < text.size()) {
    auto n = Digits(text, &i, 9);
    if (!n || i >= text.size()) return std::nullopt;
    const char unit = text[i++];
    const double scale = unit == 's'   ? 1
                         : unit == 'm' ? 60
                         : unit == 'h' ? 3600
                         : unit == 'd' ? 86400
                                       : 0;
    if (scale == 0) return std::nullopt;
    total += static_cast<double>(*n) * scale;
  }
  return text.empty() ? std::nullopt : std::optional<double>(total);
}

struct ClockTime {
  int hour = 0, minute = 0, second = 0;
};

// "9:30", "09:00", "23:59:59"
std::optional<ClockTime> Clock(std::string_view text) {
  size_t i = 0;
  ClockTime c;
  auto h = Digits(text, &i, 2);
  if (!h || i >= text.size() || text[i++] != ':') return std::nullopt;
  auto m = Digits(text, &i, 2);
  if (!m || i - (text.find(':') + 1) != 2) return std::nullopt;
  c.hour = static_cast<int>(*h);
  c.minute = static_cast<int>(*m);
  if (i < text.size()) {
    if (text[i++] != ':') return std::nullopt;
    const size_t s_start = i;
    auto s = Digits(text, &i, 2);
    if (!s || i - s_start != 2 || i != text.size()) return std::nullopt;
    c.second = static_cast<int>(*s);
  }
  if (c.hour > 23 || c.minute > 59 || c.second > 59) return std::nullopt;
  return c;
}

// The local time `days` after `now`'s date, at `c`; nullopt when mktime cannot say.
std::optional<double> OnDay(std::time_t now, int days, const ClockTime& c) {
  std::tm tm{};
  if (!localtime_r(&now, &tm)) return std::nullopt;
  tm.tm_mday += days;
  tm.tm_hour = c.hour;
  tm.tm_min = c.minute;
  tm.tm_sec = c.second;
  tm.tm_isdst = -1;
  const std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return static_cast<double>(t);
}

// "2026-12-01", "2026-12-01T02:00", "2026-12-01 02:00:30"
std::optional<double> DateTime(std::string_view text) {
  size_t i = 0;
  auto y = Digits(text, &i, 4);
  if (!y || i != 4 || i >= text.size() || text[i++] != '-') return std::nullopt;
  auto mo = Digits(text, &i, 2);
  if (!mo || i != 7 || i >= text.size() || text[i++] != '-') return std::nullopt;
  auto d = Digits(text, &i, 2);
  if (!d || i != 10) return std::nullopt;
  ClockTime c;
  if (i < text.size()) {
    if (text[i] != 'T' && text[i] != ' ') return std::nullopt;
    auto clock = Clock(text.substr(i + 1));
    if (!clock) return std::nullopt;
    c = *clock;
  }
  std::tm tm{};
  tm.tm_year = static_cast<int>(*y) - 1900;
  tm.tm_mon = static_cast<int>(*mo) - 1;
  tm.tm_mday = static_cast<int>(*d);
  tm.tm_hour = c.hour;
  tm.tm_min = c.minute;
  tm.tm_sec = c.second;
  tm.tm_isdst = -1;
  const std::tm asked = tm;
  const std::time_t t = std::mktime(&tm);
  // mktime normalizes "2026-02-30" to March 2: such a date names no day.
  if (t == static_cast<std::time_t>(-1) || tm.tm_mday != asked.tm_mday ||
      tm.tm_mon != asked.tm_mon || tm.tm_year != asked.tm_year) {
    return std::nullopt;
  }
  return static_cast<double>(t);
}

}  // namespace

std::optional<double> ParseWhen(std::string_view text, std::time_t now) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text == "now") return static_cast<double>(now);
  if (!text.empty() && text[0] == '+') {
    auto off = Offset(text.substr(1));
    if (!off) return std::nullopt;
    return static_cast<double>(now) + *off;
  }
  for (auto [word, days] : {std::pair<std::string_view, int>{"today", 0}, {"tomorrow", 1}}) {
    if (text.substr(0, word.size()) != word) continue;
    std::string_view rest = text.substr(word.size());
    if (rest.empty()) return OnDay(now, days, ClockTime{});
    if (rest[0] != ' ') return std::nullopt;
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    auto c = Clock(rest);
    if (!c) return std::nullopt;
    return OnDay(now, days, *c);
  }
  if (auto c = Clock(text)) {
    auto today = OnDay(now, 0, *c);
    if (today && *today > static_cast<double>(now)) return today;
    return OnDay(now, 1, *c);
  }
  if (text.size() >= 9 && text.size() <= 11 &&
      text.find_first_not_of("0123456789") == std::string_view::npos) {
    return std::stod(std::string(text));
  }
  return DateTime(text);
}

}  // namespace ckprof
