#include "coordinator/schedule/cron.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace leapfrog::coord {
namespace {

using namespace std::chrono;

// "2024-03-01 02:00" or "2024-03-01 02:00:30", UTC.
sys_seconds at(const std::string& s) {
  int y = 0;
  int mo = 0;
  int d = 0;
  int h = 0;
  int mi = 0;
  int sec = 0;
  const int n = std::sscanf(s.c_str(), "%d-%d-%d %d:%d:%d", &y, &mo, &d, &h, &mi, &sec);
  if (n < 5) throw std::invalid_argument("bad test time \"" + s + "\"");
  const year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)},
                           day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) throw std::invalid_argument("bad test date \"" + s + "\"");
  return sys_days{ymd} + hours{h} + minutes{mi} + seconds{sec};
}

// "2024-03-01 02:00" (with ":ss" only when the seconds are not zero).
std::string show(sys_seconds t) {
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const auto s = (t - day).count();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u %02lld:%02lld", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60));
  std::string out = buf;
  if (s % 60 != 0) out += ":" + std::to_string(s % 60);
  return out;
}

std::string next(const std::string& expr, const std::string& from) {
  return show(CronExpr::parse(expr).next_after(at(from)));
}

// The next `n` matches after `from`.
std::vector<std::string> series(const std::string& expr, const std::string& from, int n) {
  const CronExpr e = CronExpr::parse(expr);
  std::vector<std::string> out;
  sys_seconds t = at(from);
  for (int i = 0; i < n; ++i) {
    t = e.next_after(t);
    out.push_back(show(t));
  }
  return out;
}

// The message parse throws, or "" if it does not throw.
std::string parse_error(const std::string& expr) {
  try {
    CronExpr::parse(expr);
  } catch (const CronError& e) {
    return e.what();
  }
  return "";
}

TEST(CronTest, NightlyAroundTwoAm) {
  const std::string nightly = "0 2 * * *";
  EXPECT_EQ(next(nightly, "2024-03-05 00:00"), "2024-03-05 02:00");
  EXPECT_EQ(next(nightly, "2024-03-05 01:59:59"), "2024-03-05 02:00");
  EXPECT_EQ(next(nightly, "2024-03-05 02:00"), "2024-03-06 02:00");
  EXPECT_EQ(next(nightly, "2024-03-05 02:00:59"), "2024-03-06 02:00");
  EXPECT_EQ(next(nightly, "2024-03-05 02:01"), "2024-03-06 02:00");
  EXPECT_EQ(next(nightly, "2024-03-05 23:59:59"), "2024-03-06 02:00");
}

TEST(CronTest, NightlyAcrossMonthYearAndLeapDay) {
  const std::string nightly = "0 2 * * *";
  EXPECT_EQ(next(nightly, "2024-01-31 03:00"), "2024-02-01 02:00");
  EXPECT_EQ(next(nightly, "2024-04-30 02:00"), "2024-05-01 02:00");
  EXPECT_EQ(next(nightly, "2023-12-31 02:30"), "2024-01-01 02:00");
  EXPECT_EQ(next(nightly, "2024-02-28 03:00"), "2024-02-29 02:00");
  EXPECT_EQ(next(nightly, "2024-02-29 02:00"), "2024-03-01 02:00");
  EXPECT_EQ(next(nightly, "2023-02-28 03:00"), "2023-03-01 02:00");
  EXPECT_EQ(next(nightly, "2100-02-28 03:00"), "2100-03-01 02:00");  // 2100 is no leap year
}

TEST(CronTest, EveryQuarterHour) {
  EXPECT_EQ(series("*/15 * * * *", "2024-05-10 10:00", 5),
            (std::vector<std::string>{"2024-05-10 10:15", "2024-05-10 10:30", "2024-05-10 10:45",
                                      "2024-05-10 11:00", "2024-05-10 11:15"}));
  EXPECT_EQ(next("*/15 * * * *", "2024-05-10 10:14:59"), "2024-05-10 10:15");
  EXPECT_EQ(next("*/15 * * * *", "2023-12-31 23:59"), "2024-01-01 00:00");
}

TEST(CronTest, ListsRangesAndSteps) {
  const std::string office = "5,35 9-17 * * *";
  EXPECT_EQ(next(office, "2024-05-10 08:00"), "2024-05-10 09:05");
  EXPECT_EQ(next(office, "2024-05-10 09:05"), "2024-05-10 09:35");
  EXPECT_EQ(next(office, "2024-05-10 09:35"), "2024-05-10 10:05");
  EXPECT_EQ(next(office, "2024-05-10 17:35"), "2024-05-11 09:05");
  EXPECT_EQ(series("0-30/10 6 * * *", "2024-05-10 00:00", 5),
            (std::vector<std::string>{"2024-05-10 06:00", "2024-05-10 06:10", "2024-05-10 06:20",
                                      "2024-05-10 06:30", "2024-05-11 06:00"}));
  EXPECT_EQ(series("0 0 1,15 */5 *", "2024-01-01 00:00", 4),
            (std::vector<std::string>{"2024-01-15 00:00", "2024-06-01 00:00", "2024-06-15 00:00",
                                      "2024-11-01 00:00"}));
  // A list mixing a plain value, a range and a stepped range.
  EXPECT_EQ(series("0 1,4-5,20-23/2 * * *", "2024-05-10 00:00", 6),
            (std::vector<std::string>{"2024-05-10 01:00", "2024-05-10 04:00", "2024-05-10 05:00",
                                      "2024-05-10 20:00", "2024-05-10 22:00", "2024-05-11 01:00"}));
}

TEST(CronTest, MonthAndDayNamesIgnoreCase) {
  // 2024-05-10 is a Friday.
  EXPECT_EQ(next("0 12 * * MON-FRI", "2024-05-10 12:00"), "2024-05-13 12:00");
  EXPECT_EQ(next("0 12 * * mon-fri", "2024-05-10 12:00"), "2024-05-13 12:00");
  EXPECT_EQ(series("0 0 1 jan,Jul *", "2024-02-01 00:00", 3),
            (std::vector<std::string>{"2024-07-01 00:00", "2025-01-01 00:00", "2025-07-01 00:00"}));
  EXPECT_EQ(series("0 0 1 JAN-DEC/3 *", "2024-01-01 00:00", 3),
            (std::vector<std::string>{"2024-04-01 00:00", "2024-07-01 00:00", "2024-10-01 00:00"}));
  // SUN at the top of a range is day 7, so FRI-SUN is a weekend.
  EXPECT_EQ(series("0 0 * * FRI-SUN", "2024-05-09 00:00", 4),
            (std::vector<std::string>{"2024-05-10 00:00", "2024-05-11 00:00", "2024-05-12 00:00",
                                      "2024-05-17 00:00"}));
  EXPECT_EQ(series("0 0 * * SUN-SUN", "2024-05-09 00:00", 2),
            (std::vector<std::string>{"2024-05-12 00:00", "2024-05-19 00:00"}));
}

TEST(CronTest, DayOfWeekSevenIsSunday) {
  const auto sundays = series("0 3 * * 0", "2024-05-01 00:00", 5);
  EXPECT_EQ(sundays[0], "2024-05-05 03:00");
  EXPECT_EQ(series("0 3 * * 7", "2024-05-01 00:00", 5), sundays);
  EXPECT_EQ(series("0 3 * * SUN", "2024-05-01 00:00", 5), sundays);
  EXPECT_EQ(series("0 3 * * 0,7", "2024-05-01 00:00", 5), sundays);
  // 5-7 is Friday to Sunday.
  EXPECT_EQ(series("0 3 * * 5-7", "2024-05-09 00:00", 4),
            (std::vector<std::string>{"2024-05-10 03:00", "2024-05-11 03:00", "2024-05-12 03:00",
                                      "2024-05-17 03:00"}));
  // `*` is every day once, not Sunday twice.
  EXPECT_EQ(series("0 3 * * */1", "2024-05-09 00:00", 2),
            (std::vector<std::string>{"2024-05-09 03:00", "2024-05-10 03:00"}));
}

TEST(CronTest, DayOfMonthOrDayOfWeekWhenBothRestricted) {
  // May 2024: Fridays are 3, 10, 17, 24, 31.
  EXPECT_EQ(series("0 0 13 * FRI", "2024-05-01 00:00", 4),
            (std::vector<std::string>{"2024-05-03 00:00", "2024-05-10 00:00", "2024-05-13 00:00",
                                      "2024-05-17 00:00"}));
  EXPECT_EQ(series("0 0 13 * *", "2024-05-01 00:00", 2),
            (std::vector<std::string>{"2024-05-13 00:00", "2024-06-13 00:00"}));
  EXPECT_EQ(series("0 0 * * FRI", "2024-05-01 00:00", 2),
            (std::vector<std::string>{"2024-05-03 00:00", "2024-05-10 00:00"}));
  // A stepped day-of-month is restricted too: odd days or Mondays.
  EXPECT_EQ(series("0 0 */2 * MON", "2024-04-30 12:00", 5),
            (std::vector<std::string>{"2024-05-01 00:00", "2024-05-03 00:00", "2024-05-05 00:00",
                                      "2024-05-06 00:00", "2024-05-07 00:00"}));
  // The month still has to match.
  EXPECT_EQ(next("0 0 13 6 FRI", "2024-05-01 00:00"), "2024-06-07 00:00");
}

TEST(CronTest, LeapDayOnlyInLeapYears) {
  EXPECT_EQ(next("0 0 29 2 *", "2024-03-01 00:00"), "2028-02-29 00:00");
  EXPECT_EQ(next("0 0 29 2 *", "2024-02-28 23:59:59"), "2024-02-29 00:00");
  EXPECT_EQ(next("0 0 29 2 *", "1997-01-01 00:00"), "2000-02-29 00:00");  // 400-year rule
  EXPECT_EQ(next("0 0 29 2 *", "2096-03-01 00:00"), "2104-02-29 00:00");  // 2100 is no leap year
  EXPECT_EQ(next("30 12 29 FEB *", "2024-02-29 12:30"), "2028-02-29 12:30");
}

TEST(CronTest, DayThirtyOneSkipsShortMonths) {
  EXPECT_EQ(series("0 0 31 * *", "2024-01-31 00:00", 4),
            (std::vector<std::string>{"2024-03-31 00:00", "2024-05-31 00:00", "2024-07-31 00:00",
                                      "2024-08-31 00:00"}));
}

TEST(CronTest, Macros) {
  const sys_seconds from = at("2024-05-10 10:20:30");
  const std::vector<std::pair<std::string, std::string>> macros = {
      {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
      {"@hourly", "0 * * * *"}, {"@DAILY", "0 0 * * *"},    {"  @hourly ", "0 * * * *"},
  };
  for (const auto& [macro, fields] : macros) {
    SCOPED_TRACE(macro);
    EXPECT_EQ(CronExpr::parse(macro).next_after(from), CronExpr::parse(fields).next_after(from));
  }
  EXPECT_EQ(next("@weekly", "2024-05-10 00:00"), "2024-05-12 00:00");
  EXPECT_EQ(next("@hourly", "2024-05-10 10:20"), "2024-05-10 11:00");
}

TEST(CronTest, TextIsTheInput) {
  EXPECT_EQ(CronExpr::parse("0 2 * * *").text(), "0 2 * * *");
  EXPECT_EQ(CronExpr::parse("  0  2 * *\t*").text(), "  0  2 * *\t*");
  EXPECT_EQ(CronExpr::parse("@daily").text(), "@daily");
}

TEST(CronTest, NextIsStrictlyAfter) {
  const CronExpr every_minute = CronExpr::parse("* * * * *");
  EXPECT_EQ(show(every_minute.next_after(at("2024-05-10 10:20"))), "2024-05-10 10:21");
  EXPECT_EQ(show(every_minute.next_after(at("2024-05-10 10:20:59"))), "2024-05-10 10:21");
  // Feeding each answer back walks forward one match at a time.
  const CronExpr e = CronExpr::parse("0 2 * * *");
  sys_seconds t = at("2024-05-10 02:00");
  for (int i = 0; i < 3; ++i) {
    const sys_seconds n = e.next_after(t);
    EXPECT_GT(n, t);
    EXPECT_EQ(n - t, hours{24});
    t = n;
  }
}

TEST(CronTest, Matches) {
  const CronExpr e = CronExpr::parse("0 2 * * *");
  EXPECT_TRUE(e.matches(at("2024-05-10 02:00")));
  EXPECT_TRUE(e.matches(at("2024-05-10 02:00:59")));
  EXPECT_FALSE(e.matches(at("2024-05-10 02:01")));
  EXPECT_FALSE(e.matches(at("2024-05-10 03:00")));
  const CronExpr friday_13 = CronExpr::parse("0 0 13 * FRI");
  EXPECT_TRUE(friday_13.matches(at("2024-05-13 00:00")));  // a Monday, but the 13th
  EXPECT_TRUE(friday_13.matches(at("2024-05-10 00:00")));  // a Friday
  EXPECT_FALSE(friday_13.matches(at("2024-05-11 00:00")));
}

TEST(CronTest, SearchTimeOutOfRange) {
  const CronExpr e = CronExpr::parse("0 2 * * *");
  const sys_seconds far = sys_days{year{10000} / 1 / 1};
  EXPECT_THROW(e.next_after(far), CronError);
  EXPECT_THROW(e.next_after(sys_days{year{0} / 12 / 31}), CronError);
  EXPECT_EQ(show(e.next_after(at("9999-12-31 12:00"))), "10000-01-01 02:00");
}

TEST(CronTest, ImpossibleDayOfMonthIsRejected) {
  EXPECT_EQ(parse_error("0 0 31 4 *"),
            "bad cron day-of-month field \"31\": day 31 never occurs in month 4");
  EXPECT_EQ(parse_error("0 0 30 2 *"),
            "bad cron day-of-month field \"30\": day 30 never occurs in month 2");
  EXPECT_EQ(parse_error("0 0 30-31 FEB *"),
            "bad cron day-of-month field \"30-31\": day 30 never occurs in month 2");
  EXPECT_EQ(parse_error("0 0 31 4,6,9,11 *"),
            "bad cron day-of-month field \"31\": day 31 never occurs in months 4,6,9,11");
  // These fire: some month has the day, or the day of week can match instead.
  EXPECT_EQ(parse_error("0 0 31 4-5 *"), "");
  EXPECT_EQ(parse_error("0 0 29 2 *"), "");
  EXPECT_EQ(parse_error("0 0 31 4 MON"), "");
  EXPECT_EQ(next("0 0 31 4 MON", "2024-04-01 00:00"), "2024-04-08 00:00");
}

TEST(CronTest, MalformedExpressions) {
  const std::string five = "want 5 fields (minute hour day-of-month month day-of-week), got ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "bad cron expression \"\": " + five + "0"},
      {"   ", "bad cron expression \"   \": " + five + "0"},
      {"0 2 *", "bad cron expression \"0 2 *\": " + five + "3"},
      {"* * * *", "bad cron expression \"* * * *\": " + five + "4"},
      {"* * * * * *", "bad cron expression \"* * * * * *\": " + five + "6"},
      {"0 2 * * * /bin/true", "bad cron expression \"0 2 * * * /bin/true\": " + five + "6"},
      // Out of range.
      {"60 * * * *", "bad cron minute field \"60\": want 0-59"},
      {"* 25 * * *", "bad cron hour field \"25\": want 0-23"},
      {"* 24 * * *", "bad cron hour field \"24\": want 0-23"},
      {"* * 0 * *", "bad cron day-of-month field \"0\": want 1-31"},
      {"* * 32 * *", "bad cron day-of-month field \"32\": want 1-31"},
      {"* * * 0 *", "bad cron month field \"0\": want 1-12 or JAN-DEC"},
      {"* * * 13 *", "bad cron month field \"13\": want 1-12 or JAN-DEC"},
      {"* * * * 8", "bad cron day-of-week field \"8\": want 0-7 or SUN-SAT"},
      {"1,2,99 * * * *", "bad cron minute field \"1,2,99\": want 0-59"},
      {"0-60 * * * *", "bad cron minute field \"0-60\": want 0-59"},
      {"99999999999999999999 * * * *", "bad cron minute field \"99999999999999999999\": want 0-59"},
      // Steps.
      {"*/0 * * * *", "bad cron minute field \"*/0\": want step 1-60"},
      {"*/61 * * * *", "bad cron minute field \"*/61\": want step 1-60"},
      {"* */25 * * *", "bad cron hour field \"*/25\": want step 1-24"},
      {"* * * * */8", "bad cron day-of-week field \"*/8\": want step 1-7"},
      {"0-30/0 * * * *", "bad cron minute field \"0-30/0\": want step 1-60"},
      {"*/ * * * *", "bad cron minute field \"*/\": want step 1-60"},
      {"*/x * * * *", "bad cron minute field \"*/x\": want step 1-60"},
      {"*/-1 * * * *", "bad cron minute field \"*/-1\": want step 1-60"},
      {"*/2/3 * * * *", "bad cron minute field \"*/2/3\": want step 1-60"},
      {"5/15 * * * *",
       "bad cron minute field \"5/15\": want a step only after * or a range, like */15 or 5-59/15"},
      // Reversed ranges.
      {"5-1 * * * *", "bad cron minute field \"5-1\": want a range low-high with low <= high"},
      {"* * * DEC-JAN *",
       "bad cron month field \"DEC-JAN\": want a range low-high with low <= high"},
      {"* * * * 5-0", "bad cron day-of-week field \"5-0\": want a range low-high with low <= high"},
      // Garbage.
      {"x * * * *", "bad cron minute field \"x\": want 0-59"},
      {"-1 * * * *", "bad cron minute field \"-1\": want 0-59"},
      {"+1 * * * *", "bad cron minute field \"+1\": want 0-59"},
      {"1- * * * *", "bad cron minute field \"1-\": want 0-59"},
      {"- * * * *", "bad cron minute field \"-\": want 0-59"},
      {"1-2-3 * * * *", "bad cron minute field \"1-2-3\": want 0-59"},
      {"*-5 * * * *", "bad cron minute field \"*-5\": want 0-59"},
      {"** * * * *", "bad cron minute field \"**\": want 0-59"},
      {"1.5 * * * *", "bad cron minute field \"1.5\": want 0-59"},
      {"0x1 * * * *", "bad cron minute field \"0x1\": want 0-59"},
      {"? * * * *", "bad cron minute field \"?\": want 0-59"},
      {"MON * * * *", "bad cron minute field \"MON\": want 0-59"},
      {"* * * JANUARY *", "bad cron month field \"JANUARY\": want 1-12 or JAN-DEC"},
      {"* * * MON *", "bad cron month field \"MON\": want 1-12 or JAN-DEC"},
      {"* * * * JAN", "bad cron day-of-week field \"JAN\": want 0-7 or SUN-SAT"},
      {"* * * * FOO", "bad cron day-of-week field \"FOO\": want 0-7 or SUN-SAT"},
      {"* * * * SU", "bad cron day-of-week field \"SU\": want 0-7 or SUN-SAT"},
      // Empty list items.
      {"1, * * * *", "bad cron minute field \"1,\": want a value on each side of every comma"},
      {",1 * * * *", "bad cron minute field \",1\": want a value on each side of every comma"},
      {"1,,2 * * * *", "bad cron minute field \"1,,2\": want a value on each side of every comma"},
      {", * * * *", "bad cron minute field \",\": want a value on each side of every comma"},
      {"* * * * MON,",
       "bad cron day-of-week field \"MON,\": want a value on each side of every comma"},
      // Macros.
      {"@reboot",
       "unknown cron macro \"@reboot\": want @yearly, @annually, @monthly, @weekly, @daily, "
       "@midnight or @hourly"},
      {"@",
       "unknown cron macro \"@\": want @yearly, @annually, @monthly, @weekly, @daily, "
       "@midnight or @hourly"},
      {"@daily *", "bad cron expression \"@daily *\": want @daily alone"},
  };
  for (const auto& [expr, message] : cases) {
    SCOPED_TRACE("expression \"" + expr + "\"");
    EXPECT_EQ(parse_error(expr), message);
  }
}

// Random valid expressions, each with the sets it stands for worked out
// independently, checked against a day-by-day oracle.
class RandomCron {
 public:
  explicit RandomCron(uint32_t seed) : rng_(seed) {}

  struct Expr {
    std::string text;
    std::array<uint64_t, 5> masks{};  // minute, hour, day-of-month, month, day-of-week (0-6)
    bool dom_any = false;
    bool dow_any = false;
  };

  Expr make() {
    // One in ten is rare: a late day of one month, which may never occur.
    if (uniform(0, 9) == 0) {
      Expr e;
      const int minute = uniform(0, 59);
      const int hour = uniform(0, 23);
      const int dom = uniform(28, 31);
      const int mon = uniform(1, 12);
      e.text = std::to_string(minute) + " " + std::to_string(hour) + " " + std::to_string(dom) +
               " " + value(3, mon) + " *";
      e.masks = {uint64_t{1} << minute, uint64_t{1} << hour, uint64_t{1} << dom, uint64_t{1} << mon,
                 0x7f};
      e.dow_any = true;
      return e;
    }
    static constexpr std::array<std::array<int, 2>, 5> kRanges = {
        {{0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 7}}};
    Expr e;
    for (int f = 0; f < 5; ++f) {
      bool any = false;
      const std::string text = field(f, kRanges[f][0], kRanges[f][1], e.masks[f], any);
      e.text += (f == 0 ? "" : " ") + text;
      if (f == 2) e.dom_any = any;
      if (f == 4) e.dow_any = any;
    }
    return e;
  }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  sys_seconds time() {
    const sys_seconds lo = sys_days{year{1970} / 1 / 1};
    const sys_seconds hi = sys_days{year{2400} / 1 / 1};
    return lo + seconds{std::uniform_int_distribution<int64_t>(0, (hi - lo).count())(rng_)};
  }

 private:
  // One field's text; sets the bits it allows in `mask`, and `any` if it is `*`.
  std::string field(int f, int lo, int hi, uint64_t& mask, bool& any) {
    const int span = f == 4 ? 7 : hi - lo + 1;
    auto add = [&](int a, int b, int step) {
      for (int v = a; v <= b; v += step) mask |= uint64_t{1} << (f == 4 ? v % 7 : v);
    };
    if (uniform(0, 2) == 0) {
      any = true;
      add(lo, lo + span - 1, 1);
      return "*";
    }
    std::string out;
    const int items = uniform(1, 3);
    for (int i = 0; i < items; ++i) {
      if (i > 0) out += ",";
      const int a = uniform(lo, hi);
      const int b = uniform(a, hi);
      const int step = uniform(1, span);
      switch (uniform(0, 3)) {
        case 0:
          out += value(f, a);
          add(a, a, 1);
          break;
        case 1:
          out += value(f, a) + "-" + value(f, b);
          add(a, b, 1);
          break;
        case 2:
          out += value(f, a) + "-" + value(f, b) + "/" + std::to_string(step);
          add(a, b, step);
          break;
        default:
          out += "*/" + std::to_string(step);
          add(lo, lo + span - 1, step);
          break;
      }
    }
    return out;
  }

  // A number, or sometimes a name in random case.
  std::string value(int f, int v) {
    static constexpr std::array<const char*, 12> kMonths = {
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"};
    static constexpr std::array<const char*, 7> kDays = {"sun", "mon", "tue", "wed",
                                                         "thu", "fri", "sat"};
    std::string name;
    if (f == 3 && uniform(0, 1) == 0) name = kMonths[v - 1];
    if (f == 4 && v < 7 && uniform(0, 1) == 0) name = kDays[v];
    if (name.empty()) return std::to_string(v);
    for (char& c : name) {
      if (uniform(0, 1) == 0) c = static_cast<char>(c - 'a' + 'A');
    }
    return name;
  }

  std::mt19937 rng_;
};

bool oracle_day(const RandomCron::Expr& e, sys_days d) {
  const year_month_day ymd{d};
  if (!((e.masks[3] >> static_cast<unsigned>(ymd.month())) & 1)) return false;
  const bool dom = (e.masks[2] >> static_cast<unsigned>(ymd.day())) & 1;
  const bool dow = (e.masks[4] >> weekday{d}.c_encoding()) & 1;
  return (e.dom_any || e.dow_any) ? (dom && dow) : (dom || dow);
}

bool oracle_minute(const RandomCron::Expr& e, sys_seconds t) {
  const sys_days d = floor<days>(t);
  const auto s = (t - d).count();
  return oracle_day(e, d) && ((e.masks[1] >> (s / 3600)) & 1) &&
         ((e.masks[0] >> (s / 60 % 60)) & 1);
}

// Whether the day-of-month can ever fire given the months (Feb has 29 days).
bool oracle_possible(const RandomCron::Expr& e) {
  if (e.dom_any || !e.dow_any) return true;
  static constexpr std::array<int, 13> kMaxDays = {0,  31, 29, 31, 30, 31, 30,
                                                   31, 31, 30, 31, 30, 31};
  for (int m = 1; m <= 12; ++m) {
    for (int d = 1; d <= kMaxDays[m]; ++d) {
      if (((e.masks[3] >> m) & 1) && ((e.masks[2] >> d) & 1)) return true;
    }
  }
  return false;
}

TEST(CronTest, RandomExpressionsMatchOracleInBoundedSteps) {
  // A search skips a month or a day per step; the worst case is Feb 29 from
  // 2096-03-01 (8 years of 11 skipped months and 28 skipped Feb days).
  constexpr int kMaxSteps = 400;
  RandomCron gen(20240510);
  int valid = 0;
  int rejected = 0;
  int max_steps = 0;
  while (valid < 1000) {
    const RandomCron::Expr e = gen.make();
    SCOPED_TRACE("expression \"" + e.text + "\"");
    CronExpr expr = CronExpr::parse("* * * * *");
    try {
      expr = CronExpr::parse(e.text);
    } catch (const CronError& err) {
      // Only an expression that can never fire may be rejected.
      ASSERT_FALSE(oracle_possible(e)) << err.what();
      ++rejected;
      continue;
    }
    ASSERT_TRUE(oracle_possible(e));
    ++valid;
    for (const sys_seconds t : {gen.time(), gen.time(), at("2096-03-01 00:00")}) {
      SCOPED_TRACE("from " + show(t));
      const CronSearch found = expr.search_after(t);
      max_steps = std::max(max_steps, found.steps);
      EXPECT_LE(found.steps, kMaxSteps);
      const sys_seconds n = found.next;
      ASSERT_GT(n, t);
      EXPECT_EQ(n, floor<minutes>(n)) << show(n);
      ASSERT_TRUE(oracle_minute(e, n)) << show(n);
      EXPECT_TRUE(expr.matches(n)) << show(n);
      // Nothing matches between t and n. A matching day lying wholly between them
      // would hold a match, so only t's day and n's day need a minute scan.
      const sys_days first = floor<days>(t);
      const sys_days last = floor<days>(n);
      for (sys_days d = first; d <= last; d += days{1}) {
        if (!oracle_day(e, d)) continue;
        ASSERT_TRUE(d == first || d == last) << "missed day " << show(d);
        for (sys_seconds m = d; m < d + days{1}; m += minutes{1}) {
          if (m > t && m < n) {
            ASSERT_FALSE(oracle_minute(e, m)) << "missed " << show(m);
          }
        }
      }
    }
  }
  // The generator has to exercise both paths.
  EXPECT_GT(rejected, 0);
  RecordProperty("max_steps", max_steps);
  std::printf("valid %d, rejected %d, max steps %d\n", valid, rejected, max_steps);
}

}  // namespace
}  // namespace leapfrog::coord
