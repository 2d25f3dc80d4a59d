#include "analyze/rules/engine.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "base/json_dump.h"
#include "model/event.h"

namespace trainprof::analyze::rules {
namespace {

int DeviceIndex(const std::string& device, const char* prefix) {
  const size_t n = std::char_traits<char>::length(prefix);
  if (device.size() <= n || device.compare(0, n, prefix) != 0) return -1;
  int index = 0;
  for (size_t i = n; i < device.size(); ++i) {
    if (device[i] < '0' || device[i] > '9') return -1;
    index = index * 10 + (device[i] - '0');
  }
  return index;
}

// Sorts `v` by `less` knowing it is a concatenation of ascending runs: a metric table comes
// series by series, each in time order, so a node's pending values are one run per series
// (plus the sorted rest of the previous release). Merging neighbouring runs pass by pass costs
// log2(runs) linear sweeps instead of introsort's log2(values) levels of unpredictable
// comparisons: the sort was a fifth of a 2-node x 60-min evaluation. Stable.
template <typename T, typename Less>
void SortRuns(std::vector<T>& v, Less less) {
  std::vector<size_t> bounds{0};
  for (size_t i = 1; i < v.size(); ++i) {
    if (less(v[i], v[i - 1])) bounds.push_back(i);
  }
  bounds.push_back(v.size());
  if (bounds.size() <= 2) return;
  std::vector<T> buffer(v.size());
  std::vector<T>* from = &v;
  std::vector<T>* to = &buffer;
  while (bounds.size() > 2) {
    std::vector<size_t> merged{0};
    for (size_t r = 0; r + 1 < bounds.size(); r += 2) {
      const size_t a = bounds[r], b = bounds[r + 1];
      const size_t c = r + 2 < bounds.size() ? bounds[r + 2] : b;
      std::merge(
          from->begin() + static_cast<ptrdiff_t>(a), from->begin() + static_cast<ptrdiff_t>(b),
          from->begin() + static_cast<ptrdiff_t>(b), from->begin() + static_cast<ptrdiff_t>(c),
          to->begin() + static_cast<ptrdiff_t>(a), less);
      merged.push_back(c);
    }
    bounds = std::move(merged);
    std::swap(from, to);
  }
  if (from != &v) v.swap(*from);
}

// The metrics Classify gives a kind (keep the two lists together); every other series is
// kOther, which no built-in rule reads (EngineTest.SeriesNoRuleReadsAreNeitherReadNorKept).
const std::vector<std::string>& ClassifiedMetrics() {
  static const std::vector<std::string> names = {"cpu_utilization_ratio",
                                                 "cpu_iowait_ratio",
                                                 "gpu_utilization_ratio",
                                                 "gpu_memory_used_ratio",
                                                 "memory_used_bytes",
                                                 "memory_total_bytes",
                                                 "memory_utilization_ratio",
                                                 "process_resident_memory_bytes",
                                                 "cgroup_cpu_throttled_periods_ratio",
                                                 "cgroup_memory_limit_bytes",
                                                 "gpu_memory_total_bytes",
                                                 "network_receive_bytes_per_second",
                                                 "network_transmit_bytes_per_second"};
  return names;
}

void Classify(SeriesKey* key) {
  const std::string& m = key->metric;
  const std::string& d = key->device;
  if (m == "cpu_utilization_ratio" || m == "cpu_iowait_ratio") {
    const bool util = m == "cpu_utilization_ratio";
    if (d == "total") {
      key->kind = util ? MetricKind::kCpuTotal : MetricKind::kIowaitTotal;
    } else if ((key->device_index = DeviceIndex(d, "cpu")) >= 0) {
      key->kind = util ? MetricKind::kCpuCore : MetricKind::kIowaitCore;
    }
  } else if (m == "gpu_utilization_ratio" || m == "gpu_memory_used_ratio") {
    // GPU memory for the rules is memory in use (SageMaker's GPUMemoryUtilization, read by
    // GPUMemoryIncrease and BatchSize), not the memory controller's busy time.
    if ((key->device_index = DeviceIndex(d, "gpu")) >= 0) {
      key->kind = m == "gpu_utilization_ratio" ? MetricKind::kGpuUtil : MetricKind::kGpuMemUtil;
    }
  } else if (m == "memory_used_bytes") {
    key->kind = MetricKind::kMemUsed;
  } else if (m == "memory_total_bytes") {
    key->kind = MetricKind::kMemTotal;
  } else if (m == "memory_utilization_ratio") {
    key->kind = MetricKind::kMemRatio;
  } else if (m == "process_resident_memory_bytes" && d == "tree") {
    key->kind = MetricKind::kProcessRss;
  } else if (m == "cgroup_cpu_throttled_periods_ratio") {
    key->kind = MetricKind::kCgroupThrottled;
  } else if (m == "cgroup_memory_limit_bytes") {
    key->kind = MetricKind::kCgroupMemLimit;
  } else if (m == "gpu_memory_total_bytes") {
    if ((key->device_index = DeviceIndex(d, "gpu")) >= 0) key->kind = MetricKind::kGpuMemTotal;
  } else if (m == "network_receive_bytes_per_second") {
    key->kind = MetricKind::kNetRx;
  } else if (m == "network_transmit_bytes_per_second") {
    key->kind = MetricKind::kNetTx;
  }
}

bool StepPartCategory(const std::string& category) {
  return category == model::kCategoryDataWait || category == model::kCategoryForward ||
         category == model::kCategoryBackward || category == model::kCategoryOptimizer;
}

bool KeptCategory(const std::string& category, const std::string& name) {
  return category == model::kCategoryPhase || category == "collective" ||
         category == "dataloader" || category == "metric" || category == "compile" ||
         name == "dataloader_init";
}

}  // namespace

// One released unit in canonical order.
struct RuleEngine::Item {
  int64_t key_ns;
  uint8_t kind;  // 0 snapshot, 1 step, 2 span
  int32_t node;
  size_t index;  // into the release's snapshots / steps / spans
};

StatusOr<std::unique_ptr<RuleEngine>> RuleEngine::Create(const RuleConfig& config,
                                                         const model::RunMetadata& run,
                                                         const EngineOptions& options,
                                                         const RuleRegistry* registry) {
  if (registry == nullptr) registry = &RuleRegistry::Global();
  std::unique_ptr<RuleEngine> engine(new RuleEngine());
  engine->config_ = config;
  engine->options_ = options;
  engine->run_start_ns_ = run.start_ns;
  engine->instance_type_ = run.instance_type;

  std::vector<std::string> selected = config.rules;
  if (selected.empty() && !config.no_builtin) selected.push_back(kProfilerReport);
  // A parameter given for a rule selects it too (`--rule StepOutlier.stddev=2`).
  for (const auto& [name, unused] : config.parameters) {
    if (std::find(selected.begin(), selected.end(), name) == selected.end()) {
      selected.push_back(name);
    }
  }
  std::vector<std::string> names;
  for (const std::string& name : selected) {
    TP_ASSIGN_OR_RETURN(RuleSpec spec, registry->Find(name));
    if (name == kProfilerReport) {
      engine->profiler_report_ = true;
      for (const std::string& b : registry->BuiltinNames()) names.push_back(b);
    } else {
      names.push_back(name);
    }
  }
  std::set<std::string> seen;
  const std::vector<std::string> builtins = registry->BuiltinNames();
  engine->only_builtin_ = true;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) continue;
    if (std::find(builtins.begin(), builtins.end(), name) == builtins.end()) {
      engine->only_builtin_ = false;
    }
    auto it = config.parameters.find(name);
    TP_ASSIGN_OR_RETURN(
        auto rule,
        registry->Create(name, it == config.parameters.end() ? nlohmann::json() : it->second));
    rule->Bind(engine.get());
    engine->rules_.push_back(std::move(rule));
    engine->forwarded_.push_back(0);
  }
  for (const auto& [name, unused] : config.actions) {
    if (name != kProfilerReport && !seen.count(name)) {
      return InvalidArgument("actions given for rule " + name + ", which is not evaluated");
    }
  }
  return engine;
}

std::vector<std::string> RuleEngine::MetricsRead() const {
  if (!only_builtin_) return {};
  return ClassifiedMetrics();
}

void RuleEngine::SetNodeInfo(const model::NodeInfo& info) { node_infos_[info.node] = info; }

const model::NodeInfo* RuleEngine::NodeInfo(int32_t node) const {
  auto it = node_infos_.find(node_names_[node]);
  return it == node_infos_.end() ? nullptr : &it->second;
}

int64_t RuleEngine::RunStartNs() const {
  if (run_start_ns_ > 0) return run_start_ns_;
  return first_time_ns_ == store::kMaxTime ? 0 : first_time_ns_;
}

int32_t RuleEngine::NodeId(const std::string& name) {
  auto [it, inserted] = node_ids_.emplace(name, static_cast<int32_t>(node_names_.size()));
  if (inserted) {
    node_names_.push_back(name);
    pending_values_.emplace_back();
  }
  return it->second;
}

int32_t RuleEngine::SeriesId(int32_t node, const std::string& metric, const std::string& device) {
  auto [it, inserted] = series_ids_.emplace(std::make_tuple(node, metric, device),
                                            static_cast<int32_t>(series_.size()));
  if (inserted) {
    SeriesKey key;
    key.node = node;
    key.metric = metric;
    key.device = device;
    Classify(&key);
    series_.push_back(std::move(key));
    series_mark_.push_back(-1);
    series_rank_.push_back(0);
    ranks_dirty_ = true;
  }
  return it->second;
}

void RuleEngine::NoteTime(int64_t key_ns) {
  if (key_ns <= released_cut_ns_) ++stats_.late_items;
  watermark_ns_ = std::max(watermark_ns_, key_ns);
  first_time_ns_ = std::min(first_time_ns_, key_ns);
}

void RuleEngine::Feed(const store::MetricTable& metrics) {
  if (finalized_ || metrics.size() == 0) return;
  // Translate the table's dictionary codes once per distinct (node, metric, device).
  std::map<std::tuple<int32_t, int32_t, int32_t>, int32_t> codes;
  std::vector<int32_t> node_of_code(metrics.nodes.values().size(), -1);
  {
    // Room for the table's values in each node's pending list at once: growing them value by
    // value copied and page-faulted the whole list again at each doubling.
    std::vector<size_t> per_code(node_of_code.size(), 0);
    for (size_t i = 0; i < metrics.size(); ++i) ++per_code[static_cast<size_t>(metrics.node[i])];
    for (size_t c = 0; c < per_code.size(); ++c) {
      if (per_code[c] == 0) continue;
      node_of_code[c] = NodeId(metrics.nodes.at(static_cast<int32_t>(c)));
      auto& pending = pending_values_[static_cast<size_t>(node_of_code[c])];
      pending.reserve(pending.size() + per_code[c]);
    }
  }
  int64_t last_key[3] = {-1, -1, -1};
  int32_t last_series = -1;
  for (size_t i = 0; i < metrics.size(); ++i) {
    const double v = metrics.value[i];
    if (std::isnan(v)) continue;  // missing is not zero
    if (metrics.node[i] != last_key[0] || metrics.metric[i] != last_key[1] ||
        metrics.device[i] != last_key[2]) {
      last_key[0] = metrics.node[i];
      last_key[1] = metrics.metric[i];
      last_key[2] = metrics.device[i];
      auto [it, inserted] =
          codes.emplace(std::make_tuple(metrics.node[i], metrics.metric[i], metrics.device[i]), 0);
      if (inserted) {
        int32_t& node = node_of_code[static_cast<size_t>(metrics.node[i])];
        if (node < 0) node = NodeId(metrics.nodes.at(metrics.node[i]));
        SeriesKey probe;
        probe.metric = metrics.metrics.at(metrics.metric[i]);
        probe.device = metrics.devices.at(metrics.device[i]);
        Classify(&probe);
        // A series no rule reads is not kept when only built-in rules run: their results are
        // then the same whether a reader selected MetricsRead() or not.
        it->second = only_builtin_ && probe.kind == MetricKind::kOther
                         ? -1
                         : SeriesId(node, probe.metric, probe.device);
      }
      last_series = it->second;
    }
    if (last_series < 0) continue;
    const int64_t ts = metrics.timestamp_ns[i];
    NoteTime(ts);
    pending_values_[static_cast<size_t>(series_[last_series].node)].push_back(
        {ts, last_series, 0, v});
    ++stats_.values_fed;
  }
  Release(LiveCut());
}

void RuleEngine::Feed(const store::StepTable& steps) {
  if (finalized_ || steps.size() == 0) return;
  for (size_t i = 0; i < steps.size(); ++i) {
    StepRow row;
    row.node = NodeId(steps.nodes.at(steps.node[i]));
    row.rank = steps.rank[i];
    row.pid = steps.pid[i];
    row.step = steps.step[i];
    row.mode = steps.modes.at(steps.mode[i]);
    row.start_ns = steps.start_ns[i];
    row.duration_ns = std::max<int64_t>(0, steps.duration_ns[i]);
    row.data_wait_ns = steps.data_wait_ns[i];
    row.forward_ns = steps.forward_ns[i];
    row.backward_ns = steps.backward_ns[i];
    row.optimizer_ns = steps.optimizer_ns[i];
    NoteTime(row.end_ns());
    pending_steps_.push_back(std::move(row));
    ++stats_.steps_fed;
  }
  Release(LiveCut());
}

void RuleEngine::Feed(const store::EventTable& events) {
  if (finalized_ || events.size() == 0) return;
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string& category = events.categories.at(events.category[i]);
    const std::string& name = events.names.at(events.name[i]);
    const bool begun = events.start_ns[i] < step_begun_ns_ && events.step[i] != model::kMissing &&
                       StepPartCategory(category);
    if (!begun && !KeptCategory(category, name)) continue;
    if (begun) step_begun_ns_ = events.start_ns[i];
    SpanEvent e;
    e.node = NodeId(events.nodes.at(events.node[i]));
    e.name = name;
    e.category = begun ? kStepBegunCategory : category;
    e.rank = events.rank[i];
    e.pid = events.pid[i];
    e.step = events.step[i];
    e.start_ns = events.start_ns[i];
    e.duration_ns = std::max<int64_t>(0, events.duration_ns[i]);
    e.args = events.args[i];
    NoteTime(e.end_ns());
    pending_spans_.push_back(std::move(e));
    ++stats_.spans_fed;
  }
  Release(LiveCut());
}

int64_t RuleEngine::LiveCut() const {
  if (watermark_ns_ == store::kMinTime) return store::kMinTime;
  return watermark_ns_ - options_.release_lag_ns - options_.snapshot_window_ns;
}

void RuleEngine::Release(int64_t cut_ns) {
  // Everything with a time key below `cut_ns` is complete: snapshots starting before it end
  // before the newest fed time minus the lag.
  if (cut_ns <= released_cut_ns_) return;
  const int64_t window = options_.snapshot_window_ns;
  if (ranks_dirty_) {
    // Order series by names, not by when they were first fed, so that snapshot values come
    // in the same order whatever the feed order was.
    std::vector<int32_t> order(series_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      const SeriesKey& x = series_[a];
      const SeriesKey& y = series_[b];
      return std::tie(node_names_[x.node], x.metric, x.device) <
             std::tie(node_names_[y.node], y.metric, y.device);
    });
    for (size_t i = 0; i < order.size(); ++i) series_rank_[order[i]] = static_cast<int32_t>(i);
    ranks_dirty_ = false;
  }

  std::vector<SampleValue> arena;
  {
    size_t held = 0;
    for (const auto& pending : pending_values_) held += pending.size();
    arena.reserve(held);
  }
  // Nodes in name order, compared as numbers in the sort below.
  std::vector<int32_t> node_order(node_names_.size());
  {
    std::vector<int32_t> by_name(node_names_.size());
    for (size_t i = 0; i < by_name.size(); ++i) by_name[i] = static_cast<int32_t>(i);
    std::sort(by_name.begin(), by_name.end(),
              [&](int32_t a, int32_t b) { return node_names_[a] < node_names_[b]; });
    for (size_t i = 0; i < by_name.size(); ++i) node_order[by_name[i]] = static_cast<int32_t>(i);
  }
  struct Group {
    int32_t node;
    int64_t ts_ns;
    size_t begin, end;
  };
  std::vector<Group> groups;
  for (size_t node = 0; node < pending_values_.size(); ++node) {
    auto& pending = pending_values_[node];
    if (pending.empty()) continue;
    // The rank is copied in first so the comparison touches only the two values (this sort
    // was a quarter of a 2-node x 60-min evaluation with the rank looked up per comparison).
    for (PendingValue& p : pending) p.rank = series_rank_[static_cast<size_t>(p.series)];
    SortRuns(pending, [](const PendingValue& a, const PendingValue& b) {
      return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.rank < b.rank;
    });
    size_t i = 0;
    while (i < pending.size() && pending[i].ts_ns < cut_ns) {
      const int64_t start = pending[i].ts_ns;
      const int64_t group_id =
          static_cast<int64_t>(stats_.snapshots_released) + static_cast<int64_t>(groups.size());
      Group g{static_cast<int32_t>(node), start, arena.size(), 0};
      size_t j = i;
      // A second value of a series inside the window starts the next snapshot.
      while (j < pending.size() && pending[j].ts_ns - start < window) {
        int64_t& mark = series_mark_[static_cast<size_t>(pending[j].series)];
        if (mark == group_id) break;
        mark = group_id;
        arena.push_back({pending[j].series, series_[static_cast<size_t>(pending[j].series)].kind,
                         pending[j].value});
        ++j;
      }
      g.end = arena.size();
      groups.push_back(g);
      i = j;
    }
    pending.erase(pending.begin(), pending.begin() + static_cast<ptrdiff_t>(i));
  }

  std::vector<Item> items;
  items.reserve(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    items.push_back({groups[g].ts_ns, 0, groups[g].node, g});
  }
  std::vector<StepRow> steps;
  {
    auto keep = std::stable_partition(pending_steps_.begin(), pending_steps_.end(),
                                      [&](const StepRow& s) { return s.end_ns() >= cut_ns; });
    steps.assign(std::make_move_iterator(keep), std::make_move_iterator(pending_steps_.end()));
    pending_steps_.erase(keep, pending_steps_.end());
  }
  for (size_t s = 0; s < steps.size(); ++s)
    items.push_back({steps[s].end_ns(), 1, steps[s].node, s});
  std::vector<SpanEvent> spans;
  {
    auto keep = std::stable_partition(pending_spans_.begin(), pending_spans_.end(),
                                      [&](const SpanEvent& e) { return e.end_ns() >= cut_ns; });
    spans.assign(std::make_move_iterator(keep), std::make_move_iterator(pending_spans_.end()));
    pending_spans_.erase(keep, pending_spans_.end());
  }
  for (size_t s = 0; s < spans.size(); ++s)
    items.push_back({spans[s].end_ns(), 2, spans[s].node, s});

  // The canonical order: by time, then kind, then names and fields, never by feed order.
  std::sort(items.begin(), items.end(), [&](const Item& a, const Item& b) {
    if (a.key_ns != b.key_ns) return a.key_ns < b.key_ns;
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.node != b.node) return node_order[a.node] < node_order[b.node];
    if (a.kind == 1) {
      const StepRow& x = steps[a.index];
      const StepRow& y = steps[b.index];
      return std::tie(x.rank, x.pid, x.mode, x.step, x.start_ns) <
             std::tie(y.rank, y.pid, y.mode, y.step, y.start_ns);
    }
    if (a.kind == 2) {
      const SpanEvent& x = spans[a.index];
      const SpanEvent& y = spans[b.index];
      return std::tie(x.start_ns, x.category, x.name, x.rank, x.pid, x.args) <
             std::tie(y.start_ns, y.category, y.name, y.rank, y.pid, y.args);
    }
    return false;
  });

  for (const Item& item : items) {
    last_time_ns_ = std::max(last_time_ns_, item.key_ns);
    if (item.kind == 0) {
      const Group& g = groups[item.index];
      Snapshot snap;
      snap.node = g.node;
      snap.ts_ns = g.ts_ns;
      snap.values = std::span<const SampleValue>(arena.data() + g.begin, g.end - g.begin);
      for (size_t r = 0; r < rules_.size(); ++r) {
        rules_[r]->OnSnapshot(snap);
        Collect(r);
      }
    } else if (item.kind == 1) {
      for (size_t r = 0; r < rules_.size(); ++r) {
        rules_[r]->OnStep(steps[item.index]);
        Collect(r);
      }
    } else {
      for (size_t r = 0; r < rules_.size(); ++r) {
        rules_[r]->OnSpan(spans[item.index]);
        Collect(r);
      }
    }
  }
  stats_.snapshots_released += static_cast<int64_t>(groups.size());
  released_cut_ns_ = cut_ns;
}

void RuleEngine::Collect(size_t r) {
  const auto& findings = std::as_const(*rules_[r]).result().findings;
  if (findings.size() == forwarded_[r]) return;
  rules_[r]->SortFindingsFrom(forwarded_[r]);
  for (size_t i = forwarded_[r]; i < findings.size(); ++i) new_findings_.push_back(findings[i]);
  forwarded_[r] = findings.size();
}

std::vector<model::Finding> RuleEngine::TakeNewFindings() {
  std::vector<model::Finding> out;
  out.swap(new_findings_);
  return out;
}

void RuleEngine::Finalize() {
  if (finalized_) return;
  Release(store::kMaxTime);
  for (size_t r = 0; r < rules_.size(); ++r) {
    rules_[r]->Finalize(last_time_ns_);
    Collect(r);
  }
  finalized_ = true;
}

std::vector<RuleResult> RuleEngine::Results() const {
  std::vector<RuleResult> out;
  RuleResult report;
  report.name = kProfilerReport;
  nlohmann::json triggered = nlohmann::json::array();
  for (const auto& rule : rules_) {
    const RuleResult& r = std::as_const(*rule).result();
    out.push_back(r);
    if (r.triggered) {
      triggered.push_back(rule->name());
      report.violations += r.violations;
    }
  }
  if (profiler_report_) {
    report.triggered = !triggered.empty();
    report.datapoints = static_cast<int64_t>(rules_.size());
    report.details = {{"rules_evaluated", rules_.size()}, {"rules_triggered", triggered}};
    out.push_back(std::move(report));
  }
  return out;
}

nlohmann::json FindingToJson(const model::Finding& f) {
  // Stored evidence nested beyond 256 levels (a hostile store) is not parsed: dump() recurses.
  constexpr int kMaxEvidenceDepth = 256;
  nlohmann::json evidence = JsonNestingExceeds(f.evidence_json, kMaxEvidenceDepth)
                                ? nlohmann::json(nlohmann::json::value_t::discarded)
                                : nlohmann::json::parse(f.evidence_json, nullptr, false);
  if (evidence.is_discarded()) evidence = nlohmann::json::object();
  return {{"rule", f.rule},
          {"severity", model::SeverityName(f.severity)},
          {"node", f.node},
          {"device", f.device},
          {"start_ns", f.start_ns},
          {"end_ns", f.end_ns},
          {"message", f.message},
          {"recommendation", f.recommendation},
          {"evidence", evidence},
          // The cost impact is joined in by the CLI (the rules do not know prices).
          {"cost_usd", f.cost_usd ? nlohmann::json(*f.cost_usd) : nlohmann::json(nullptr)},
          {"cost_basis", f.cost_basis}};
}

nlohmann::json ResultsToJson(const std::vector<RuleResult>& results) {
  nlohmann::json rules = nlohmann::json::array();
  for (const RuleResult& r : results) {
    nlohmann::json findings = nlohmann::json::array();
    for (const auto& f : r.findings) {
      nlohmann::json j = FindingToJson(f);
      j.erase("rule");
      findings.push_back(std::move(j));
    }
    rules.push_back({{"name", r.name},
                     {"triggered", r.triggered},
                     {"violations", r.violations},
                     {"datapoints", r.datapoints},
                     {"parameters", r.parameters},
                     {"findings", findings},
                     {"details", r.details}});
  }
  return {{"rules", rules}};
}

}  // namespace trainprof::analyze::rules
