#pragma once
// Helpers for the agent tests: temp directories, fake collectors, reading a run back.

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/test_dir.h"
#include "collect/collector.h"
#include "store/run_reader.h"

namespace trainprof::agent::testing {

inline std::string TempDir() { return MakeTestDir("trainprof_agent_test"); }

// Adds "fake_ticks" (device "") = how many ticks it has seen, and optionally sleeps or throws.
class FakeCollector : public collect::Collector {
 public:
  std::string_view name() const override { return "fake"; }
  void Sample(const collect::Tick& tick, collect::SampleSink& sink) override {
    ++ticks;
    last_wall_ns = tick.wall_ns;
    if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    if (throw_every > 0 && ticks % throw_every == 0) throw std::runtime_error("fake failure");
    sink.Add("fake_ticks", "", static_cast<double>(ticks));
    sink.Add("cpu_utilization_ratio", "total", 0.25);
    if (add_nan) sink.Add("fake_nan", "", std::nan(""));
    if (count_problem) sink.Count("parse_errors", 1);
  }
  void Describe(model::NodeInfo* node) const override {
    model::GpuInfo gpu;
    gpu.index = 0;
    gpu.name = "Fake GPU \"X\"";
    gpu.uuid = "GPU-fake-0";
    node->gpus.push_back(gpu);
  }

  std::atomic<int64_t> ticks{0};
  std::atomic<int64_t> last_wall_ns{0};
  int sleep_ms = 0;
  int throw_every = 0;
  bool add_nan = false;
  bool count_problem = false;
};

// (timestamp, value) of one stored series.
inline std::vector<std::pair<int64_t, double>> ReadSeries(const std::string& run_dir,
                                                          const std::string& metric,
                                                          const std::string& device) {
  std::vector<std::pair<int64_t, double>> out;
  auto reader = store::RunReader::Open(run_dir);
  if (!reader.ok()) return out;
  store::MetricQuery q;
  q.metrics = {metric};
  q.devices = {device};
  auto table = (*reader)->SystemMetrics(q);
  if (!table.ok()) return out;
  for (size_t i = 0; i < table->size(); ++i) {
    out.emplace_back(table->timestamp_ns[i], table->value[i]);
  }
  return out;
}

struct StoredEvent {
  std::string name;
  std::string category;
  int64_t start_ns;
  int64_t duration_ns;
  std::string args;
};

inline std::vector<StoredEvent> ReadEvents(const std::string& run_dir,
                                           const std::string& category) {
  std::vector<StoredEvent> out;
  auto reader = store::RunReader::Open(run_dir);
  if (!reader.ok()) return out;
  store::EventQuery q;
  q.categories = {category};
  auto table = (*reader)->Events(q);
  if (!table.ok()) return out;
  for (size_t i = 0; i < table->size(); ++i) {
    out.push_back({table->names.at(table->name[i]), table->categories.at(table->category[i]),
                   table->start_ns[i], table->duration_ns[i], table->args[i]});
  }
  return out;
}

inline std::map<std::string, int64_t> ReadCounters(const std::string& run_dir) {
  auto reader = store::RunReader::Open(run_dir);
  if (!reader.ok()) return {};
  auto counters = (*reader)->Counters();
  return counters.ok() ? *counters : std::map<std::string, int64_t>{};
}

}  // namespace trainprof::agent::testing
