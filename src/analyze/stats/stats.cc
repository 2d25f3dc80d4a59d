#include "analyze/stats/stats.h"

#include <algorithm>
#include <cmath>
#include <iterator>
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

QuantileSketch::QuantileSketch(size_t exact_limit, double relative_accuracy, size_t max_buckets)
    : exact_limit_(exact_limit),
      max_buckets_(std::max<size_t>(2, max_buckets)),
      alpha_(std::clamp(relative_accuracy, 1e-6, 0.5)),
      gamma_((1 + alpha_) / (1 - alpha_)),
      log_gamma_(std::log(gamma_)) {}

namespace {
// Magnitudes below this are counted as zero (no bucket keys without bound toward 0).
constexpr double kSketchZero = 1e-12;
}  // namespace

int QuantileSketch::Key(double magnitude) const {
  return static_cast<int>(std::ceil(std::log(magnitude) / log_gamma_));
}

// The bucket (gamma^(k-1), gamma^k]'s value within alpha of all it holds.
double QuantileSketch::Value(int key) const { return 2 * std::pow(gamma_, key) / (gamma_ + 1); }

void QuantileSketch::Insert(double v) {
  if (std::fabs(v) < kSketchZero) {
    ++zero_;
    return;
  }
  std::map<int, uint64_t>& side = v > 0 ? pos_ : neg_;
  ++side[Key(std::fabs(v))];
  if (side.size() > max_buckets_) {
    // Merge the two buckets nearest zero (the lowest magnitudes) into the second.
    auto first = side.begin();
    std::next(first)->second += first->second;
    side.erase(first);
  }
}

void QuantileSketch::Add(double v) {
  if (std::isnan(v)) return;
  min_ = n_ == 0 ? v : std::min(min_, v);
  max_ = n_ == 0 ? v : std::max(max_, v);
  ++n_;
  if (!sketch_) {
    values_.push_back(v);
    if (values_.size() <= exact_limit_) return;
    sketch_ = true;
    for (double x : values_) Insert(x);
    std::vector<double>().swap(values_);
    return;
  }
  Insert(v);
}

double QuantileSketch::ValueAtRank(uint64_t rank) const {
  // Ascending order: the negatives from the largest magnitude, zero, the positives.
  for (auto it = neg_.rbegin(); it != neg_.rend(); ++it) {
    if (rank < it->second) return -Value(it->first);
    rank -= it->second;
  }
  if (rank < zero_) return 0.0;
  rank -= zero_;
  for (const auto& [key, count] : pos_) {
    if (rank < count) return Value(key);
    rank -= count;
  }
  return max_;
}

double QuantileSketch::Quantile(double q) {
  if (n_ == 0) return std::numeric_limits<double>::quiet_NaN();
  if (!sketch_) return QuantileInPlace(values_, q);
  q = std::clamp(q, 0.0, 1.0);
  if (q == 0.0) return min_;
  if (q == 1.0) return max_;
  const double h = static_cast<double>(n_ - 1) * q;
  const auto lo = static_cast<uint64_t>(std::floor(h));
  const double lo_value = std::clamp(ValueAtRank(lo), min_, max_);
  const double hi_value = std::clamp(ValueAtRank(lo + 1), min_, max_);
  return lo_value + (h - static_cast<double>(lo)) * (hi_value - lo_value);
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

double HistogramComparison::corrected_distance() const {
  return std::sqrt(std::max(0.0, divergence - divergence_bias));
}

HistogramComparison CompareHistograms(std::span<const double> p_counts,
                                      std::span<const double> q_counts, double n_p, double n_q) {
  HistogramComparison c;
  double p_total = 0, q_total = 0;
  for (double v : p_counts) p_total += v;
  for (double v : q_counts) q_total += v;
  if (p_total <= 0 || q_total <= 0 || p_counts.size() != q_counts.size() || n_p <= 0 || n_q <= 0) {
    return c;
  }
  const double w_p = n_p / (n_p + n_q);  // pooled shape of the G-test: weighted by sample size
  double kl_p = 0, kl_q = 0;
  for (size_t i = 0; i < p_counts.size(); ++i) {
    const double p = p_counts[i] / p_total;
    const double q = q_counts[i] / q_total;
    if (p <= 0 && q <= 0) continue;
    ++c.bins;
    const double m = (p + q) / 2;
    const double pooled = w_p * p + (1 - w_p) * q;
    if (p > 0) {
      c.divergence += 0.5 * p * std::log(p / m);
      kl_p += p * std::log(p / pooled);
    }
    if (q > 0) {
      c.divergence += 0.5 * q * std::log(q / m);
      kl_q += q * std::log(q / pooled);
    }
  }
  c.divergence = std::max(0.0, c.divergence);
  c.g_statistic = std::max(0.0, 2 * (n_p * kl_p + n_q * kl_q));
  c.divergence_bias = std::max(0, c.bins - 1) * (1 / n_p + 1 / n_q) / 8;
  return c;
}

double NormalQuantile(double p) {
  p = std::clamp(p, 1e-12, 1 - 1e-12);
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425, hi = 1 - lo;
  if (p < lo) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > hi) {
    const double q = std::sqrt(-2 * std::log(1 - p));
    return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

double ChiSquareQuantile(double p, double df) {
  if (df <= 0) return 0;
  const double v = 2 / (9 * df);
  const double t = 1 - v + NormalQuantile(p) * std::sqrt(v);
  return t <= 0 ? 0 : df * t * t * t;
}

}  // namespace trainprof::stats
