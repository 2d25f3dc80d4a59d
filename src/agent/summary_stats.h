#pragma once
// Keeps the values of a few headline series (CPU, process tree, memory, GPUs) in memory so
// that `record` can print p50/p95/max at the end without reading the store back (which may be
// on a full disk). Memory is bounded: past `max_values` a series keeps every other value and
// doubles its stride, so it stays a uniform subsample of the run.
// Threads: Observe from the sampling thread; Summarize after the loop has stopped.

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
  explicit SummaryStats(size_t max_values = 100'000) : max_values_(max_values) {}

  // Whether `metric` is one of the headline metrics kept for the summary.
  static bool IsHeadline(std::string_view metric);
  void Observe(std::string_view metric, std::string_view device, double value);
  // Headline series in a stable order (metric, then device).
  std::vector<SeriesSummary> Summarize() const;

 private:
  struct Kept {
    std::vector<double> values;
    int64_t stride = 1;
    int64_t seen = 0;
    double max = 0;
  };
  size_t max_values_;
  std::map<std::pair<std::string, std::string>, Kept> series_;
};

// The q-quantile (0..1) of `values` by nearest rank; `values` is reordered.
double Quantile(std::vector<double>& values, double q);

}  // namespace trainprof::agent
