#include "base/time.h"

#include <gtest/gtest.h>

namespace trainprof {
namespace {

TEST(TimeTest, FormatsUtc) {
  // 2020-06-03T05:04:59.250Z
  int64_t ts = 1591160699LL * kNanosPerSecond + 250 * kNanosPerMilli;
  EXPECT_EQ(FormatIso8601(ts), "2020-06-03T05:04:59.250Z");
  EXPECT_EQ(FormatCompactUtc(ts), "20200603T050459Z");
}

TEST(TimeTest, FormatsDurations) {
  EXPECT_EQ(FormatDuration(1500), "1.5 us");
  EXPECT_EQ(FormatDuration(120 * kNanosPerMilli), "120.0 ms");
  EXPECT_EQ(FormatDuration(2500 * kNanosPerMilli), "2.50 s");
  EXPECT_EQ(FormatDuration(3723 * kNanosPerSecond), "1h 02m 03s");
}

TEST(TimeTest, ClocksAdvance) {
  int64_t a = MonotonicNowNs();
  int64_t b = MonotonicNowNs();
  EXPECT_LE(a, b);
  EXPECT_GT(WallNowNs(), 1600000000LL * kNanosPerSecond);
}

}  // namespace
}  // namespace trainprof
