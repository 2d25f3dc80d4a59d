#pragma once
// Builds small runs for the cost tests with the real store writer: run.json, phase spans,
// steps, GPU / CPU / memory series, annotations. Times are seconds from kT0.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <string>
#include <vector>

#include "analyze/cost/catalog.h"
#include "analyze/cost/cost_model.h"
#include "base/test_dir.h"
#include "base/time.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace trainprof::cost::testing {

// 2026-11-01T00:00:00Z; prices are judged at kNow (2026-11-30).
inline constexpr int64_t kT0 = 1793491200LL * kNanosPerSecond;
inline constexpr int64_t kNow = kT0 + 29LL * 86400 * kNanosPerSecond;

inline int64_t At(double seconds) { return kT0 + static_cast<int64_t>(seconds * 1e9); }

inline std::string TempRunDir() { return MakeTestDir("trainprof_cost_test") + "/run"; }

struct PhaseSpec {
  std::string name;
  double start_s, end_s;
};

struct NodeSpec {
  model::NodeInfo info;
  std::vector<PhaseSpec> phases;
  // GPU utilisation of gpu<i> at time t (seconds); empty: no GPU series.
  int gpus = 0;
  std::function<double(int gpu, double t)> gpu_util;
  std::function<double(int gpu, double t)> gpu_memory_used_bytes;  // optional
  double gpu_memory_total_bytes = 40.0 * (1LL << 30);
  std::function<double(double t)> cpu_total;          // optional
  std::function<double(double t)> memory_used_bytes;  // optional
  double sample_interval_s = 10;
  double samples_until_s = 0;  // samples at interval, 2 interval, ..., samples_until_s
  // Steps: (start_s, duration_s, data_wait_s) in train mode, rank 0.
  std::vector<std::tuple<double, double, double>> steps;
  std::vector<std::pair<std::string, std::string>> annotations;
  std::vector<std::pair<std::string, double>> kernels;  // (name, duration_s), back to back
};

inline model::NodeInfo Node(const std::string& name) {
  model::NodeInfo n;
  n.node = name;
  n.hostname = name;
  return n;
}

inline void WriteNode(const std::string& dir, const NodeSpec& spec) {
  auto w = store::OpenNodeWriter(dir, spec.info);
  ASSERT_TRUE(w.ok()) << w.status().message();
  auto& writer = *w;
  auto span = [&](const std::string& name, const std::string& cat, int64_t start, int64_t dur,
                  int64_t step) {
    model::Event e;
    e.name = name;
    e.category = cat;
    e.start_ns = start;
    e.duration_ns = dur;
    if (step != model::kMissing) {
      e.mode = "train";
      e.step = step;
      e.rank = 0;
      e.pid = 100;
      e.tid = 100;
    }
    writer->AppendEvent(std::move(e));
  };
  for (const PhaseSpec& p : spec.phases) {
    span(p.name, model::kCategoryPhase, At(p.start_s), At(p.end_s) - At(p.start_s),
         model::kMissing);
  }
  for (size_t i = 0; i < spec.steps.size(); ++i) {
    auto [start, dur, wait] = spec.steps[i];
    span("step", model::kCategoryStep, At(start), At(start + dur) - At(start),
         static_cast<int64_t>(i));
    if (wait > 0) {
      span("data_wait", model::kCategoryDataWait, At(start), At(start + wait) - At(start),
           static_cast<int64_t>(i));
    }
  }
  double kt = 1;
  for (const auto& [name, dur] : spec.kernels) {
    span(name, "kernel", At(kt), At(kt + dur) - At(kt), model::kMissing);
    kt += dur;
  }
  for (const auto& [k, v] : spec.annotations) writer->Annotate(At(1), k, v);
  const int n = static_cast<int>(spec.samples_until_s / spec.sample_interval_s + 0.5);
  for (int g = 0; g < spec.gpus && spec.gpu_util; ++g) {
    std::string dev = "gpu" + std::to_string(g);
    auto util = writer->Series("gpu_utilization_ratio", dev);
    auto used = writer->Series("gpu_memory_used_bytes", dev);
    auto total = writer->Series("gpu_memory_total_bytes", dev);
    for (int i = 1; i <= n; ++i) {
      double t = i * spec.sample_interval_s;
      writer->Append(util, At(t), spec.gpu_util(g, t));
      if (spec.gpu_memory_used_bytes) {
        writer->Append(used, At(t), spec.gpu_memory_used_bytes(g, t));
        writer->Append(total, At(t), spec.gpu_memory_total_bytes);
      }
    }
  }
  if (spec.cpu_total) {
    auto s = writer->Series("cpu_utilization_ratio", "total");
    for (int i = 1; i <= n; ++i)
      writer->Append(s, At(i * spec.sample_interval_s), spec.cpu_total(i * spec.sample_interval_s));
  }
  if (spec.memory_used_bytes) {
    auto s = writer->Series("memory_used_bytes", "");
    for (int i = 1; i <= n; ++i) {
      writer->Append(s, At(i * spec.sample_interval_s),
                     spec.memory_used_bytes(i * spec.sample_interval_s));
    }
  }
  ASSERT_TRUE(writer->Close().ok());
}

inline model::RunMetadata Meta(const std::string& instance_type, double duration_s,
                               const std::string& source = "import smdebug") {
  model::RunMetadata m;
  m.run_id = "test-run";
  m.name = "test";
  m.start_ns = kT0;
  m.end_ns = At(duration_s);
  m.source = source;
  m.instance_type = instance_type;
  return m;
}

inline std::string WriteRun(const model::RunMetadata& meta, const std::vector<NodeSpec>& nodes) {
  std::string dir = TempRunDir();
  EXPECT_TRUE(store::WriteRunMetadata(dir, meta).ok());
  for (const NodeSpec& n : nodes) WriteNode(dir, n);
  return dir;
}

inline const Catalog& ShippedCatalog() {
  static const Catalog* c = [] {
    auto loaded = LoadCatalogDir(std::string(TRAINPROF_SOURCE_DIR) + "/data/catalog");
    EXPECT_TRUE(loaded.ok()) << loaded.status().message();
    return new Catalog(std::move(loaded).value());
  }();
  return *c;
}

inline CostReport Cost(const std::string& dir, CostOptions options = {}) {
  if (options.now_ns == 0) options.now_ns = kNow;
  auto run = store::RunReader::Open(dir);
  EXPECT_TRUE(run.ok()) << run.status().message();
  auto report = ComputeCost(**run, ShippedCatalog(), options);
  EXPECT_TRUE(report.ok()) << report.status().message();
  return std::move(report).value();
}

inline const PhaseCost* Phase(const CostReport& r, const std::string& name) {
  for (const PhaseCost& p : r.phases) {
    if (p.phase == name) return &p;
  }
  return nullptr;
}

inline const WhatIf* FindWhatIf(const CostReport& r, const std::string& id) {
  for (const WhatIf& w : r.what_ifs) {
    if (w.id == id) return &w;
  }
  return nullptr;
}

}  // namespace trainprof::cost::testing
