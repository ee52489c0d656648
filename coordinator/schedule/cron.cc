#include "coordinator/schedule/cron.h"

#include <array>
#include <bit>
#include <cctype>
#include <charconv>
#include <string_view>
#include <vector>

namespace leapfrog::coord {
namespace {

using namespace std::chrono;
using SysMinutes = time_point<system_clock, minutes>;

// What one of the five fields accepts.
struct FieldSpec {
  const char* name;  // as it appears in messages: "day-of-month"
  int min;           // smallest number accepted
  int max;           // largest number accepted (7 for day-of-week: Sunday again)
  int values;        // distinct values; the largest useful step
  const char* want;  // what a value should be: "0-59", "1-12 or JAN-DEC"
  const std::array<const char*, 12>* names;  // names for min, min+1, ...; or null
};

constexpr std::array<const char*, 12> kMonthNames = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                     "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<const char*, 12> kDayNames = {"SUN", "MON", "TUE", "WED", "THU", "FRI",
                                                   "SAT", "",    "",    "",    "",    ""};

enum Field { kMinute, kHour, kDom, kMonth, kDow, kFieldCount };

const std::array<FieldSpec, kFieldCount> kFields = {{
    {"minute", 0, 59, 60, "0-59", nullptr},
    {"hour", 0, 23, 24, "0-23", nullptr},
    {"day-of-month", 1, 31, 31, "1-31", nullptr},
    {"month", 1, 12, 12, "1-12 or JAN-DEC", &kMonthNames},
    {"day-of-week", 0, 7, 7, "0-7 or SUN-SAT", &kDayNames},
}};

// Days in each month at most (February in a leap year), indexed 1-12.
constexpr std::array<unsigned, 13> kMaxDays = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

// A match is at most 8 years away (Feb 29 from 2096 to 2104); past this the
// search has a bug or the expression was not validated.
constexpr int kHorizonYears = 10;

[[noreturn]] void fail_field(const FieldSpec& f, std::string_view text, std::string_view want) {
  throw CronError("bad cron " + std::string(f.name) + " field \"" + std::string(text) +
                  "\": want " + std::string(want));
}

bool has(uint64_t mask, unsigned v) {
  return (mask >> v) & 1;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// Parses a digits-only number; false for anything else (signs, spaces, overflow).
bool parse_number(std::string_view s, int& out) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// One value of a field: a number in range or a name.
int parse_value(const FieldSpec& f, std::string_view field_text, std::string_view s) {
  int v = 0;
  if (parse_number(s, v)) {
    if (v < f.min || v > f.max) fail_field(f, field_text, f.want);
    return v;
  }
  if (f.names != nullptr) {
    for (size_t i = 0; i < f.names->size(); ++i) {
      const char* name = (*f.names)[i];
      if (*name != '\0' && equals_ignoring_case(s, name)) {
        return f.min + static_cast<int>(i);
      }
    }
  }
  fail_field(f, field_text, f.want);
}

// One comma-separated element: `*`, `v`, `a-b`, `*/n` or `a-b/n`.
uint64_t parse_element(const FieldSpec& f, std::string_view field_text, std::string_view elem) {
  std::string_view base = elem;
  int step = 1;
  const size_t slash = elem.find('/');
  if (slash != std::string_view::npos) {
    base = elem.substr(0, slash);
    if (!parse_number(elem.substr(slash + 1), step) || step < 1 || step > f.values) {
      fail_field(f, field_text, "step 1-" + std::to_string(f.values));
    }
  }
  int lo = 0;
  int hi = 0;
  if (base == "*") {
    lo = f.min;
    hi = f.min + f.values - 1;  // day-of-week `*` is 0-6, not 0-7
  } else if (const size_t dash = base.find('-'); dash != std::string_view::npos) {
    const std::string_view hi_text = base.substr(dash + 1);
    lo = parse_value(f, field_text, base.substr(0, dash));
    hi = parse_value(f, field_text, hi_text);
    // "FRI-SUN": the name SUN at the top of a range is day 7.
    int unused = 0;
    if (f.max == 7 && hi == 0 && lo > 0 && !parse_number(hi_text, unused)) hi = 7;
    if (lo > hi) fail_field(f, field_text, "a range low-high with low <= high");
  } else {
    lo = hi = parse_value(f, field_text, base);
    // "5/15" means different things to different crons; ask for the explicit form.
    if (slash != std::string_view::npos) {
      fail_field(f, field_text, "a step only after * or a range, like */15 or 5-59/15");
    }
  }
  uint64_t mask = 0;
  for (int v = lo; v <= hi; v += step) mask |= uint64_t{1} << (f.max == 7 ? v % 7 : v);
  return mask;
}

uint64_t parse_field(const FieldSpec& f, std::string_view text) {
  uint64_t mask = 0;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    const std::string_view elem = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (elem.empty()) fail_field(f, text, "a value on each side of every comma");
    mask |= parse_element(f, text, elem);
    if (comma == std::string_view::npos) return mask;
    start = comma + 1;
  }
}

std::vector<std::string> split_fields(const std::string& text) {
  std::vector<std::string> fields;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    const size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) fields.push_back(text.substr(start, i - start));
  }
  return fields;
}

// The five fields a macro stands for, or null if `name` is no macro.
const char* expand_macro(std::string_view name) {
  static constexpr std::array<std::array<const char*, 2>, 7> kMacros = {{
      {"@yearly", "0 0 1 1 *"},
      {"@annually", "0 0 1 1 *"},
      {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"},
      {"@daily", "0 0 * * *"},
      {"@midnight", "0 0 * * *"},
      {"@hourly", "0 * * * *"},
  }};
  for (const auto& [macro, fields] : kMacros) {
    if (equals_ignoring_case(name, macro)) return fields;
  }
  return nullptr;
}

std::string list_months(uint64_t months) {
  std::string out;
  for (unsigned m = 1; m <= 12; ++m) {
    if (!has(months, m)) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(m);
  }
  return out;
}

}  // namespace

CronExpr CronExpr::parse(const std::string& text) {
  std::vector<std::string> fields = split_fields(text);
  if (!fields.empty() && fields[0].starts_with('@')) {
    const char* expanded = expand_macro(fields[0]);
    if (expanded == nullptr) {
      throw CronError("unknown cron macro \"" + fields[0] +
                      "\": want @yearly, @annually, @monthly, @weekly, @daily, @midnight or "
                      "@hourly");
    }
    if (fields.size() != 1) {
      throw CronError("bad cron expression \"" + text + "\": want " + fields[0] + " alone");
    }
    fields = split_fields(expanded);
  }
  if (fields.size() != kFieldCount) {
    throw CronError("bad cron expression \"" + text +
                    "\": want 5 fields (minute hour day-of-month month day-of-week), got " +
                    std::to_string(fields.size()));
  }

  CronExpr e;
  e.text_ = text;
  e.minutes_ = parse_field(kFields[kMinute], fields[kMinute]);
  e.hours_ = parse_field(kFields[kHour], fields[kHour]);
  e.doms_ = parse_field(kFields[kDom], fields[kDom]);
  e.months_ = parse_field(kFields[kMonth], fields[kMonth]);
  e.dows_ = parse_field(kFields[kDow], fields[kDow]);
  e.dom_any_ = fields[kDom] == "*";
  e.dow_any_ = fields[kDow] == "*";

  // With day-of-week `*` the day-of-month alone decides, so it must fit some month
  // allowed; otherwise the expression never fires. It fits if its smallest day fits
  // the longest month.
  if (!e.dom_any_ && e.dow_any_) {
    const unsigned first_day = std::countr_zero(e.doms_);
    unsigned longest = 0;
    for (unsigned m = 1; m <= 12; ++m) {
      if (has(e.months_, m) && kMaxDays[m] > longest) longest = kMaxDays[m];
    }
    if (first_day > longest) {
      const std::string month_list = list_months(e.months_);
      const bool one = std::has_single_bit(e.months_);
      throw CronError("bad cron day-of-month field \"" + fields[kDom] + "\": day " +
                      std::to_string(first_day) + " never occurs in month" + (one ? " " : "s ") +
                      month_list);
    }
  }
  return e;
}

bool CronExpr::day_matches(const year_month_day& ymd, weekday wd) const {
  const bool dom = has(doms_, static_cast<unsigned>(ymd.day()));
  const bool dow = has(dows_, wd.c_encoding());
  // An unrestricted field has every bit set, so `and` leaves the other one deciding.
  if (dom_any_ || dow_any_) return dom && dow;
  return dom || dow;
}

bool CronExpr::matches(sys_seconds t) const {
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const minutes since_midnight = floor<minutes>(t - day);
  const auto h = static_cast<unsigned>(floor<hours>(since_midnight).count());
  const auto m = static_cast<unsigned>((since_midnight - hours{h}).count());
  return has(months_, static_cast<unsigned>(ymd.month())) && day_matches(ymd, weekday{day}) &&
         has(hours_, h) && has(minutes_, m);
}

sys_seconds CronExpr::next_after(sys_seconds t) const {
  return search_after(t).next;
}

CronSearch CronExpr::search_after(sys_seconds t) const {
  static const sys_days kFirst = sys_days{year{1} / January / 1};
  static const sys_days kLast = sys_days{year{9999} / December / 31};
  if (t < kFirst || t >= kLast + days{1}) {
    throw CronError("cron search time out of range: want years 1-9999");
  }

  CronSearch out;
  SysMinutes m = floor<minutes>(t) + minutes{1};
  const year horizon = year_month_day{floor<days>(m)}.year() + years{kHorizonYears};
  for (;;) {
    ++out.steps;
    const sys_days day = floor<days>(m);
    const year_month_day ymd{day};
    if (ymd.year() > horizon) {
      throw CronError("cron expression \"" + text_ + "\" has no match within " +
                      std::to_string(kHorizonYears) + " years");
    }
    if (!has(months_, static_cast<unsigned>(ymd.month()))) {
      m = sys_days{year_month_day{ymd.year() / ymd.month() / 1} + months{1}};
      continue;
    }
    if (!day_matches(ymd, weekday{day})) {
      m = day + days{1};
      continue;
    }
    // A matching day: the first allowed hour from now that still has an allowed
    // minute left. Only the current hour can run out of minutes, so this loop runs
    // at most twice before it returns.
    const minutes since_midnight = m - day;
    const auto h = static_cast<int>(floor<hours>(since_midnight).count());
    const auto min = static_cast<int>((since_midnight - hours{h}).count());
    for (uint64_t left = hours_ & (~uint64_t{0} << h); left != 0; left &= left - 1) {
      const int hour = std::countr_zero(left);
      const uint64_t mins = minutes_ & (~uint64_t{0} << (hour == h ? min : 0));
      if (mins != 0) {
        out.next = day + hours{hour} + minutes{std::countr_zero(mins)};
        return out;
      }
    }
    m = day + days{1};
  }
}

}  // namespace leapfrog::coord
