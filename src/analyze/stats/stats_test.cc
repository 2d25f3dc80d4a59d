#include "analyze/stats/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace trainprof::stats {
namespace {

TEST(QuantileTest, MatchesNumpyLinearInterpolation) {
  // numpy.quantile([1, 2, 3, 4], 0.95) == 3.85; 0.5 -> 2.5; 0.05 -> 1.15
  std::vector<double> v = {4, 1, 3, 2};
  EXPECT_NEAR(Quantile(v, 0.95), 3.85, 1e-12);
  EXPECT_NEAR(Quantile(v, 0.5), 2.5, 1e-12);
  EXPECT_NEAR(Quantile(v, 0.05), 1.15, 1e-12);
  EXPECT_EQ(Quantile(v, 1.0), 4);
  EXPECT_EQ(Quantile(v, 0.0), 1);
  EXPECT_TRUE(std::isnan(Quantile(std::vector<double>{}, 0.5)));
}

TEST(RunningStatsTest, PopulationStddev) {
  RunningStats s;
  for (double x : {2, 4, 4, 4, 5, 5, 7, 9}) s.Add(x);
  EXPECT_EQ(s.count(), 8);
  EXPECT_NEAR(s.mean(), 5, 1e-12);
  EXPECT_NEAR(s.stddev(), 2, 1e-12);
}

TEST(LinearTrendTest, RecoversSlopeOfLargeX) {
  LinearTrend t;
  for (int i = 0; i < 100; ++i) t.Add(1.7e18 + i * 1e9, 1000.0 + 3.0 * i);
  EXPECT_NEAR(t.slope(), 3.0 / 1e9, 1e-15);
  EXPECT_NEAR(t.r_squared(), 1.0, 1e-9);
  LinearTrend flat;
  for (int i = 0; i < 10; ++i) flat.Add(i, 5);
  EXPECT_EQ(flat.slope(), 0);
  EXPECT_EQ(flat.r_squared(), 0);
}

TEST(JensenShannonTest, IdenticalAndDisjoint) {
  std::vector<double> a = {0, 10, 20, 0}, b = {0, 1, 2, 0}, c = {5, 0, 0, 5};
  EXPECT_NEAR(JensenShannonDistance(a, b), 0, 1e-12);
  EXPECT_NEAR(JensenShannonDistance(a, c), std::sqrt(std::log(2.0)), 1e-12);
  EXPECT_EQ(JensenShannonDistance(a, std::vector<double>{0, 0, 0, 0}), 0);
}

}  // namespace
}  // namespace trainprof::stats
