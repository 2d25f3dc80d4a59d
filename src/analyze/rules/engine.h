#pragma once
// RuleEngine: runs a set of rules over a run's data, offline or live, with one code path.
//
// Offline (`trainprof rules RUN`): read the store once, Feed() every table, Finalize().
// Live (the agent's record loop): Feed() each tick's new samples / steps / events as they are
// written, take TakeNewFindings() after each Feed to store them (NodeStoreWriter::AddFinding)
// and run their actions, and Finalize() when the job ends, then take the last findings.
//
// Canonical order. Fed data is buffered and released to the rules in one order that does not
// depend on how it was cut into Feed calls: system samples grouped per node into snapshots
// (values within `snapshot_window_ns` of the first one), steps and spans keyed by their end
// time, all sorted by (time, kind, node name, ...). Data is released once it is older than the
// newest fed time minus `release_lag_ns` (Finalize releases the rest), so live findings equal
// offline findings as long as nothing arrives later than the lag; data that does is still
// evaluated and counted in stats().late_items.
//
// Threads: one thread calls Feed/TakeNewFindings/Finalize/Results (the record loop, or the
// CLI); the engine is not internally synchronised.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyze/rules/config.h"
#include "analyze/rules/registry.h"
#include "analyze/rules/rule.h"
#include "model/run_metadata.h"
#include "store/tables.h"

namespace trainprof::analyze::rules {

struct EngineOptions {
  int64_t snapshot_window_ns = 20'000'000;  // samplers of one tick wake a little apart
  int64_t release_lag_ns = 10'000'000'000;  // how late live data may arrive
};

struct EngineStats {
  int64_t values_fed = 0;
  int64_t steps_fed = 0;
  int64_t spans_fed = 0;
  int64_t snapshots_released = 0;
  int64_t late_items = 0;  // fed after their time had been released (live only)
};

// The category of the spans that tell rules a step began (RuleEngine::Feed of events).
inline constexpr const char* kStepBegunCategory = "step_begun";

class RuleEngine final : public RunContext {
 public:
  // Creates the rules `config` selects (unknown rules or parameters are errors).
  static StatusOr<std::unique_ptr<RuleEngine>> Create(const RuleConfig& config,
                                                      const model::RunMetadata& run,
                                                      const EngineOptions& options = {},
                                                      const RuleRegistry* registry = nullptr);

  // The system metrics the selected rules read, as a MetricQuery's `metrics` (empty: all, when
  // a rule that is not built in may read any). Feeding only these changes no result; reading
  // only these spares decoding the rest (live polls, `rules`).
  std::vector<std::string> MetricsRead() const;

  // Node facts (cores, memory, GPUs) for rules that need them; optional.
  void SetNodeInfo(const model::NodeInfo& info);

  void Feed(const store::MetricTable& metrics);
  void Feed(const store::StepTable& steps);
  // Keeps the categories rules read ("phase", "collective", "dataloader", "metric": the
  // training-health values) and ignores others, but for a step's parts (data_wait, forward,
  // backward, optimizer): the earliest to start so far reaches the rules as a span of category
  // kStepBegunCategory (its step's parts end before the step: a step has begun though none
  // has ended).
  void Feed(const store::EventTable& events);

  // Findings emitted since the previous call, in emission order.
  std::vector<model::Finding> TakeNewFindings();
  // Releases everything still buffered and finalises every rule. Idempotent.
  void Finalize();
  bool finalized() const { return finalized_; }

  // One result per selected rule, in selection order; with ProfilerReport selected, its own
  // entry last (triggered when any of its rules triggered).
  std::vector<RuleResult> Results() const;
  const RuleConfig& config() const { return config_; }
  EngineStats stats() const { return stats_; }

  // RunContext
  const std::string& NodeName(int32_t node) const override { return node_names_[node]; }
  const SeriesKey& Series(int32_t series) const override { return series_[series]; }
  const model::NodeInfo* NodeInfo(int32_t node) const override;
  int64_t RunStartNs() const override;
  const std::string& InstanceType() const override { return instance_type_; }

 private:
  struct PendingValue {
    int64_t ts_ns;
    int32_t series;
    int32_t rank;  // series_rank_[series], filled just before sorting (in the padding)
    double value;
  };
  struct Item;

  RuleEngine() = default;
  int32_t NodeId(const std::string& name);
  int32_t SeriesId(int32_t node, const std::string& metric, const std::string& device);
  void NoteTime(int64_t key_ns);
  int64_t LiveCut() const;
  void Release(int64_t cut_ns);
  void Collect(size_t rule_index);  // forwards rule `rule_index`'s new findings

  RuleConfig config_;
  EngineOptions options_;
  bool profiler_report_ = false;
  bool only_builtin_ = false;  // every selected rule is a built-in one (MetricsRead)
  std::vector<std::unique_ptr<Rule>> rules_;
  std::vector<model::Finding> new_findings_;

  int64_t run_start_ns_ = 0;
  std::string instance_type_;
  std::vector<std::string> node_names_;
  std::unordered_map<std::string, int32_t> node_ids_;
  std::map<std::string, model::NodeInfo> node_infos_;
  std::vector<SeriesKey> series_;
  std::map<std::tuple<int32_t, std::string, std::string>, int32_t> series_ids_;

  std::vector<std::vector<PendingValue>> pending_values_;  // per node
  std::vector<StepRow> pending_steps_;
  std::vector<SpanEvent> pending_spans_;
  int64_t step_begun_ns_ = INT64_MAX;  // the earliest start of a step's part fed
  std::vector<int64_t> series_mark_;   // per series: the group it was last put in
  std::vector<int32_t> series_rank_;   // per series: position in (node, metric, device) order
  bool ranks_dirty_ = false;
  std::vector<size_t> forwarded_;  // per rule: findings already handed out

  int64_t watermark_ns_ = store::kMinTime;
  int64_t released_cut_ns_ = store::kMinTime;
  int64_t first_time_ns_ = store::kMaxTime;
  int64_t last_time_ns_ = 0;
  bool finalized_ = false;
  EngineStats stats_;
};

// Renders results as the contract's JSON: {"rules": [{"name", "triggered", "violations",
// "datapoints", "parameters", "findings": [...], "details"}]}.
nlohmann::json ResultsToJson(const std::vector<RuleResult>& results);
nlohmann::json FindingToJson(const model::Finding& finding);

}  // namespace trainprof::analyze::rules
