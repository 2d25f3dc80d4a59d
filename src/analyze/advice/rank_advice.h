#pragma once
// What `trainprof analyze` says about each rank beyond the trace analyses: step averages over
// the steps that carry each kind of data, and advice that fits the machine the run had.
//
// - Operator averages are over the steps with an operator trace only (a run profiled in detail
//   for 2 of 45 steps averages those 2), and say how many; untraced time is never "other".
// - The parts the zero-code instrumentation records for every step (data_wait, forward,
//   backward, optimizer) give a second average over every step that has them.
// - No GPU on the node (none listed, no gpu_* series, no GPU activity in the trace): no GPU
//   advice at all. CPU-bound advice (torch threads, data-loader workers, channels_last, bf16
//   autocast on CPU, torch.compile) only where the numbers support it, each with its evidence.
//
// Threads: pure functions of their inputs; SummarizeRun reads the store from the caller's thread.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyze/trace/rank_trace.h"
#include "analyze/trace/trace_analysis.h"
#include "base/status.h"
#include "store/run_reader.h"

namespace trainprof::analyze::advice {

// The hardware and settings of the node a rank ran on, as the store recorded them.
struct MachineFacts {
  std::string node;
  std::optional<int> cpu_cores;
  std::string cpu_model;
  int gpus_listed = 0;                         // the node facts' GPU list
  int gpu_devices_sampled = 0;                 // devices with gpu_* system metrics
  bool gpu_activity = false;                   // GPU kernels / copies in the rank's trace
  std::optional<double> cpu_utilization_mean;  // cpu_utilization_ratio{total} while training
  std::optional<int64_t> torch_threads;        // annotation torch.num_threads
  std::optional<int64_t> loader_workers;       // the largest dataloader.N num_workers
  bool HasGpu() const { return gpus_listed > 0 || gpu_devices_sampled > 0 || gpu_activity; }
};

// Averages of the instrumented step parts (ns per step).
struct PhaseAverage {
  int64_t steps = 0;
  int64_t step_ns = 0, data_wait_ns = 0, forward_ns = 0, backward_ns = 0, optimizer_ns = 0,
          other_ns = 0;
};

// Operator families in the traced steps, for the CPU advice (ns summed over traced steps;
// nested operators of one family counted once).
struct OperatorMix {
  int64_t traced_step_ns = 0;
  int64_t conv_ns = 0, matmul_ns = 0;
  int64_t collective_ns = 0;  // CPU-side collective calls (gloo:all_reduce, c10d::...)
  int64_t top_level_ops = 0;  // operators not inside another operator of their thread
};

struct Advice {
  std::string id;  // "data_loader_workers", "torch_threads", "channels_last", ...
  std::string text;
  nlohmann::json evidence;
};

struct RankSummary {
  std::string label;
  int64_t steps_total = 0;                               // steps recorded for the rank
  int64_t steps_with_operators = 0;                      // of those, with an operator trace
  std::optional<trace::StepBreakdown> operator_average;  // over steps_with_operators
  std::optional<PhaseAverage> phase_average;             // over steps with recorded parts
  OperatorMix mix;
  MachineFacts machine;
  std::vector<Advice> advice;
};

// The step rows of one rank: the rank's own when the trace has a rank, else the node's rows
// without a rank. Train-mode rows when there are any.
std::vector<size_t> RankStepRows(const store::StepTable& steps, const trace::RankTrace& t);

PhaseAverage AveragePhases(const store::StepTable& steps, const std::vector<size_t>& rows);
std::optional<trace::StepBreakdown> AverageTracedSteps(const trace::RankAnalysis& a,
                                                       int64_t* traced);
OperatorMix MeasureOperators(const trace::RankTrace& t, const trace::RankAnalysis& a);

// Advice for one rank from its summary (machine, averages, operator mix) and trace analysis.
std::vector<Advice> Advise(const RankSummary& s, const trace::RankAnalysis& a);

// Reads what the summaries need from the store (node facts, metrics, annotations); `steps` are
// the run's (RunReader::Steps(), or BuildSteps of the events the caller has read).
StatusOr<std::vector<RankSummary>> SummarizeRun(store::RunReader& reader,
                                                const store::StepTable& steps,
                                                const std::vector<trace::RankTrace>& traces,
                                                const std::vector<trace::RankAnalysis>& analyses);

// The analyses' step_average becomes the operator average over traced steps, and their
// recommendations the advice texts.
void ApplyToAnalyses(const std::vector<RankSummary>& summaries,
                     std::vector<trace::RankAnalysis>* analyses);

// Adds to one rank's object of the analyze JSON document "steps_total",
// "steps_with_operators", "phase_average", "machine" and "advice" ({id, text, evidence}).
void AddSummaryJson(const RankSummary& summary, nlohmann::json* rank);

// The same for every rank of a printed document (parsed and printed again; `analyze` passes
// AddSummaryJson to trace::AnalysisToJson instead).
std::string MergeIntoJson(const std::string& analysis_json,
                          const std::vector<RankSummary>& summaries);

// Text lines for the terminal output of one rank.
std::string SummaryText(const RankSummary& s);

}  // namespace trainprof::analyze::advice
