#include "analyze/stats/trend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace trainprof::stats {
namespace {

// Reference values from scipy 1.17.1 (scipy.stats.theilslopes(y, x) and
// scipy.stats.kendalltau(range(n), y, method="asymptotic")), computed outside trainprof:
//   theilslopes(y, 10 * arange(n) + 5); kendalltau(arange(n), y, method="asymptotic")

std::vector<double> XsFor(size_t n) {
  std::vector<double> x;
  for (size_t i = 0; i < n; ++i) x.push_back(10.0 * static_cast<double>(i) + 5);
  return x;
}

TEST(TrendTest, HandComputedThreePoints) {
  // y = 3, 1, 2 at x = 0, 1, 2: slopes -2, -0.5, +1 -> median -0.5; intercept 2 - (-0.5 x 1).
  // S = -1 - 1 + 1 = -1; variance 3 x 2 x 11 / 18; tau = -1/3.
  const std::vector<double> x = {0, 1, 2}, y = {3, 1, 2};
  TheilSenFit fit = TheilSen(x, y);
  EXPECT_DOUBLE_EQ(fit.slope, -0.5);
  EXPECT_DOUBLE_EQ(fit.intercept, 2.5);
  EXPECT_EQ(fit.pairs, 3);
  MannKendall mk = MannKendallTest(y);
  EXPECT_EQ(mk.s, -1);
  EXPECT_DOUBLE_EQ(mk.variance, 66.0 / 18.0);
  EXPECT_NEAR(mk.tau, -1.0 / 3.0, 1e-15);
  EXPECT_NEAR(mk.z, -1.0 / std::sqrt(66.0 / 18.0), 1e-15);
}

TEST(TrendTest, NoisyDecreaseMatchesScipy) {
  const std::vector<double> y = {2.4352, 2.1144, 2.0155, 1.9157, 1.6985, 1.6482, 1.5417, 1.3019,
                                 1.4307, 1.3103, 1.1308, 1.091,  1.0739, 0.9459, 0.885,  0.7299,
                                 0.8359, 0.7504, 0.7147, 0.5259, 0.7383, 0.5795, 0.4996, 0.6587,
                                 0.4607, 0.3184, 0.374,  0.1971, 0.4396, 0.2994};
  TheilSenFit fit = TheilSen(XsFor(y.size()), y);
  EXPECT_NEAR(fit.slope, -0.0063733333333333333, 1e-15);
  EXPECT_NEAR(fit.intercept, 1.8164499999999999, 1e-12);
  MannKendall mk = MannKendallTest(y);
  EXPECT_NEAR(mk.tau, -0.9264367816091954, 1e-12);
  EXPECT_NEAR(mk.p_two_sided, 6.482193992649749e-13, 1e-20);
  EXPECT_NEAR(mk.p_decrease, 6.482193992649749e-13 / 2, 1e-20);
  EXPECT_NEAR(mk.p_increase, 1.0, 1e-12);
}

TEST(TrendTest, TiesMatchScipy) {
  const std::vector<double> y = {3, 1, 2, 2, 5, 4, 4, 4, 0, 6, 2, 7};
  TheilSenFit fit = TheilSen(XsFor(y.size()), y);
  EXPECT_NEAR(fit.slope, 0.034848484848484851, 1e-15);
  EXPECT_NEAR(fit.intercept, 1.4090909090909092, 1e-12);
  MannKendall mk = MannKendallTest(y);
  EXPECT_NEAR(mk.tau, 0.31782086308186408, 1e-12);
  EXPECT_NEAR(mk.p_two_sided, 0.16279692662103762, 1e-12);
  EXPECT_NEAR(mk.p_increase, 0.16279692662103762 / 2, 1e-12);
}

TEST(TrendTest, FlatNoiseMatchesScipy) {
  const std::vector<double> y = {2.2851, 2.3214, 2.267,  2.3107, 2.2587, 2.2868, 2.2759,
                                 2.3292, 2.3353, 2.2934, 2.3168, 2.2964, 2.3114, 2.2849,
                                 2.2658, 2.2639, 2.3077, 2.345,  2.3054, 2.2895, 2.3382,
                                 2.3047, 2.302,  2.3051, 2.2974};
  TheilSenFit fit = TheilSen(XsFor(y.size()), y);
  EXPECT_NEAR(fit.slope, 7.0115384615383638e-05, 1e-15);
  EXPECT_NEAR(fit.intercept, 2.293235576923077, 1e-12);
  MannKendall mk = MannKendallTest(y);
  EXPECT_NEAR(mk.tau, 0.09333333333333331, 1e-12);
  EXPECT_NEAR(mk.p_two_sided, 0.51315103353182812, 1e-12);
}

TEST(TrendTest, ConstantSeriesHasNoTrend) {
  const std::vector<double> y(20, 2.302585);
  MannKendall mk = MannKendallTest(y);
  EXPECT_EQ(mk.s, 0);
  EXPECT_EQ(mk.variance, 0);
  EXPECT_EQ(mk.p_decrease, 1);
  EXPECT_EQ(mk.p_two_sided, 1);
  EXPECT_EQ(TheilSen(XsFor(y.size()), y).slope, 0);
  EXPECT_EQ(MannKendallTest(std::vector<double>{}).n, 0);
  EXPECT_EQ(TheilSen(std::vector<double>{1}, std::vector<double>{2}).pairs, 0);
}

}  // namespace
}  // namespace trainprof::stats
