#include "analyze/trace/intervals.h"

#include <gtest/gtest.h>

namespace trainprof::analyze::trace {
namespace {

TEST(IntervalsTest, MergeSubtractIntersectClip) {
  Intervals a = Merge({{5, 10}, {0, 3}, {3, 4}, {8, 12}});
  EXPECT_EQ(a, (Intervals{{0, 4}, {5, 12}}));
  EXPECT_EQ(Length(a), 11);
  Intervals b = Merge({{2, 6}, {11, 20}});
  EXPECT_EQ(IntersectLength(a, b), 2 + 1 + 1);
  EXPECT_EQ(Subtract(a, b), (Intervals{{0, 2}, {6, 11}}));
  EXPECT_EQ(Union(a, b), (Intervals{{0, 20}}));
  EXPECT_EQ(Clip(a, 3, 7), (Intervals{{3, 4}, {5, 7}}));
  EXPECT_EQ(Subtract(a, {}), a);
  EXPECT_TRUE(Subtract({}, a).empty());
}

}  // namespace
}  // namespace trainprof::analyze::trace
