#include "common/time_text.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <string>

namespace ckprof {
namespace {

// Local time in a zone with summer time, so that "tomorrow" across a change is looked at.
class ParseWhenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tz = std::getenv("TZ");
    saved_ = tz ? std::optional<std::string>(tz) : std::nullopt;
    setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1);  // Berlin's rule, without tzdata
    tzset();
  }
  void TearDown() override {
    if (saved_) {
      setenv("TZ", saved_->c_str(), 1);
    } else {
      unsetenv("TZ");
    }
    tzset();
  }
  // The local time y-m-d h:m:s as Unix seconds.
  static double Local(int y, int mo, int d, int h, int mi, int s = 0) {
    std::tm tm{};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    tm.tm_isdst = -1;
    return static_cast<double>(std::mktime(&tm));
  }
  std::optional<std::string> saved_;
};

TEST_F(ParseWhenTest, EveryFormItTakes) {
  const std::time_t now = static_cast<std::time_t>(Local(2026, 12, 3, 13, 30));
  const double n = static_cast<double>(now);
  struct Case {
    const char* text;
    double want;
  };
  const Case cases[] = {
      {"now", n},
      {"+90s", n + 90},
      {"+30m", n + 1800},
      {"+2h", n + 7200},
      {"+1d", n + 86400},
      {"+1h30m", n + 5400},
      {"17:00", Local(2026, 12, 3, 17, 0)},  // later today
      {"09:00", Local(2026, 12, 4, 9, 0)},   // passed: tomorrow
      {"9:05:30", Local(2026, 12, 4, 9, 5, 30)},
      {"13:30", Local(2026, 12, 4, 13, 30)},  // now is not "after now"
      {"today 17:00", Local(2026, 12, 3, 17, 0)},
      {"today 09:00", Local(2026, 12, 3, 9, 0)},  // said so: today, even past
      {"tomorrow", Local(2026, 12, 4, 0, 0)},
      {"tomorrow 09:00", Local(2026, 12, 4, 9, 0)},
      {"  tomorrow  09:00 ", Local(2026, 12, 4, 9, 0)},
      {"2026-12-01T02:00", Local(2026, 12, 1, 2, 0)},
      {"2026-12-01 02:00:30", Local(2026, 12, 1, 2, 0, 30)},
      {"2026-12-24", Local(2026, 12, 24, 0, 0)},
      {"1764547200", 1764547200},
  };
  for (const auto& c : cases) {
    auto got = ParseWhen(c.text, now);
    ASSERT_TRUE(got.has_value()) << c.text;
    EXPECT_EQ(*got, c.want) << c.text;
  }
}

TEST_F(ParseWhenTest, TomorrowAcrossTheChangeOfSummerTime) {
  // 2026-10-25 has 25 hours in Berlin: tomorrow 09:00 is 09:00 on the clock, not now + 24 h.
  const std::time_t now = static_cast<std::time_t>(Local(2026, 10, 24, 9, 0));
  EXPECT_EQ(*ParseWhen("tomorrow 09:00", now), Local(2026, 10, 25, 9, 0));
  EXPECT_EQ(*ParseWhen("tomorrow 09:00", now) - static_cast<double>(now), 25 * 3600.0);
}

TEST_F(ParseWhenTest, WhatItRefuses) {
  const std::time_t now = static_cast<std::time_t>(Local(2026, 12, 3, 13, 30));
  for (const char* text :
       {"",           "+",         "+2",         "+2x",        "+h",       "-2h",
        "25:00",      "12:60",     "12:5",       "12:00:5",    "123:00",   "tomorrow9:00",
        "tomorrow 9", "yesterday", "2026-02-30", "2026-13-01", "2026-1-1", "2026-12-01X02:00",
        "12345678",   "next week", "now!"}) {
    EXPECT_FALSE(ParseWhen(text, now).has_value()) << "'" << text << "'";
  }
}

}  // namespace
}  // namespace ckprof
