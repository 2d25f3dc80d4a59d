#include "agent/step_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/event.h"

namespace trainprof::agent {
namespace {

void Trim(std::deque<std::pair<int64_t, int64_t>>* q, int64_t newest_end_ns) {
  while (!q->empty() && q->front().first < newest_end_ns - kThroughputWindowNs) q->pop_front();
}

}  // namespace

const std::vector<double>& StepDurationBuckets() {
  static const auto* buckets =
      new std::vector<double>{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
  return *buckets;
}

void StepMetrics::AddStep(const std::string& mode, int64_t start_ns, int64_t duration_ns) {
  if (duration_ns < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Mode& m = modes_[mode];
  StepModeStats& s = m.stats;
  if (s.bucket_counts.empty()) s.bucket_counts.assign(StepDurationBuckets().size(), 0);
  const double seconds = static_cast<double>(duration_ns) / 1e9;
  ++s.steps;
  s.duration_sum_s += seconds;
  for (size_t i = 0; i < StepDurationBuckets().size(); ++i) {
    if (seconds <= StepDurationBuckets()[i]) ++s.bucket_counts[i];
  }
  const int64_t end_ns = start_ns + duration_ns;
  s.last_end_ns = std::max(s.last_end_ns, end_ns);
  // Steps of several processes may arrive out of order; the window is kept sorted by end.
  auto at = std::upper_bound(m.window.begin(), m.window.end(), std::make_pair(end_ns, duration_ns));
  m.window.insert(at, {end_ns, duration_ns});
  Trim(&m.window, s.last_end_ns);
}

void StepMetrics::AddDataWait(const std::string& mode, int64_t start_ns, int64_t duration_ns) {
  if (duration_ns < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Mode& m = modes_[mode];
  if (m.stats.bucket_counts.empty()) m.stats.bucket_counts.assign(StepDurationBuckets().size(), 0);
  m.stats.data_wait_sum_s += static_cast<double>(duration_ns) / 1e9;
  m.waits.emplace_back(start_ns + duration_ns, duration_ns);
  Trim(&m.waits, std::max(m.stats.last_end_ns, m.waits.back().first));
}

std::map<std::string, StepModeStats> StepMetrics::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, StepModeStats> out;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto& [mode, m] : modes_) {
    StepModeStats s = m.stats;
    s.throughput_steps_per_second = nan;
    s.data_wait_ratio = nan;
    if (m.window.size() >= 2 && m.window.back().first > m.window.front().first) {
      // n steps ended in the window: n - 1 step periods between the first and the last end.
      s.throughput_steps_per_second =
          static_cast<double>(m.window.size() - 1) /
          (static_cast<double>(m.window.back().first - m.window.front().first) / 1e9);
    }
    int64_t step_ns = 0, wait_ns = 0;
    for (const auto& [end, d] : m.window) step_ns += d;
    const int64_t from = m.window.empty() ? 0 : m.window.front().first - m.window.front().second;
    for (const auto& [end, d] : m.waits) {
      if (end >= from) wait_ns += d;
    }
    if (step_ns > 0)
      s.data_wait_ratio = static_cast<double>(wait_ns) / static_cast<double>(step_ns);
    out.emplace(mode, std::move(s));
  }
  return out;
}

Status StepWatcher::Poll() {
  if (!reader_) {
    auto reader = store::RunReader::Open(run_dir_);
    if (!reader.ok()) return reader.status();
    reader_ = std::move(*reader);
  }
  store::EventQuery query;
  query.categories = {model::kCategoryStep, model::kCategoryDataWait};
  query.nodes = {node_};
  TP_ASSIGN_OR_RETURN(store::EventTable t, reader_->EventsSince(&cursor_, query));
  const auto& categories = t.categories.values();
  const auto step_it = std::find(categories.begin(), categories.end(), model::kCategoryStep);
  const int32_t step_category =
      step_it == categories.end() ? -1 : static_cast<int32_t>(step_it - categories.begin());
  for (size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] != 0) continue;  // spans only
    const bool step = t.category[i] == step_category;
    const std::string& mode = t.modes.at(t.mode[i]);
    auto key = std::make_tuple(t.pid[i], mode, std::string(step ? "step" : "data_wait"));
    auto [it, first] = last_start_.try_emplace(key, t.start_ns[i]);
    if (!first) {
      if (t.start_ns[i] <= it->second) continue;  // read before (a resealed chunk)
      it->second = t.start_ns[i];
    }
    if (step) {
      metrics_->AddStep(mode, t.start_ns[i], t.duration_ns[i]);
    } else {
      metrics_->AddDataWait(mode, t.start_ns[i], t.duration_ns[i]);
    }
  }
  return OkStatus();
}

}  // namespace trainprof::agent
