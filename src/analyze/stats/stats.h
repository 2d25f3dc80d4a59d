#pragma once
// Small statistics shared by the analyses: quantiles that agree with numpy's default
// (linear interpolation), a running mean/variance (Welford), an incremental least-squares
// line, the Jensen-Shannon distance and the G-test between two histograms, and the normal and
// chi-square quantiles.
// Threads: plain values and functions; no shared state.

#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace trainprof::stats {

// The q-quantile (0..1) of `values`, as numpy.quantile(values, q) computes it. Reorders
// `values` (nth_element). Returns NaN for an empty input.
double QuantileInPlace(std::span<double> values, double q);
// Same on a copy, for callers that keep their data in order.
double Quantile(std::span<const double> values, double q);

// Quantiles of a stream in bounded memory: the values themselves (exact, as QuantileInPlace)
// up to `exact_limit`, then a logarithmic histogram (DDSketch's buckets: each value within
// `relative_accuracy` of the one returned; min and max stay exact). At most `max_buckets`
// buckets per sign: past that the lowest are merged (the quantiles in the merged mass lose
// their accuracy). The defaults span 14 decades at 0.1 %: a percentage from 1e-3 to 100 takes
// at most 5 800 buckets, a rate from 1 B/s to 100 GB/s 12 700.
// For a rule that summarises a whole run (OverallSystemUsage), whose memory must not grow with
// the run's length.
class QuantileSketch {
 public:
  explicit QuantileSketch(size_t exact_limit = 16384, double relative_accuracy = 1e-3,
                          size_t max_buckets = 16384);
  void Add(double v);  // NaN is ignored
  int64_t count() const { return n_; }
  bool exact() const { return !sketch_; }
  double relative_accuracy() const { return alpha_; }
  size_t buckets() const { return pos_.size() + neg_.size(); }
  // The q-quantile (0..1), numpy's linear interpolation between the two ranks around
  // (count - 1) q; NaN when empty. Exact while exact() (reorders the kept values).
  double Quantile(double q);

 private:
  int Key(double magnitude) const;
  double Value(int key) const;
  double ValueAtRank(uint64_t rank) const;
  void Insert(double v);

  size_t exact_limit_, max_buckets_;
  double alpha_, gamma_, log_gamma_;
  std::vector<double> values_;
  bool sketch_ = false;
  std::map<int, uint64_t> pos_, neg_;  // key -> count (neg_: keys of the magnitudes)
  uint64_t zero_ = 0;
  int64_t n_ = 0;
  double min_ = 0, max_ = 0;
};

// Running count, mean and population variance (numpy.std's default, ddof=0).
class RunningStats {
 public:
  void Add(double x) {
    ++n_;
    double d = x - mean_;
    mean_ += d / static_cast<double>(n_);
    m2_ += d * (x - mean_);
  }
  int64_t count() const { return n_; }
  double mean() const { return mean_; }
  double variance() const { return n_ > 0 ? m2_ / static_cast<double>(n_) : 0.0; }
  double stddev() const;

 private:
  int64_t n_ = 0;
  double mean_ = 0;
  double m2_ = 0;
};

// Least-squares line y = a + b x, fed one point at a time. x is shifted by the first x so
// that nanosecond timestamps do not lose precision in the sums.
class LinearTrend {
 public:
  void Add(double x, double y);
  int64_t count() const { return n_; }
  double slope() const;      // dy/dx; 0 with fewer than two distinct x
  double r_squared() const;  // 0..1; 0 when y does not vary
  double first_x() const { return x0_; }

 private:
  int64_t n_ = 0;
  double x0_ = 0;
  double sx_ = 0, sy_ = 0, sxx_ = 0, syy_ = 0, sxy_ = 0;
};

// Jensen-Shannon distance (square root of the divergence, natural log) between two
// histograms given as counts; each is normalised first. 0 for identical shapes, sqrt(ln 2)
// for disjoint ones. Returns 0 when either histogram is empty.
double JensenShannonDistance(std::span<const double> p_counts, std::span<const double> q_counts);

// Two histograms (counts on the same bins) compared as samples of `n_p` and `n_q` observations
// (effective counts: fewer than the counts' totals when the observations are autocorrelated):
// - divergence: the plug-in Jensen-Shannon divergence of the normalised histograms (natural
//   log; its square root is JensenShannonDistance);
// - divergence_bias: what the plug-in divergence of two samples of these sizes from one and the
//   same distribution is on average, (bins - 1) (1/n_p + 1/n_q) / 8 (from the G statistic
//   below, whose mean is its degrees of freedom);
// - g_statistic: the G-test of homogeneity, 2 sum n_i KL(p_i || pooled), chi-square with
//   bins - 1 degrees of freedom when both are samples of one distribution;
// - bins: the bins with a count in either histogram.
struct HistogramComparison {
  double divergence = 0;
  double divergence_bias = 0;
  double g_statistic = 0;
  int bins = 0;
  // The distance with the small-sample bias taken out: sqrt(max(0, divergence - bias)).
  double corrected_distance() const;
};
HistogramComparison CompareHistograms(std::span<const double> p_counts,
                                      std::span<const double> q_counts, double n_p, double n_q);

// The p-quantile of the chi-square distribution with `df` degrees of freedom (Wilson-Hilferty's
// cube-root normal approximation): within 0.3 % of the exact quantile for p 0.95 and 0.99 from
// df 2; for p >= 0.999 never below it, i.e. a test with it is stricter than with the exact
// quantile (by up to 3 % at df 1 and p 0.999, 11 % at df 1 and p 0.99999, 4 % from df 5).
double ChiSquareQuantile(double p, double df);
// The one-sided normal quantile for p in (0, 1) (Acklam's rational approximation, relative
// error < 1.2e-9).
double NormalQuantile(double p);

}  // namespace trainprof::stats
