#pragma once
// HTA-comparable trace analyses of one rank (see docs/trace-analysis.md for every definition
// and where we deliberately differ from HTA), the TensorBoard-profiler-style step breakdown,
// straggler detection across ranks and a diff of two runs.
// Threads: pure functions of their inputs.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyze/trace/rank_trace.h"

namespace trainprof::analyze::trace {

struct AnalysisOptions {
  // Gaps on a stream shorter than this (and not host waits) are "kernel_wait": launch
  // overhead between back-to-back kernels. HTA documents 30 ns but applies 30 µs (its
  // timestamps are µs while the parameter is called ns); the unit here is explicit.
  int64_t kernel_wait_threshold_ns = 30'000;
  int64_t runtime_cutoff_ns = 50'000;        // launch stats: slow runtime calls
  int64_t launch_delay_cutoff_ns = 100'000;  // launch stats: late kernels
  size_t top_n = 10;
  // HTA compatibility switches (off = the corrected behaviour).
  bool hta_count_sync_as_busy = false;
  bool hta_comm_by_ncclkernel_only = false;
};

enum class KernelType : uint8_t { kComputation, kCommunication, kMemory };
const char* KernelTypeName(KernelType t);
KernelType ClassifyGpu(const GpuActivity& a, const std::string& name, bool ncclkernel_only);

struct Temporal {
  int64_t idle_ns = 0, compute_ns = 0, non_compute_ns = 0, kernel_ns = 0;
  double idle_pct = 0, compute_pct = 0, non_compute_pct = 0;
};

struct KernelTypeTime {
  std::string type;  // COMPUTATION, "COMPUTATION overlapping COMMUNICATION", ...
  int64_t time_ns = 0;
  double pct = 0;
};

struct IdleEntry {
  int64_t device = -1;
  int64_t stream = -1;
  std::string category;  // host_wait, kernel_wait, other
  int64_t time_ns = 0;
  double ratio = 0;
  int64_t gaps = 0;
};

struct LaunchStats {
  int64_t kernels = 0;
  int64_t correlated = 0;  // kernels whose runtime call was found
  int64_t launch_delay_p50_ns = 0, launch_delay_p90_ns = 0, launch_delay_max_ns = 0;
  int64_t short_kernels = 0;     // GPU duration < its runtime call's CPU duration
  int64_t runtime_outliers = 0;  // runtime call > runtime_cutoff_ns
  int64_t launch_delay_outliers = 0;
};

struct NameTotal {
  std::string name;
  std::string type;  // kernels: COMPUTATION/...; ops: ""
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t max_ns = 0;
  double mean_ns = 0;
};

// One profiler step, split like the TensorBoard profiler's overview: each instant of the step
// goes to the first active role in this order; "other" is the rest, so the parts add up to
// step_ns exactly.
struct StepBreakdown {
  int64_t step = -1;
  int64_t start_ns = 0;
  int64_t step_ns = 0;
  int64_t kernel_ns = 0, memcpy_ns = 0, memset_ns = 0, communication_ns = 0, runtime_ns = 0,
          dataloader_ns = 0, cpu_exec_ns = 0, other_ns = 0;
};

struct RankAnalysis {
  int64_t rank = -1;
  std::string label;
  std::string node;
  int64_t gpu_activities = 0;
  int64_t cpu_spans = 0;
  std::optional<Temporal> temporal;  // absent without GPU activity (CPU-only traces)
  std::string temporal_note;         // why there is none although there is GPU activity
  std::vector<KernelTypeTime> kernel_types;
  std::vector<IdleEntry> idle;
  std::optional<double> comm_comp_overlap_pct;  // absent without communication kernels
  LaunchStats launch;
  std::vector<NameTotal> top_kernels;
  std::vector<NameTotal> top_cpu_ops;
  std::vector<StepBreakdown> steps;
  std::optional<StepBreakdown> step_average;
  std::vector<std::string> recommendations;
};

RankAnalysis AnalyzeRank(const RankTrace& trace, const AnalysisOptions& options);

struct Straggler {
  std::string label;
  std::string metric;  // "own_step_ns" (mean step less its communication) or "busy_ns"
  double value = 0;
  double median = 0;
  double excess_pct = 0;
};

// Ranks whose own time per step -- the mean step less its communication, what the other ranks
// wait for in the collectives -- (or, without steps, GPU busy time) exceeds the median of all
// ranks by more than `threshold_pct`.
std::vector<Straggler> FindStragglers(const std::vector<RankAnalysis>& ranks,
                                      double threshold_pct = 10.0);

struct DiffEntry {
  std::string name;
  std::string kind;  // "kernel" or "cpu_op"
  int64_t base_ns = 0, test_ns = 0, base_count = 0, test_count = 0;
  int64_t delta_ns = 0;
};

// Per name, total time in `test` minus in `base` (per step when both have steps), sorted by
// how much slower it got. Kernels and CPU operators over all ranks.
std::vector<DiffEntry> DiffTraces(const std::vector<RankTrace>& base,
                                  const std::vector<RankTrace>& test, size_t top_n);

}  // namespace trainprof::analyze::trace
