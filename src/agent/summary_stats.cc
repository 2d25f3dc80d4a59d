#include "agent/summary_stats.h"

#include <algorithm>
#include <cmath>

namespace trainprof::agent {

bool SummaryStats::IsHeadline(std::string_view metric) {
  static constexpr std::string_view kHeadline[] = {
      "cpu_utilization_ratio", "process_cpu_utilization_ratio", "process_resident_memory_bytes",
      "memory_used_bytes",     "gpu_utilization_ratio",         "gpu_memory_used_bytes",
  };
  return std::find(std::begin(kHeadline), std::end(kHeadline), metric) != std::end(kHeadline);
}

void SummaryStats::Observe(std::string_view metric, std::string_view device, double value) {
  if (!IsHeadline(metric)) return;
  // Per-core CPU would make the summary long; the node total says enough.
  if (metric == "cpu_utilization_ratio" && device != "total") return;
  auto m = series_.find(metric);
  if (m == series_.end())
    m = series_.emplace(std::string(metric), std::map<std::string, Kept, std::less<>>()).first;
  auto d = m->second.find(device);
  if (d == m->second.end()) d = m->second.emplace(std::string(device), Kept()).first;
  Kept& kept = d->second;
  if (kept.seen == 0) kept.values.reserve(max_values_);
  kept.max = kept.seen == 0 ? value : std::max(kept.max, value);
  if (kept.seen % kept.stride == 0) kept.values.push_back(value);
  ++kept.seen;
  if (kept.values.size() >= max_values_) {
    size_t out = 0;
    for (size_t i = 0; i < kept.values.size(); i += 2) kept.values[out++] = kept.values[i];
    kept.values.resize(out);
    kept.stride *= 2;
  }
}

size_t SummaryStats::HeldBytes() const {
  size_t bytes = 0;
  for (const auto& [metric, devices] : series_) {
    for (const auto& [device, kept] : devices) bytes += kept.values.capacity() * sizeof(double);
  }
  return bytes;
}

std::vector<SeriesSummary> SummaryStats::Summarize() const {
  std::vector<SeriesSummary> out;
  for (const auto& [metric, devices] : series_) {
    for (const auto& [device, kept] : devices) {
      if (kept.values.empty()) continue;
      std::vector<double> values = kept.values;
      SeriesSummary s;
      s.metric = metric;
      s.device = device;
      s.count = kept.seen;
      s.p50 = Quantile(values, 0.5);
      s.p95 = Quantile(values, 0.95);
      s.max = kept.max;
      out.push_back(std::move(s));
    }
  }
  return out;
}

double Quantile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  // Nearest rank: the smallest value with at least q of the values at or below it.
  auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  size_t index = rank == 0 ? 0 : rank - 1;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index),
                   values.end());
  return values[index];
}

}  // namespace trainprof::agent
