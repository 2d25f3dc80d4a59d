#include "analyze/rules/growth.h"

#include <algorithm>
#include <cmath>

namespace trainprof::analyze::rules {
namespace {

// Sums of a least-squares fit, x and y relative to a reference sample (precision: ns
// timestamps and byte counts are large, their differences small).
struct Sums {
  double n = 0, sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  void Add(double x, double y) {
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    syy += y * y;
    sxy += x * y;
  }
  double Slope() const {
    const double den = n * sxx - sx * sx;
    return n >= 2 && den > 0 ? (n * sxy - sx * sy) / den : 0.0;
  }
  double RSquared() const {
    const double vx = n * sxx - sx * sx, vy = n * syy - sy * sy;
    if (n < 2 || vx <= 0 || vy <= 0) return 0.0;
    const double cov = n * sxy - sx * sy;
    return std::clamp(cov * cov / (vx * vy), 0.0, 1.0);
  }
  // The line's value at x.
  double At(double x) const {
    if (n == 0) return 0;
    return sy / n + Slope() * (x - sx / n);
  }
};

}  // namespace

void GrowthWindow::Add(int64_t ts_ns, double value) {
  if (!std::isfinite(value)) return;
  if (!samples_.empty() && ts_ns <= samples_.back().first) return;  // one value per time
  samples_.emplace_back(ts_ns, value);
  while (!samples_.empty() &&
         (samples_.front().first < ts_ns - o_.window_ns || samples_.size() > o_.max_samples)) {
    samples_.pop_front();
  }
}

std::optional<GrowthFit> GrowthWindow::Steady() const {
  const size_t count = samples_.size();
  if (count < 2 || static_cast<int64_t>(count) < o_.min_points) return std::nullopt;
  const int64_t t_end = samples_.back().first;
  const double y_end = samples_.back().second;
  auto x_of = [&](size_t i) { return static_cast<double>(samples_[i].first - t_end) / 1e9; };
  auto y_of = [&](size_t i) { return samples_[i].second - y_end; };

  std::optional<GrowthFit> best;
  Sums all;
  int64_t next_span = std::max<int64_t>(1, o_.min_span_ns);
  for (size_t k = count; k-- > 0;) {
    all.Add(x_of(k), y_of(k));
    const int64_t span = t_end - samples_[k].first;
    const int64_t points = static_cast<int64_t>(count - k);
    if (points < o_.min_points || span < o_.min_span_ns) continue;
    if (span < next_span && k != 0) continue;
    while (next_span <= span) next_span *= 2;
    const double rate = all.Slope();
    const double r2 = all.RSquared();
    if (rate < o_.min_rate_per_s || rate <= 0 || r2 < o_.min_r_squared) continue;
    // Each third of the span (by time) must rise too, and the last not much slower than the
    // first: a jump or a climb levelling off within the span leaves a third flat.
    Sums thirds[3];
    for (size_t i = k; i < count; ++i) {
      const int64_t into = samples_[i].first - samples_[k].first;
      thirds[std::min<int64_t>(2, into * 3 / std::max<int64_t>(1, span))].Add(x_of(i), y_of(i));
    }
    double rates[3];
    bool steady = true;
    for (int j = 0; j < 3; ++j) {
      rates[j] = thirds[j].Slope();
      steady = steady && thirds[j].n >= 2 && rates[j] >= 0.3 * rate;
    }
    if (!steady || rates[2] < 0.5 * rates[0]) continue;
    GrowthFit fit;
    fit.points = points;
    fit.start_ns = samples_[k].first;
    fit.end_ns = t_end;
    fit.rate_per_s = rate;
    fit.r_squared = r2;
    fit.fitted_end = y_end + all.At(0.0);
    fit.first_value = samples_[k].second;
    fit.last_value = y_end;
    for (int j = 0; j < 3; ++j) fit.third_rates[j] = rates[j];
    // The straightest span (the longer on a tie): a climb that began inside a longer span
    // bends the line there and lowers its R^2, so the span kept is the one after the bend and
    // its rate is today's rate, not an average with the flat part before it.
    if (!best || fit.r_squared >= best->r_squared) best = fit;
  }
  return best;
}

nlohmann::json GrowthWindow::Points(int64_t start_ns, size_t max_points) const {
  nlohmann::json out = nlohmann::json::array();
  size_t first = 0;
  while (first < samples_.size() && samples_[first].first < start_ns) ++first;
  const size_t n = samples_.size() - first;
  if (n == 0 || max_points == 0) return out;
  const size_t keep = std::min(n, std::max<size_t>(2, max_points));
  for (size_t j = 0; j < keep; ++j) {
    // Evenly spaced indices from the first to the last sample of the span.
    const size_t i = keep == 1 ? 0 : (j * (n - 1)) / (keep - 1);
    const auto& [ts, v] = samples_[first + i];
    out.push_back({ts, v});
  }
  return out;
}

}  // namespace trainprof::analyze::rules
