#pragma once
// Keeps the values of a few headline series (CPU, process tree, memory, GPUs) in memory so
// that `record` can print p50/p95/max at the end without reading the store back (which may be
// on a full disk). Memory is bounded and reserved at a series' first value: past `max_values`
// a series keeps every other value and doubles its stride, so it stays a uniform subsample of
// the run. 16 384 values (128 KiB a series) put a p95 within about 0.2 percentile ranks; the
// cap was 100 000 and grew by vector doubling for the first 3 hours of a 100 ms recording
// (about 1 MiB a series: 20 MiB on an 8-GPU node, a fifth of the 24-hour soak's growth).
// Threads: Observe from the sampling thread; Summarize after the loop has stopped.

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainprof::agent {

struct SeriesSummary {
  std::string metric;
  std::string device;
  int64_t count = 0;  // values observed (not kept)
  double p50 = 0;
  double p95 = 0;
  double max = 0;
};

class SummaryStats {
 public:
  explicit SummaryStats(size_t max_values = 16'384)
      : max_values_(std::max<size_t>(2, max_values)) {}

  // Whether `metric` is one of the headline metrics kept for the summary.
  static bool IsHeadline(std::string_view metric);
  void Observe(std::string_view metric, std::string_view device, double value);
  // Headline series in a stable order (metric, then device).
  std::vector<SeriesSummary> Summarize() const;
  // Bytes held for the kept values (their vectors' capacity): at most series x max_values x 8.
  size_t HeldBytes() const;

 private:
  struct Kept {
    std::vector<double> values;
    int64_t stride = 1;
    int64_t seen = 0;
    double max = 0;
  };
  size_t max_values_;
  // metric -> device -> kept values; looked up by string_view (no allocation per value).
  std::map<std::string, std::map<std::string, Kept, std::less<>>, std::less<>> series_;
};

// The q-quantile (0..1) of `values` by nearest rank; `values` is reordered.
double Quantile(std::vector<double>& values, double q);

}  // namespace trainprof::agent
