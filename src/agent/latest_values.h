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
};

struct LatestSnapshot {
  int64_t tick_wall_ns = 0;  // 0 until the first tick
  int64_t ticks = 0;
  std::vector<MetricValue> values;
  std::map<std::string, int64_t> counters;  // data-quality counters since the start
};

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
};

}  // namespace trainprof::agent
