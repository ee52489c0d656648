#include "common/duration.h"

#include <gtest/gtest.h>

namespace leapfrog {
namespace {

TEST(Duration, ParsesSecondsMillisecondsAndMinutes) {
  EXPECT_EQ(parse_duration("5s"), 5'000'000'000);
  EXPECT_EQ(parse_duration("250ms"), 250'000'000);
  EXPECT_EQ(parse_duration("2m"), 120'000'000'000);
  EXPECT_EQ(parse_duration("1.5"), 1'500'000'000);
  EXPECT_EQ(parse_duration("3h"), 3 * 3600'000'000'000LL);
  EXPECT_EQ(parse_duration("24h"), kMaxDuration);
}

TEST(Duration, RefusesWhatIsNoDurationOrOutOfRange) {
  for (const char* bad : {"", "s", "5d", "5 s", "0", "-1s", "25h", "1441m", "nan", "inf"})
    EXPECT_THROW(parse_duration(bad), UsageError) << bad;
}

}  // namespace
}  // namespace leapfrog
