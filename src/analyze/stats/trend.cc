#include "analyze/stats/trend.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "analyze/stats/stats.h"

namespace trainprof::stats {

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

TheilSenFit TheilSen(std::span<const double> x, std::span<const double> y) {
  TheilSenFit fit;
  const size_t n = std::min(x.size(), y.size());
  if (n == 0) return fit;
  std::vector<double> slopes;
  slopes.reserve(n * (n - 1) / 2);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const double dx = x[j] - x[i];
      if (dx != 0) slopes.push_back((y[j] - y[i]) / dx);
    }
  }
  fit.pairs = static_cast<int64_t>(slopes.size());
  if (!slopes.empty()) fit.slope = QuantileInPlace(slopes, 0.5);
  const double mx = Quantile(x.first(n), 0.5);
  const double my = Quantile(y.first(n), 0.5);
  fit.intercept = my - fit.slope * mx;
  return fit;
}

MannKendall MannKendallTest(std::span<const double> y) {
  MannKendall mk;
  const int64_t n = static_cast<int64_t>(y.size());
  mk.n = n;
  if (n < 2) return mk;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = i + 1; j < n; ++j) {
      mk.s += (y[j] > y[i]) - (y[j] < y[i]);
    }
  }
  // Ties among the values: groups of equal values of size t.
  std::vector<double> sorted(y.begin(), y.end());
  std::sort(sorted.begin(), sorted.end());
  double tie_var = 0, tied_pairs = 0;
  for (size_t i = 0; i < sorted.size();) {
    size_t k = i;
    while (k < sorted.size() && sorted[k] == sorted[i]) ++k;
    const double t = static_cast<double>(k - i);
    tie_var += t * (t - 1) * (2 * t + 5);
    tied_pairs += t * (t - 1) / 2;
    i = k;
  }
  const double dn = static_cast<double>(n);
  mk.variance = (dn * (dn - 1) * (2 * dn + 5) - tie_var) / 18;
  const double pairs = dn * (dn - 1) / 2;
  const double s = static_cast<double>(mk.s);
  if (pairs - tied_pairs > 0) mk.tau = s / std::sqrt(pairs * (pairs - tied_pairs));
  if (mk.variance > 0) {
    mk.z = s / std::sqrt(mk.variance);
    mk.p_decrease = NormalCdf(mk.z);
    mk.p_increase = NormalCdf(-mk.z);
    mk.p_two_sided = std::min(1.0, 2 * std::min(mk.p_decrease, mk.p_increase));
  }
  return mk;
}

}  // namespace trainprof::stats
