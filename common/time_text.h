// The times users type for "not before" (as `sbatch --begin`, `at` and pueue's `--delay`
// take them), read into Unix times. Pure functions; any thread.
#pragma once

#include <ctime>
#include <optional>
#include <string_view>

namespace ckprof {

// The time `text` names, in local time, seen at `now`:
//   "now"
//   "+90s", "+30m", "+2h", "+1d", "+1h30m"       from now
//   "09:00", "9:30:15"                           the next such time: today, or tomorrow when
//                                                it has passed
//   "today 17:00", "tomorrow", "tomorrow 09:00"  that day, at that time (default 00:00)
//   "2026-12-01T02:00[:SS]", "2026-12-01 02:00"  a date and time
//   "2026-12-01"                                 that date's midnight
//   "1764547200"                                 Unix seconds (9 to 11 digits)
// nullopt when it is none of these (or names no real time, as "25:00" or "2026-02-30").
std::optional<double> ParseWhen(std::string_view text, std::time_t now);

// The forms ParseWhen takes, for error messages: "a time such as +30m, 09:00, tomorrow 09:00
// or 2026-12-01T02:00".
extern const char kWhenExamples[];

}  // namespace ckprof
