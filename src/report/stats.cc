// Order statistics, display downsampling and histograms for the report model.

#include <algorithm>
#include <cmath>

#include "report/report_model.h"

namespace trainprof::report {
namespace {

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

}  // namespace

Stats ComputeStats(std::vector<double>& values) {
  Stats s;
  // NaN is not a measurement; it would also break the selection's ordering.
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }),
               values.end());
  if (values.empty()) return s;
  s.count = static_cast<int64_t>(values.size());
  double lo = values.front(), hi = values.front(), sum = 0;
  for (double v : values) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  s.min = lo;
  s.max = hi;
  s.mean = sum / static_cast<double>(values.size());
  // Selection instead of a full sort (a day of 100 ms samples is 864 k values per series): each
  // nth_element works on the part left of the previous one.
  auto select = [&](double q, std::vector<double>::iterator end) {
    auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
    rank = std::clamp<size_t>(rank, 1, values.size());
    auto it = values.begin() + static_cast<std::ptrdiff_t>(rank - 1);
    std::nth_element(values.begin(), it, end);
    return it;
  };
  auto p99 = select(0.99, values.end());
  s.p99 = *p99;
  auto p95 = select(0.95, p99 + 1);
  s.p95 = *p95;
  s.p50 = *select(0.50, p95 + 1);
  return s;
}

Band Downsample(const int64_t* ts_ns, const double* values, size_t n, int64_t start_ns,
                int64_t end_ns, int buckets) {
  Band band;
  if (n == 0 || buckets <= 0) return band;
  if (end_ns <= start_ns) end_ns = start_ns + 1;
  const double width = static_cast<double>(end_ns - start_ns) / buckets;
  std::vector<double> lo(static_cast<size_t>(buckets), 0), hi(lo), sum(lo);
  std::vector<int64_t> count(static_cast<size_t>(buckets), 0);
  for (size_t i = 0; i < n; ++i) {
    double v = values[i];
    if (std::isnan(v)) continue;
    auto b = static_cast<int64_t>(static_cast<double>(ts_ns[i] - start_ns) / width);
    auto k = static_cast<size_t>(std::clamp<int64_t>(b, 0, buckets - 1));
    if (count[k] == 0) {
      lo[k] = hi[k] = v;
    } else {
      lo[k] = std::min(lo[k], v);
      hi[k] = std::max(hi[k], v);
    }
    sum[k] += v;
    ++count[k];
  }
  for (size_t k = 0; k < count.size(); ++k) {
    if (count[k] == 0) continue;
    band.ts_ns.push_back(start_ns + static_cast<int64_t>(width * static_cast<double>(k)));
    band.min.push_back(lo[k]);
    band.max.push_back(hi[k]);
    band.mean.push_back(sum[k] / static_cast<double>(count[k]));
  }
  return band;
}

Histogram MakeHistogram(const std::vector<double>& sorted, int bins) {
  Histogram h;
  if (sorted.empty() || bins <= 0) return h;
  double lo = sorted.front();
  // The top 0.1 % would otherwise squeeze every other bar into one bucket; they land in the last.
  double hi = Percentile(sorted, 0.999);
  if (hi <= lo) hi = lo + std::max(1e-9, std::abs(lo) * 1e-6);
  const double width = (hi - lo) / bins;
  for (int i = 0; i <= bins; ++i) h.edges.push_back(lo + width * i);
  h.counts.assign(static_cast<size_t>(bins), 0);
  for (double v : sorted) {
    auto b = static_cast<int64_t>((v - lo) / width);
    ++h.counts[static_cast<size_t>(std::clamp<int64_t>(b, 0, bins - 1))];
  }
  return h;
}

}  // namespace trainprof::report
