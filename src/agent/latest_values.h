#pragma once
// The latest tick's values, for readers that want "now" (the Prometheus endpoint, live
// summaries). The sampling thread publishes a whole tick at once; any thread may take a copy.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace trainprof::agent {

struct MetricValue {
  std::string metric;
  std::string device;
  double value = 0;
  int64_t tick_wall_ns = 0;  // the tick it was sampled at (set by Publish)
  int64_t tick_mono_ns = 0;  // the same tick on CLOCK_MONOTONIC (set by Publish)
};

struct LatestSnapshot {
  int64_t tick_wall_ns = 0;  // 0 until the first tick
  // The tick on CLOCK_MONOTONIC. Intervals (integration, carry-over) are taken on it: the wall
  // clock can be stepped or slewed while the rates were computed over monotonic intervals.
  int64_t tick_mono_ns = 0;
  int64_t ticks = 0;
  std::vector<MetricValue> values;
  std::map<std::string, int64_t> counters;  // data-quality counters since the start
  // Counters accumulated tick by tick from the rate and share series, so that Prometheus's
  // rate() and increase() work on them (IntegratedCounterName): value x monotonic seconds
  // since the series' previous fresh value, summed from the series' first value (which starts at
  // 0). Keyed by (counter metric, device).
  std::map<std::pair<std::string, std::string>, double> integrated;
};

// The counter a series is integrated into, "" for none: X_per_second -> X_total (bytes per
// second -> bytes); the per-core CPU shares cpu_{utilization,idle,iowait}_ratio ->
// cpu_{busy,idle,iowait}_seconds_total (a core's seconds in that state; not the node-wide
// "total" device, a mean over cores); process_cpu_utilization_ratio (cores) ->
// process_cpu_seconds_total.
std::string IntegratedCounterName(const std::string& metric, const std::string& device);

class LatestValues {
 public:
  // A series a sampler reads less often than every tick (the process tree at most every
  // 200 ms) keeps its last value for up to this long, so that /metrics does not flap.
  static constexpr int64_t kCarryNs = 1'000'000'000;

  // Takes the tick's values; series missing from it carry over (see kCarryNs).
  void Publish(LatestSnapshot snapshot);
  LatestSnapshot Get() const;

 private:
  mutable std::mutex mu_;
  LatestSnapshot snapshot_;
  // Per integrated series, the tick (monotonic) of its previous fresh value.
  std::map<std::pair<std::string, std::string>, int64_t> last_fresh_ns_;
};

}  // namespace trainprof::agent
