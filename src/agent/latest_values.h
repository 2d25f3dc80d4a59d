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
};

struct LatestSnapshot {
  int64_t tick_wall_ns = 0;  // 0 until the first tick
  int64_t ticks = 0;
  std::vector<MetricValue> values;
  std::map<std::string, int64_t> counters;  // data-quality counters since the start
};

class LatestValues {
 public:
  void Publish(LatestSnapshot snapshot);
  LatestSnapshot Get() const;

 private:
  mutable std::mutex mu_;
  LatestSnapshot snapshot_;
};

}  // namespace trainprof::agent
