#include "analyze/stats/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trainprof::stats {

double QuantileInPlace(std::span<double> values, double q) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  q = std::clamp(q, 0.0, 1.0);
  // numpy "linear": position h = (n - 1) q, interpolate between floor(h) and floor(h) + 1.
  const double h = static_cast<double>(values.size() - 1) * q;
  const size_t lo = static_cast<size_t>(std::floor(h));
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(lo), values.end());
  const double lo_value = values[lo];
  if (lo + 1 >= values.size()) return lo_value;
  const double hi_value =
      *std::min_element(values.begin() + static_cast<ptrdiff_t>(lo) + 1, values.end());
  return lo_value + (h - static_cast<double>(lo)) * (hi_value - lo_value);
}

double Quantile(std::span<const double> values, double q) {
  std::vector<double> copy(values.begin(), values.end());
  return QuantileInPlace(copy, q);
}

double RunningStats::stddev() const { return std::sqrt(variance()); }

void LinearTrend::Add(double x, double y) {
  if (n_ == 0) x0_ = x;
  const double dx = x - x0_;
  ++n_;
  sx_ += dx;
  sy_ += y;
  sxx_ += dx * dx;
  syy_ += y * y;
  sxy_ += dx * y;
}

double LinearTrend::slope() const {
  const double n = static_cast<double>(n_);
  const double den = n * sxx_ - sx_ * sx_;
  if (n_ < 2 || den <= 0) return 0.0;
  return (n * sxy_ - sx_ * sy_) / den;
}

double LinearTrend::r_squared() const {
  const double n = static_cast<double>(n_);
  const double vx = n * sxx_ - sx_ * sx_;
  const double vy = n * syy_ - sy_ * sy_;
  if (n_ < 2 || vx <= 0 || vy <= 0) return 0.0;
  const double cov = n * sxy_ - sx_ * sy_;
  return std::clamp(cov * cov / (vx * vy), 0.0, 1.0);
}

double JensenShannonDistance(std::span<const double> p_counts, std::span<const double> q_counts) {
  double p_total = 0, q_total = 0;
  for (double v : p_counts) p_total += v;
  for (double v : q_counts) q_total += v;
  if (p_total <= 0 || q_total <= 0 || p_counts.size() != q_counts.size()) return 0.0;
  double divergence = 0;
  for (size_t i = 0; i < p_counts.size(); ++i) {
    const double p = p_counts[i] / p_total;
    const double q = q_counts[i] / q_total;
    const double m = (p + q) / 2;
    if (p > 0) divergence += 0.5 * p * std::log(p / m);
    if (q > 0) divergence += 0.5 * q * std::log(q / m);
  }
  return std::sqrt(std::max(0.0, divergence));
}

}  // namespace trainprof::stats
