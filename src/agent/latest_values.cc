#include "agent/latest_values.h"

#include <cmath>
#include <set>
#include <string_view>
#include <utility>

namespace trainprof::agent {

std::string IntegratedCounterName(const std::string& metric, const std::string& device) {
  static constexpr std::string_view kPerSecond = "_per_second";
  if (metric.size() > kPerSecond.size() &&
      metric.compare(metric.size() - kPerSecond.size(), kPerSecond.size(), kPerSecond) == 0) {
    return metric.substr(0, metric.size() - kPerSecond.size()) + "_total";
  }
  if (metric == "process_cpu_utilization_ratio") return "process_cpu_seconds_total";
  const bool core = device.size() > 3 && device.compare(0, 3, "cpu") == 0;
  if (!core) return "";
  if (metric == "cpu_utilization_ratio") return "cpu_busy_seconds_total";
  if (metric == "cpu_idle_ratio") return "cpu_idle_seconds_total";
  if (metric == "cpu_iowait_ratio") return "cpu_iowait_seconds_total";
  return "";
}

void LatestValues::Publish(LatestSnapshot snapshot) {
  std::set<std::pair<std::string, std::string>> fresh;
  for (MetricValue& v : snapshot.values) {
    v.tick_wall_ns = snapshot.tick_wall_ns;
    v.tick_mono_ns = snapshot.tick_mono_ns;
    fresh.emplace(v.metric, v.device);
  }
  std::lock_guard<std::mutex> lock(mu_);
  snapshot.integrated = std::move(snapshot_.integrated);
  for (const MetricValue& v : snapshot.values) {
    std::string counter = IntegratedCounterName(v.metric, v.device);
    if (counter.empty() || !std::isfinite(v.value)) continue;
    auto key = std::make_pair(std::move(counter), v.device);
    double& total = snapshot.integrated[key];  // 0 from the series' first value
    auto [last, first] = last_fresh_ns_.try_emplace(key, v.tick_mono_ns);
    if (!first && v.tick_mono_ns > last->second) {
      total += v.value * static_cast<double>(v.tick_mono_ns - last->second) / 1e9;
    }
    last->second = v.tick_mono_ns;
  }
  for (MetricValue& old : snapshot_.values) {
    if (snapshot.tick_mono_ns - old.tick_mono_ns > kCarryNs) continue;
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
