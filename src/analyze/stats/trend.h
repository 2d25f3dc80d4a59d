#pragma once
// Robust trend tests over a short series (the sampled training losses): the Theil-Sen slope
// (median of pairwise slopes, as scipy.stats.theilslopes) and the Mann-Kendall test (Kendall's
// S of the values against their order, with the tie-corrected variance and the normal
// approximation without continuity correction, as scipy.stats.kendalltau(range(n), y,
// method="asymptotic")). O(n^2) in time and memory: meant for series of up to a few hundred.
// Threads: plain functions; no shared state.

#include <cstdint>
#include <span>

namespace trainprof::stats {

struct TheilSenFit {
  double slope = 0;      // median of (y_j - y_i) / (x_j - x_i) over pairs with x_i != x_j
  double intercept = 0;  // median(y) - slope * median(x) (scipy's default, method="separate")
  int64_t pairs = 0;     // pairs the median was taken over (0: no slope)
};
// Non-finite values must be removed by the caller.
TheilSenFit TheilSen(std::span<const double> x, std::span<const double> y);

struct MannKendall {
  int64_t n = 0;
  int64_t s = 0;        // concordant - discordant pairs of (order, value)
  double variance = 0;  // of S under no trend, tie-corrected
  double z = 0;         // S / sqrt(variance); 0 when the variance is 0
  double tau = 0;       // Kendall's tau-b of (order, value)
  // One-sided p-values under no trend: of a decrease as strong as observed (Phi(z)), and of an
  // increase (1 - Phi(z)); two-sided 2 min(...). 1 when the variance is 0 (all values equal).
  double p_decrease = 1, p_increase = 1, p_two_sided = 1;
};
MannKendall MannKendallTest(std::span<const double> y);

// The standard normal distribution function.
double NormalCdf(double z);

}  // namespace trainprof::stats
