#pragma once
// Test scenarios for the rules: synthetic but realistic runs written through the real store
// writer (as a sampler and the in-process recorder would) and read back through RunReader.

#include <stdlib.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "analyze/rules/engine.h"
#include "analyze/rules/evaluate.h"
#include "base/test_dir.h"
#include "model/event.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace trainprof::analyze::rules::testing {

inline constexpr int64_t kSec = 1'000'000'000;
inline constexpr int64_t kMs = 1'000'000;
// 2026-11-30T12:00:00Z: a fixed start keeps the goldens stable.
inline constexpr int64_t kStart = 1'796'040'000LL * kSec;

inline std::string TempDir(const std::string& prefix) { return MakeTestDir(prefix); }

class Scenario {
 public:
  explicit Scenario(const std::string& name, int64_t start_ns = kStart)
      : dir_(TempDir("rules_" + name)) {
    meta_.run_id = "test-" + name;
    meta_.name = name;
    meta_.start_ns = start_ns;
    meta_.source = "test";
    meta_.instance_type = "ml.p4d.24xlarge";
  }

  store::NodeStoreWriter& Node(const std::string& name, int cores = 32, int gpus = 8) {
    auto it = writers_.find(name);
    if (it != writers_.end()) return *it->second;
    model::NodeInfo info;
    info.node = name;
    info.hostname = name;
    info.cpu_cores = cores;
    info.memory_total_bytes = 256LL << 30;
    for (int g = 0; g < gpus; ++g)
      info.gpus.push_back({g, "Test GPU", "GPU-" + std::to_string(g), 80LL << 30});
    auto w = store::OpenNodeWriter(dir_, info);
    TP_CHECK(w.ok());
    return *(writers_[name] = std::move(w).value());
  }

  void Value(const std::string& node, const std::string& metric, const std::string& device,
             int64_t ts, double v) {
    auto& w = Node(node);
    w.Append(w.Series(metric, device), ts, std::round(v * 10000) / 10000);
  }

  // System ticks every `interval_ms` for `duration_s`: cores cpu0..N-1 and total, GPUs, memory.
  struct Tick {
    int64_t ts_ns;
    double seconds;  // since the start
    std::vector<double> core, gpu, gpu_mem;
    double iowait = 0.01;
    double rss_bytes = -1, throttled = -1;
  };
  void System(const std::string& node, int64_t duration_s, int64_t interval_ms, int cores, int gpus,
              const std::function<void(Tick&)>& fill) {
    Node(node, cores, gpus);
    for (int64_t t = 0; t * interval_ms < duration_s * 1000; ++t) {
      Tick tick;
      tick.ts_ns = meta_.start_ns + t * interval_ms * kMs;
      tick.seconds = static_cast<double>(t * interval_ms) / 1000.0;
      tick.core.assign(static_cast<size_t>(cores), 0.3);
      tick.gpu.assign(static_cast<size_t>(gpus), 0.9);
      tick.gpu_mem.assign(static_cast<size_t>(gpus), 0.6);
      fill(tick);
      double total = 0;
      for (int c = 0; c < cores; ++c) {
        Value(node, "cpu_utilization_ratio", "cpu" + std::to_string(c), tick.ts_ns,
              tick.core[static_cast<size_t>(c)]);
        total += tick.core[static_cast<size_t>(c)];
      }
      Value(node, "cpu_utilization_ratio", "total", tick.ts_ns, total / cores);
      Value(node, "cpu_iowait_ratio", "total", tick.ts_ns, tick.iowait);
      for (int g = 0; g < gpus; ++g) {
        Value(node, "gpu_utilization_ratio", "gpu" + std::to_string(g), tick.ts_ns,
              tick.gpu[static_cast<size_t>(g)]);
        Value(node, "gpu_memory_used_ratio", "gpu" + std::to_string(g), tick.ts_ns,
              tick.gpu_mem[static_cast<size_t>(g)]);
      }
      Value(node, "memory_used_bytes", "", tick.ts_ns, 64.0 * (1 << 30));
      Value(node, "memory_total_bytes", "", tick.ts_ns, 256.0 * (1 << 30));
      if (tick.rss_bytes >= 0)
        Value(node, "process_resident_memory_bytes", "tree", tick.ts_ns, tick.rss_bytes);
      if (tick.throttled >= 0)
        Value(node, "cgroup_cpu_throttled_periods_ratio", "", tick.ts_ns, tick.throttled);
    }
  }

  // A step span and its parts, as the in-process recorder writes them.
  void Step(const std::string& node, int64_t rank, int64_t step, int64_t start, int64_t wait,
            int64_t fwd, int64_t bwd, int64_t opt, const std::string& mode = "train") {
    auto& w = Node(node);
    auto span = [&](const char* cat, int64_t begin, int64_t dur) {
      model::Event e;
      e.name = cat;
      e.category = cat;
      e.mode = mode;
      e.step = step;
      e.start_ns = begin;
      e.duration_ns = dur;
      e.pid = 1000 + (rank == model::kMissing ? 0 : rank);
      e.tid = e.pid;
      e.rank = rank;
      w.AppendEvent(std::move(e));
    };
    span("step", start, wait + fwd + bwd + opt);
    span("data_wait", start, wait);
    span("forward", start + wait, fwd);
    span("backward", start + wait + fwd, bwd);
    span("optimizer", start + wait + fwd + bwd, opt);
  }

  // Steps back to back from `from_ns` until `to_ns`; `shape(step, &wait, &compute, &gap)`.
  int64_t Steps(const std::string& node, int64_t rank, int64_t from_ns, int64_t to_ns,
                const std::function<void(int64_t, int64_t*, int64_t*, int64_t*)>& shape,
                int64_t first_step = 0) {
    int64_t t = from_ns, s = first_step;
    while (t < to_ns) {
      int64_t wait = 5 * kMs, compute = 195 * kMs, gap = 0;
      shape(s, &wait, &compute, &gap);
      t += gap;
      Step(node, rank, s, t, wait, compute * 3 / 10, compute * 6 / 10, compute - compute * 9 / 10);
      t += wait + compute;
      ++s;
    }
    return s;
  }

  void Span(const std::string& node, const std::string& category, const std::string& name,
            int64_t start, int64_t dur, int64_t rank = 0, int64_t pid = 1000,
            const std::string& args = "") {
    model::Event e;
    e.name = name;
    e.category = category;
    e.start_ns = start;
    e.duration_ns = dur;
    e.rank = rank;
    e.pid = pid;
    e.tid = pid;
    e.args = args;
    e.kind = dur == 0 ? model::EventKind::kInstant : model::EventKind::kSpan;
    Node(node).AppendEvent(std::move(e));
  }

  model::RunMetadata& meta() { return meta_; }

  // Closes the stores, writes run.json; returns the run directory.
  std::string Finish() {
    for (auto& [name, w] : writers_) TP_CHECK(w->Close().ok());
    writers_.clear();
    TP_CHECK(store::WriteRunMetadata(dir_, meta_).ok());
    return dir_;
  }

 private:
  std::string dir_;
  model::RunMetadata meta_;
  std::map<std::string, std::unique_ptr<store::NodeStoreWriter>> writers_;
};

// Evaluates `rules` (with "NAME.param=value" overrides) on a stored run, offline.
inline std::vector<RuleResult> Evaluate(const std::string& dir, std::vector<std::string> rules,
                                        const std::vector<std::string>& overrides = {}) {
  auto reader = store::RunReader::Open(dir);
  TP_CHECK(reader.ok());
  RuleConfig config;
  config.rules = std::move(rules);
  for (const auto& o : overrides) TP_CHECK(ApplyParamOverride(o, &config).ok());
  auto engine = EvaluateRun(**reader, config);
  TP_CHECK(engine.ok());
  return (*engine)->Results();
}

inline RuleResult EvaluateOne(const std::string& dir, const std::string& rule,
                              const std::vector<std::string>& overrides = {}) {
  for (auto& r : Evaluate(dir, {rule}, overrides)) {
    if (r.name == rule) return r;
  }
  TP_CHECK(false);
  return {};
}

// A rule that stays silent must show that it read data: silence on no data proves nothing.
#define EXPECT_SILENT_ON_DATA(result)                                                          \
  do {                                                                                         \
    const ::trainprof::analyze::rules::RuleResult& silent_ = (result);                         \
    EXPECT_FALSE(silent_.triggered)                                                            \
        << silent_.name << ": "                                                                \
        << (silent_.findings.empty() ? std::string() : silent_.findings[0].message);           \
    EXPECT_GT(silent_.datapoints, 0) << silent_.name << " stayed silent without reading data"; \
  } while (0)

inline nlohmann::json Evidence(const model::Finding& f) {
  return nlohmann::json::parse(f.evidence_json);
}

}  // namespace trainprof::analyze::rules::testing
