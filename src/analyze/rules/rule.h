#pragma once
// The rule contract. A rule is a spec (name, parameters with defaults, description) plus an
// incremental evaluator: one Rule object per evaluation keeps its state across calls, is fed
// the run's data in one canonical time order by the RuleEngine (system-metric snapshots,
// finished steps, phase/collective/dataloader spans) and is finalised once at the end.
// Because the engine fixes the order, feeding a run in one piece (offline) or tick by tick
// (live) gives a rule exactly the same sequence of calls, hence the same findings.
//
// Threads: a Rule is called by one thread at a time (the engine's caller).

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/finding.h"
#include "model/run_metadata.h"

namespace trainprof::analyze::rules {

struct ParamSpec {
  std::string name;
  nlohmann::json default_value;  // a number, or a string / null for text parameters
  std::string description;       // with the unit
};

struct RuleSpec {
  std::string name;  // as SageMaker spells it for the rules it has
  std::string description;
  bool sagemaker = false;  // one of SageMaker Debugger's built-in profiler rules
  std::vector<ParamSpec> params;
};

// A rule's resolved parameters: defaults overridden by the configuration.
class Params {
 public:
  Params() = default;
  explicit Params(nlohmann::json values) : values_(std::move(values)) {}
  double Number(const std::string& name) const;
  int64_t Integer(const std::string& name) const;      // rounded, held within int64
  int64_t Nanoseconds(const std::string& name) const;  // a parameter in seconds, held within int64
  std::string Text(const std::string& name) const;     // "" for null
  const nlohmann::json& json() const { return values_; }

 private:
  nlohmann::json values_ = nlohmann::json::object();
};

// Merges `overrides` into the spec's defaults; unknown names and wrong types are errors.
StatusOr<Params> ResolveParams(const RuleSpec& spec, const nlohmann::json& overrides);

// System metrics the built-in rules understand, recognised once per series by the engine.
enum class MetricKind : uint8_t {
  kOther = 0,
  kCpuCore,          // cpu_utilization_ratio, device cpuN
  kCpuTotal,         // cpu_utilization_ratio, device total
  kIowaitCore,       // cpu_iowait_ratio, device cpuN
  kIowaitTotal,      // cpu_iowait_ratio, device total
  kGpuUtil,          // gpu_utilization_ratio, gpuN
  kGpuMemUtil,       // gpu_memory_used_ratio (memory in use), gpuN
  kMemUsed,          // memory_used_bytes
  kMemTotal,         // memory_total_bytes
  kProcessRss,       // process_resident_memory_bytes, device tree
  kCgroupThrottled,  // cgroup_cpu_throttled_periods_ratio: share of CFS periods throttled
  kNetRx,            // network_receive_bytes_per_second
  kNetTx,            // network_transmit_bytes_per_second
  kCgroupMemLimit,   // cgroup_memory_limit_bytes: memory.max, when the cgroup has one
  kGpuMemTotal,      // gpu_memory_total_bytes, gpuN
  kMemRatio,         // memory_utilization_ratio: used / total (SageMaker's MemoryUsedPercent)
};

struct SeriesKey {
  int32_t node = 0;  // engine node id
  std::string metric;
  std::string device;
  MetricKind kind = MetricKind::kOther;
  int device_index = -1;  // N of cpuN / gpuN; -1 otherwise
};

struct SampleValue {
  int32_t series;   // engine series id
  MetricKind kind;  // ctx().Series(series).kind, at hand (in the padding)
  double value;
};

// All values of one node sampled at (about) one time: values within the engine's snapshot
// window of the first one, at most one per series.
struct Snapshot {
  int32_t node = 0;
  int64_t ts_ns = 0;
  std::span<const SampleValue> values;
};

struct StepRow {
  int32_t node = 0;
  int64_t rank = 0, pid = 0, step = 0;
  std::string mode;
  int64_t start_ns = 0, duration_ns = 0;
  int64_t data_wait_ns, forward_ns, backward_ns, optimizer_ns;  // model::kMissing when absent
  int64_t end_ns() const { return start_ns + duration_ns; }
};

// Framework spans the rules read besides steps: categories "phase", "collective",
// "dataloader" (and instants "dataloader_init" with args), and "metric" instants (train_loss,
// grad_norm: args {"value": number or "nan"/"inf"/"-inf"}, `step` the sampled step).
struct SpanEvent {
  int32_t node = 0;
  std::string name, category;
  int64_t rank = 0, pid = 0, start_ns = 0, duration_ns = 0;
  int64_t step = INT64_MIN;  // the event's step; INT64_MIN (model::kMissing) when none
  std::string args;
  int64_t end_ns() const { return start_ns + duration_ns; }
};

// What the engine tells rules about the run. Owned by the engine.
class RunContext {
 public:
  virtual ~RunContext() = default;
  virtual const std::string& NodeName(int32_t node) const = 0;
  virtual const SeriesKey& Series(int32_t series) const = 0;
  // Facts of the node from the store (cores, memory, GPUs), or null when unknown.
  virtual const model::NodeInfo* NodeInfo(int32_t node) const = 0;
  // The run's start (run.json), or the first data time when the metadata has none.
  virtual int64_t RunStartNs() const = 0;
  virtual const std::string& InstanceType() const = 0;
};

struct RuleResult {
  std::string name;
  bool triggered = false;
  int64_t violations = 0;
  int64_t datapoints = 0;
  nlohmann::json parameters = nlohmann::json::object();
  std::vector<model::Finding> findings;
  nlohmann::json details = nlohmann::json::object();  // summaries (OverallSystemUsage...)
};

class Rule {
 public:
  Rule(const RuleSpec& spec, Params params);
  virtual ~Rule() = default;
  Rule(const Rule&) = delete;
  Rule& operator=(const Rule&) = delete;

  const std::string& name() const { return result_.name; }
  void Bind(const RunContext* context) { ctx_ = context; }

  // Called in canonical order. Each item's time key (snapshot ts, step / span end) never
  // decreases from one call to the next.
  virtual void OnSnapshot(const Snapshot&) {}
  virtual void OnStep(const StepRow&) {}
  virtual void OnSpan(const SpanEvent&) {}
  // After the last item; `end_ns` is the last data time seen (0 when there was none).
  virtual void Finalize(int64_t /*end_ns*/) {}

  const RuleResult& result() const { return result_; }
  // Puts findings [from, end) in canonical order (node, device, start, end, message), so
  // that several findings emitted for one item do not depend on internal map order.
  void SortFindingsFrom(size_t from);

 protected:
  // Records a finding (rule name filled in) and marks the rule triggered; the engine picks
  // new findings up after each call for live storage and actions.
  void Emit(model::Finding finding);
  const RunContext& ctx() const { return *ctx_; }
  const Params& params() const { return params_; }
  RuleResult& result() { return result_; }

 private:
  Params params_;
  RuleResult result_;
  const RunContext* ctx_ = nullptr;
};

using RuleFactory = std::function<std::unique_ptr<Rule>(const RuleSpec&, Params)>;

}  // namespace trainprof::analyze::rules
