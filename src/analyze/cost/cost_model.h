#pragma once
// What a run cost, billed the way SageMaker training bills it: every instance from the start of
// the job (download) to its end (upload), per second with no minimum, times the instance count,
// each node at its own type's price; plus the ML storage volume on EBS-only types. On top of
// that: what idle accelerators cost, time between steps, initialisation, cost per step / epoch
// / 1000 samples, and the ranked what-ifs (what_if.h).
//
// ComputeCost reads the run once (phase spans, steps, the few system metrics it needs,
// annotations, findings) and returns a passive CostReport. CostOfRange lets rules and the
// report price any time range of a node. Call from one thread per RunReader.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyze/cost/catalog.h"
#include "base/status.h"
#include "store/run_reader.h"

namespace trainprof::cost {

// Phase names, as recorded in "phase" spans (DESIGN.md); "other" is billed time that no phase
// span covers when a run has some.
inline constexpr const char* kPhaseOther = "other";
// Per-second billing rounds the billed window up to whole seconds: that fraction of a second
// is this phase, so that the phases add up to the bill.
inline constexpr const char* kPhaseRoundUp = "billing_round_up";

// Annotation (or run.json tag) keys that give sample and epoch counts; see docs/cost.md.
inline constexpr const char* kKeySamplesPerStep = "samples_per_step";  // global batch size
inline constexpr const char* kKeyStepsPerEpoch = "steps_per_epoch";
inline constexpr const char* kKeyEpochs = "epochs";  // epochs the run trained
inline constexpr const char* kKeyEpoch = "epoch";    // one per epoch start: its number
inline constexpr const char* kKeyVolumeSizeGb = "volume_size_gb";  // SageMaker VolumeSizeInGB
inline constexpr const char* kKeySpot = "managed_spot";            // "true" when run on spot

struct CostOptions {
  std::string instance_type;                 // --instance-type: every node is this type
  std::optional<int> instance_count;         // --instances; default: run.json, else the node count
  bool spot = false;                         // --spot: the job ran on managed spot
  std::optional<double> price_usd_per_hour;  // --price-usd-per-hour: the price actually paid
  std::optional<double> discount_pct;        // --discount-pct: negotiated / savings plan
  std::optional<double> volume_gb;           // --volume-gb: ML storage volume per instance
  double idle_threshold_ratio = 0.10;        // an accelerator below this utilisation is idle
  int64_t now_ns = 0;                        // for the price-age warning; 0: the wall clock
  int max_price_age_days = 180;
};

struct PriceUsed {
  std::string instance_type;
  std::string provider, service, region;
  double price_usd_per_hour = 0;  // what one instance-hour is billed here (after spot/discount)
  std::optional<double> list_price_usd_per_hour;  // the catalog's on-demand price
  std::string basis;                              // how price_usd_per_hour was reached
  std::string source;
  std::string as_of;
  std::optional<double> spot_discount_pct;
  std::string spot_source, spot_as_of;  // where the spot figure came from, and its date
  std::optional<double> discount_pct;
};

struct PhaseCost {
  std::string phase;
  double billed_seconds = 0;  // instance-seconds: summed over instances
  double cost_usd = 0;
};

struct GpuUsage {
  std::string device;
  int64_t samples = 0;
  double mean_ratio = 0, p5_ratio = 0, p95_ratio = 0;
  std::optional<double> memory_peak_bytes;
  std::optional<double> memory_total_bytes;
  double measured_seconds = 0;
  double idle_seconds = 0;       // below the threshold
  double idle_held_seconds = 0;  // idle with memory held (> 1 % of the GPU's memory)
};

// What one node used over its billed window (the what-ifs size from it).
struct Usage {
  std::optional<double> cpu_p95_ratio, cpu_max_ratio;  // cpu_utilization_ratio{total}
  std::optional<double> host_memory_peak_bytes;        // memory_used_bytes
  std::vector<GpuUsage> gpus;
  int gpus_busy = 0;  // GPUs whose p95 utilisation reached the idle threshold
  // Share of samples with every GPU under 10 % while CPU is over 90 % (CPUBottleneck shape).
  std::optional<double> cpu_bound_fraction;
};

struct NodeCost {
  std::string node;
  std::string instance_type;
  std::string instance_source;  // "--instance-type", "node facts", "run.json", "detected"
  std::optional<Detection> detection;
  InstanceType instance;  // the catalog row (a copy)
  PriceUsed price;
  bool assumed = false;  // an instance counted but not recorded: assumed like `like_node`
  std::string like_node;
  int64_t window_start_ns = 0, window_end_ns = 0;
  int64_t billed_seconds = 0;  // whole seconds, rounded up
  std::vector<PhaseCost> phases;
  double compute_cost_usd = 0;
  std::optional<double> storage_volume_gb;
  std::string storage_basis;
  double storage_cost_usd = 0;
  double total_cost_usd = 0;
  double rate_usd_per_second = 0;  // instance + storage, for CostOfRange
  // Accelerators: q = price / count / 3600 per accelerator-second.
  std::optional<double> accelerator_usd_per_second;
  std::optional<double> idle_weighted_cost_usd;   // sum (1 - u) dt q
  std::optional<double> idle_threshold_cost_usd;  // time with u < threshold, times q
  std::optional<double> idle_threshold_accelerator_seconds;
  std::optional<double> idle_held_cost_usd;
  std::map<std::string, double> idle_threshold_cost_by_phase;
  Usage usage;
  std::optional<int64_t> first_step_ns, last_step_end_ns;
  std::optional<double> between_steps_seconds;
  int ranks = 0;  // distinct ranks with steps on this node (0: no steps recorded)
  // The hardware the node's store recorded (host facts, GPUs listed or sampled); absent when
  // the run has no host facts (some imports). Measured usage is in these units, never the
  // label's: a run labelled ml.p3.8xlarge but recorded on a laptop says so (hardware_mismatch).
  std::optional<int> recorded_cpu_cores;
  std::optional<int> recorded_gpus;
  std::string hardware_mismatch;  // "" when the label and the recorded hardware agree
};

struct StepCosts {
  int64_t steps = 0;  // distinct step numbers (train mode when present)
  std::string mode;
  std::optional<double> median_step_seconds, p90_step_seconds;
  std::optional<double> cost_per_step_usd;            // cluster rate x median step time
  std::optional<double> cost_per_step_p90_usd;        // cluster rate x p90 step time
  std::optional<double> amortised_cost_per_step_usd;  // total / steps
  std::optional<double> samples_per_step, steps_per_epoch, epochs;
  std::optional<double> cost_per_epoch_usd;            // measured: rate x median x steps/epoch
  std::optional<double> amortised_cost_per_epoch_usd;  // total / epochs
  std::optional<double> cost_per_1000_samples_usd;
  std::optional<double> amortised_cost_per_1000_samples_usd;
  std::optional<double> between_steps_seconds;  // instance-seconds between steps
  std::optional<double> between_steps_cost_usd;
  std::optional<double> data_wait_fraction;  // data_wait / step time, when recorded
};

struct WhatIf {
  std::string id;     // "managed_spot", "rightsize", "fewer_gpus", "mixed_precision", ...
  std::string title;  // one line for people
  double new_cost_usd = 0;
  double saving_usd = 0;
  double saving_pct = 0;
  std::string instance_type;             // the proposed type, when there is one
  std::vector<std::string> evidence;     // the measurements / rules that motivate it
  std::vector<std::string> assumptions;  // what the estimate rests on
  std::string action;                    // what to change
};

struct CostReport {
  std::string run_dir, run_id;
  std::string catalog_origin;
  std::vector<NodeCost> nodes;
  int instance_count = 0;
  bool phases_from_spans = false;
  std::vector<PhaseCost> phases;  // summed over instances, in billing order
  double billed_instance_seconds = 0;
  double compute_cost_usd = 0, storage_cost_usd = 0, total_cost_usd = 0;
  double cluster_rate_usd_per_second = 0;
  std::optional<double> idle_accelerator_cost_usd;  // utilisation-weighted, the headline
  std::optional<double> idle_threshold_cost_usd;
  std::optional<double> idle_threshold_accelerator_hours;
  std::optional<double> idle_held_cost_usd;
  double idle_threshold_ratio = 0;
  std::optional<double> initialization_seconds, initialization_cost_usd;
  std::string initialization_basis;
  StepCosts steps;
  std::vector<WhatIf> what_ifs;           // ranked by saving, largest first
  std::vector<std::string> not_proposed;  // what-ifs not made, and why (no evidence...)
  std::vector<std::string> notes;
  std::vector<std::string> warnings;     // stale prices, unmeasured GPUs...
  std::vector<std::string> rules_fired;  // rule names from the run's stored findings
};

StatusOr<CostReport> ComputeCost(store::RunReader& run, const Catalog& catalog,
                                 const CostOptions& options);

// Dollars that `node` ("" = every node) was billed for [start_ns, end_ns), clipped to each
// node's billed window: instance + storage rate. For a finding's cost impact.
double CostOfRange(const CostReport& report, const std::string& node, int64_t start_ns,
                   int64_t end_ns);
// Dollars of `accelerators` accelerators of `node` over [start_ns, end_ns) (one GPU's share of
// the instance price each), e.g. the cost of the idle GPUs a finding names.
double AcceleratorCostOfRange(const CostReport& report, const std::string& node, int accelerators,
                              int64_t start_ns, int64_t end_ns);

// The instance type a node's facts name or imply, without reading the store:
// options > NodeInfo.instance_type > run.json > detection.
struct ResolvedInstance {
  std::string instance_type;
  std::string source;
  std::optional<Detection> detection;
};
ResolvedInstance ResolveInstance(const Catalog& catalog, const model::RunMetadata& run,
                                 const model::NodeInfo* node, const std::string& forced_type);

// Renderers: the `--json` contract and a text summary.
std::string CostReportToJson(const CostReport& report);
std::string CostReportToText(const CostReport& report);
// A few lines for `record`'s end-of-job summary.
std::string CostSummaryLines(const CostReport& report);

}  // namespace trainprof::cost
