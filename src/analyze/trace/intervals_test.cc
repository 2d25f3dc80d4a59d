#include "analyze/trace/intervals.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

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

// The merged intervals of a set of [start, end) intervals on a small integer range, from a
// bitmap of covered units: an oracle that shares no code with Merge. Touching intervals join,
// as Merge joins them.
Intervals ByBitmap(const std::vector<Intervals>& lists) {
  std::vector<int> covered(256, 0);
  for (const Intervals& l : lists) {
    for (const Interval& x : l) {
      for (int64_t t = x.first; t < x.second; ++t) covered[static_cast<size_t>(t)] = 1;
    }
  }
  Intervals out;
  for (int64_t t = 0; t < 256; ++t) {
    if (!covered[static_cast<size_t>(t)]) continue;
    if (!out.empty() && out.back().second == t) {
      out.back().second = t + 1;
    } else {
      out.emplace_back(t, t + 1);
    }
  }
  return out;
}

// Merge skips its sort when the input is ordered by start, and Union merges two merged lists
// linearly: both must give what the bitmap gives, ordered, unordered, ties in any order.
TEST(IntervalsTest, MergeAndUnionMatchABitmapOnRandomLists) {
  std::mt19937 rng(20261203);
  auto random_list = [&](bool by_start) {
    Intervals v(rng() % 12);
    for (Interval& x : v) {
      x.first = static_cast<int64_t>(rng() % 240);
      x.second = x.first + 1 + static_cast<int64_t>(rng() % 14);
    }
    if (by_start) {
      std::stable_sort(v.begin(), v.end(),
                       [](const Interval& a, const Interval& b) { return a.first < b.first; });
    }
    return v;
  };
  for (int round = 0; round < 2000; ++round) {
    Intervals a = random_list(round % 2 == 0), b = random_list(round % 3 == 0);
    EXPECT_EQ(Merge(a), ByBitmap({a})) << round;
    EXPECT_EQ(Union(Merge(a), Merge(b)), ByBitmap({a, b})) << round;
    EXPECT_EQ(Merge(Union(a, b)), ByBitmap({a, b})) << round;
  }
}

}  // namespace
}  // namespace trainprof::analyze::trace
