#pragma once
// The report model: everything the report shows, computed from a run's store. Renderers (HTML,
// JSON) only lay it out; no number is computed outside BuildReport. Absent measurements stay
// absent (std::optional / empty vectors, "n/a" when shown), never 0.
//
// Threads: BuildReport reads through one RunReader and is called from one thread.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/finding.h"
#include "report/report_python.h"
#include "store/run_reader.h"

namespace trainprof::report {

inline constexpr int kReportSchemaVersion = 1;

// Order statistics of a set of values (nearest-rank percentiles). Empty when count == 0.
struct Stats {
  int64_t count = 0;
  std::optional<double> min, p50, p95, p99, max, mean;
};
// Reorders `values` (selection, not a full sort) and drops NaNs.
Stats ComputeStats(std::vector<double>& values);

// A time series reduced for display: one point per bucket with the bucket's min, mean and max,
// so that spikes survive downsampling. Buckets without samples are left out.
struct Band {
  std::vector<int64_t> ts_ns;  // bucket start
  std::vector<double> min, mean, max;
  size_t size() const { return ts_ns.size(); }
};
Band Downsample(const int64_t* ts_ns, const double* values, size_t n, int64_t start_ns,
                int64_t end_ns, int buckets);

struct Histogram {
  std::vector<double> edges;    // bucket edges, one more than counts
  std::vector<int64_t> counts;  // values in [edges[i], edges[i+1])
};
// `bins` equal-width buckets between the min and the p99.9 (larger values go in the last one).
// `sorted_values` must be sorted ascending.
Histogram MakeHistogram(const std::vector<double>& sorted_values, int bins);

struct Recommendation {
  std::string title;   // "Raise the data loader's worker count"
  std::string detail;  // why, with the numbers
  std::string source;  // "rule <name>" or "report heuristic"
};

struct Summary {
  std::string name, run_id, source, instance_type;
  std::vector<std::string> command;
  std::map<std::string, std::string> tags;
  int64_t start_ns = 0;
  std::optional<int64_t> end_ns, duration_ns;
  std::optional<int> exit_status;
  int node_count = 0;
  int gpu_count = 0;
  std::optional<int> cpu_cores;                // summed over nodes, when every node knows its count
  std::optional<double> gpu_utilization_mean;  // over every GPU sample of the run, 0..1
  std::optional<double> gpu_idle_share;        // share of GPU samples below kGpuIdleBelow
  std::string verdict;                         // one or two sentences
  std::vector<Recommendation> top_changes;     // at most three, most important first
};
inline constexpr double kGpuIdleBelow = 0.10;

struct Phase {
  std::string name, node;
  int64_t start_ns = 0, duration_ns = 0;
  std::optional<double> share_of_run;  // of the run's duration, when the run has an end
};

struct DeviceUsage {
  std::string device;
  Stats stats;
  Band band;  // empty for per-core CPU series (the heatmap shows those)
};
struct MetricUsage {
  std::string metric;
  std::string unit;  // "ratio", "bytes", "bytes_per_second", "watts", "cores", ""
  std::vector<DeviceUsage> devices;
};
// Utilisation of cores and GPUs over time: rows × columns of bucket means (0..1).
struct Heatmap {
  std::vector<std::string> rows;  // "cpu0".."cpuN", then "gpu0".."gpuM"
  int64_t start_ns = 0, bucket_ns = 0;
  int columns = 0;
  std::vector<std::vector<std::optional<double>>> cells;  // [row][column]
};
struct NodeUsage {
  std::string node, hostname, cpu_model, instance_type;
  std::optional<int> cpu_cores;
  std::optional<int64_t> memory_total_bytes;
  std::vector<std::string> gpu_names;
  std::vector<MetricUsage> metrics;
  Heatmap heatmap;
};

struct StepRef {
  std::string node;
  std::optional<int64_t> rank, step;
  int64_t start_ns = 0, duration_ns = 0;
};
struct ModeSteps {
  std::string mode;
  int64_t count = 0;
  int64_t total_ns = 0;
  Stats duration_ms;
  Histogram histogram_ms;
  Band series_ms;                          // step duration over time
  std::optional<double> outlier_above_ms;  // median of the per-block thresholds (report.md)
  int64_t outlier_count = 0;
  std::vector<StepRef> outliers;  // the slowest outliers (at most 50)
};
struct PartShare {
  std::string part;
  int64_t total_ns = 0;
  std::optional<double> share;  // of the total it is compared with
};
struct RankSteps {
  std::string node;
  std::optional<int64_t> rank;
  std::string mode;
  Stats duration_ms;
};
struct TrainingLoop {
  std::vector<ModeSteps> modes;
  std::optional<double> train_eval_ratio;  // train step time / eval step time (totals)
  std::vector<PartShare> parts;            // data_wait / forward / backward / optimizer / other
  std::vector<RankSteps> ranks;
};

struct OperatorRow {
  std::string name, category;
  int64_t count = 0, total_ns = 0;
  double mean_ns = 0;
  std::optional<double> share;  // of the CPU or GPU operator total
};
struct Operators {
  int64_t event_count = 0;
  int64_t cpu_total_ns = 0, gpu_total_ns = 0;
  std::vector<OperatorRow> cpu, gpu;     // top by total time
  std::vector<PartShare> gpu_breakdown;  // kernel / memcpy / memset / communication
};

struct DataLoader {
  std::vector<std::pair<std::string, std::string>> config;  // from annotations
  int64_t steps_with_wait = 0;
  Stats wait_ms;
  Histogram wait_histogram_ms;
  std::optional<double> wait_share;  // of step time, train steps with a data_wait part
  std::optional<int64_t> workers;
  std::optional<int> cpu_cores;
  std::string assessment;
};

struct FindingView {
  model::Finding finding;
  std::string evidence_metric;  // what the chart shows ("" when no chart)
  std::string evidence_device;
  Band evidence;  // the chart around [start_ns, end_ns]
};
struct RuleResult {
  std::string name;
  bool triggered = false;
  std::optional<int64_t> violations, datapoints;
  std::string parameters_json;  // a JSON object as text, "" when not known
  std::string severity;         // highest severity of its findings
  std::string recommendation;
  std::vector<FindingView> findings;
};
// The rules section: filled from the rules engine when it is wired in (see
// docs/modules/report.md), else from the findings stored in the run.
struct RulesSection {
  bool available = false;
  std::string source;  // "rules engine" or "stored findings"
  std::string note;
  std::vector<RuleResult> rules;
};

struct WhatIf {
  std::string description;
  std::optional<double> cost_usd, saving_usd;
};
// The cost section, filled by the cost advisor when it is wired in.
struct CostSection {
  bool available = false;
  std::string note;
  std::string instance_type;
  std::optional<double> price_usd_per_hour;
  std::string price_date, price_source;
  std::vector<std::pair<std::string, double>> cost_by_phase_usd;
  std::optional<double> total_usd, idle_accelerator_usd, cost_per_step_usd;
  std::vector<WhatIf> what_ifs;
};

// Scaling efficiency across runs of one job at different world sizes (`trainprof report RUN
// --scaling RUN2 ...`; computed by src/analyze/scaling, the figures `analyze --scaling` prints).
struct ScalingRow {
  std::string run, name;
  int64_t devices = 0;
  double steps_per_s = 0;             // aggregate training steps per second
  double steps_per_s_per_device = 0;  // median over devices
  double speedup = 0, ideal_speedup = 0;
  double efficiency = 0;  // per-device throughput / the baseline's; 1.0 is linear scaling
  bool baseline = false;  // the run of the fewest devices
  bool this_run = false;  // the run the report is about
};
struct ScalingSection {
  bool available = false;  // false: not asked for (no --scaling)
  int64_t warmup_steps = 0;
  std::string note;
  std::vector<ScalingRow> rows;  // by devices
};

struct DataQuality {
  std::vector<std::pair<std::string, std::optional<int64_t>>> counters;
  std::vector<std::string> problems;
  std::vector<std::string> absent_metrics;  // expected system metrics the run does not hold
};

struct Report {
  int schema_version = kReportSchemaVersion;
  std::string generator;
  int64_t generated_ns = 0;
  std::string run_dir;
  Summary summary;
  std::vector<Phase> phases;
  std::vector<NodeUsage> nodes;
  TrainingLoop training;
  Operators operators;
  PythonFunctions python;  // report_python.h
  DataLoader data_loader;
  RulesSection rules;
  CostSection cost;
  ScalingSection scaling;
  DataQuality data_quality;
};

// Where the rules and cost sections come from. The defaults read stored findings and say cost
// is not available; `trainprof report` and `record` replace them with the rules engine and the
// cost advisor (see docs/modules/report.md).
using RulesProvider = std::function<StatusOr<RulesSection>(store::RunReader&)>;
using CostProvider = std::function<StatusOr<CostSection>(store::RunReader&, const Report&)>;
using ScalingProvider = std::function<StatusOr<ScalingSection>(store::RunReader&)>;

struct BuildOptions {
  int chart_points = 600;     // buckets per time-series chart
  int heatmap_columns = 240;  // time buckets of the utilisation heatmap
  int histogram_bins = 40;
  RulesProvider rules;      // empty: RulesFromStoredFindings
  CostProvider cost;        // empty: CostNotAvailable
  ScalingProvider scaling;  // empty: no scaling section
};

StatusOr<Report> BuildReport(store::RunReader& reader, const BuildOptions& options = {});

// The default providers.
StatusOr<RulesSection> RulesFromStoredFindings(store::RunReader& reader);
CostSection CostNotAvailable();

}  // namespace trainprof::report
