#include "agent/latest_values.h"

#include <set>
#include <utility>

namespace trainprof::agent {

void LatestValues::Publish(LatestSnapshot snapshot) {
  std::set<std::pair<std::string, std::string>> fresh;
  for (MetricValue& v : snapshot.values) {
    v.tick_wall_ns = snapshot.tick_wall_ns;
    fresh.emplace(v.metric, v.device);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (MetricValue& old : snapshot_.values) {
    if (snapshot.tick_wall_ns - old.tick_wall_ns > kCarryNs) continue;
    if (fresh.count({old.metric, old.device})) continue;
    snapshot.values.push_back(std::move(old));
  }
  snapshot_ = std::move(snapshot);
}

LatestSnapshot LatestValues::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

}  // namespace trainprof::agent
