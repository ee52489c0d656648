#pragma once
// A 5-field cron expression (minute hour day-of-month month day-of-week), evaluated
// in UTC, for schedules such as "0 2 * * *" (nightly at 02:00).
//
// Syntax per field: `*`, numbers, ranges `a-b`, lists `a,b,c`, steps `*/n` and
// `a-b/n`; month names JAN..DEC and day names SUN..SAT, case-insensitive. Day of
// week is 0-7, both 0 and 7 meaning Sunday. The macros @yearly, @annually,
// @monthly, @weekly, @daily, @midnight and @hourly stand for a whole expression.
//
// Day semantics follow cron: when both day-of-month and day-of-week are
// restricted, a day matches if either matches; otherwise both must. A field is
// unrestricted only when it is exactly `*` (so `*/2` restricts).

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace leapfrog::coord {

// A malformed cron expression, or a search time out of range. The message names
// the field and says what was wanted.
class CronError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The answer to one search, with the number of skip steps it took (each step
// skips a whole month or day that cannot match; tests bound it).
struct CronSearch {
  std::chrono::sys_seconds next;
  int steps = 0;
};

class CronExpr {
 public:
  // Parses `text`; throws CronError for bad syntax, out-of-range values and a
  // day-of-month that never occurs in the months allowed ("0 0 31 4 *").
  static CronExpr parse(const std::string& text);

  // The first matching minute strictly after t (seconds truncated). Throws
  // CronError if t is outside the years 1-9999.
  std::chrono::sys_seconds next_after(std::chrono::sys_seconds t) const;

  // As next_after, also reporting how many skip steps the search took.
  CronSearch search_after(std::chrono::sys_seconds t) const;

  // Whether the minute holding t matches.
  bool matches(std::chrono::sys_seconds t) const;

  // The expression as given to parse.
  const std::string& text() const { return text_; }

 private:
  CronExpr() = default;
  bool day_matches(const std::chrono::year_month_day& ymd, std::chrono::weekday wd) const;

  std::string text_;
  // Bit v is set when value v is allowed.
  uint64_t minutes_ = 0;  // 0-59
  uint64_t hours_ = 0;    // 0-23
  uint64_t doms_ = 0;     // 1-31
  uint64_t months_ = 0;   // 1-12
  uint64_t dows_ = 0;     // 0-6, Sunday = 0
  bool dom_any_ = false;  // the day-of-month field is `*`
  bool dow_any_ = false;  // the day-of-week field is `*`
};

}  // namespace leapfrog::coord
