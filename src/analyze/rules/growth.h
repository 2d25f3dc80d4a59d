#pragma once
// Memory growth judged from evidence, not from fixed windows: the least-squares line through
// the most recent samples of one series, tried over spans that end at the newest sample and
// double in length (min_span, 2 x min_span, ... up to the window). A climb that began seconds
// ago is seen as soon as it is straight and long enough; a slower one with a longer span.
// Of the steady spans, the straightest is kept. "Steady" means: enough points and seconds,
// R^2 at least the threshold, the rate at least the minimum, each third of the span rising at
// 0.3 x the span's rate or more and the last third at half the first's rate or more (one
// jump, or a climb levelling off, fits a line well enough but is not steady growth). A climb
// that levels off over much longer than the span is growth for that span: told apart only
// once a longer span shows the bend.
// Used by HostMemoryGrowth and GPUMemoryGrowth. Internal to the rules library.
//
// Threads: a plain value; one thread at a time.

#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

namespace trainprof::analyze::rules {

struct GrowthOptions {
  int64_t window_ns = 60'000'000'000;   // the longest span tried (older samples are dropped)
  int64_t min_span_ns = 5'000'000'000;  // the shortest
  int64_t min_points = 10;
  double min_r_squared = 0.9;
  double min_rate_per_s = 0;  // in the series' unit per second
  size_t max_samples = 4096;  // bound on what is kept, whatever the sampling interval
};

struct GrowthFit {
  int64_t points = 0;
  int64_t start_ns = 0, end_ns = 0;  // first and last sample of the span
  double rate_per_s = 0;             // the slope
  double r_squared = 0;
  double fitted_end = 0;  // the line's value at end_ns
  double first_value = 0, last_value = 0;
  double third_rates[3] = {0, 0, 0};  // the rate over each third of the span
};

class GrowthWindow {
 public:
  explicit GrowthWindow(const GrowthOptions& options = {}) : o_(options) {}
  void Add(int64_t ts_ns, double value);
  void Clear() { samples_.clear(); }
  size_t size() const { return samples_.size(); }
  // The steady span ending at the newest sample with the highest R^2 (the longer on a tie),
  // or none.
  std::optional<GrowthFit> Steady() const;
  // The samples of [start_ns, newest] as [[ts_ns, value], ...], thinned evenly to at most
  // `max_points` (the first and the last kept), for a finding's evidence.
  nlohmann::json Points(int64_t start_ns, size_t max_points) const;

 private:
  GrowthOptions o_;
  std::deque<std::pair<int64_t, double>> samples_;
};

}  // namespace trainprof::analyze::rules
