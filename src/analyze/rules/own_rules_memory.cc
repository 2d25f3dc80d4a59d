// trainprof's own memory-growth rules: HostMemoryGrowth and GPUMemoryGrowth (registered in
// own_rules.cc).

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <tuple>

#include "analyze/rules/growth.h"
#include "analyze/rules/own_rules_internal.h"
#include "analyze/rules/rule_util.h"
#include "analyze/rules/share_bound.h"
#include "base/json_dump.h"

namespace trainprof::analyze::rules::own {
namespace {

using model::Severity;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// HostMemoryGrowth: the training process tree's resident memory (process_resident_memory_bytes,
// device tree), judged two ways, one finding per node:
// - now, from evidence: the recent samples (GrowthWindow, spans up to `window_s`) from
//   `settle_s` after the node's first step (without steps: from `unstepped_warmup_s` after the
//   first sample). Steady growth (R^2 >= window_min_r_squared, every third of the span rising) that
//   at its rate reaches the memory limit within `oom_horizon_s` -- the cgroup's memory.max when
//   recorded (headroom: the limit less the tree's memory), else the node's memory (the limit less
//   what is in use) -- fires at once, critical; so does growth faster than
//   `fast_growth_bytes_per_second` whatever the limit (a warning when the limit is far).
// - over the run: a least-squares trend from `warmup_s` after the first step, judged after
//   `min_duration_s` of it every minute of data and at the end up to the last step (memory
//   freed or touched during teardown is not a leak): slow leaks.
class HostMemoryGrowthRule : public Rule {
 public:
  HostMemoryGrowthRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        min_rate_(this->params().Number("min_growth_bytes_per_hour")),
        min_r2_(this->params().Number("min_r_squared")),
        min_duration_ns_(this->params().Nanoseconds("min_duration_s")),
        warmup_ns_(this->params().Nanoseconds("warmup_s")),
        settle_ns_(this->params().Nanoseconds("settle_s")),
        unstepped_ns_(this->params().Nanoseconds("unstepped_warmup_s")),
        horizon_s_(this->params().Number("oom_horizon_s")),
        fast_rate_(this->params().Number("fast_growth_bytes_per_second")),
        min_growth_bytes_(this->params().Number("min_window_growth_bytes")) {
    window_.window_ns = this->params().Nanoseconds("window_s");
    window_.min_span_ns = this->params().Nanoseconds("min_window_s");
    window_.min_points = std::max<int64_t>(3, this->params().Integer("min_points"));
    window_.min_r_squared = this->params().Number("window_min_r_squared");
    window_.min_rate_per_s = min_rate_ / 3600;
  }

  void OnSnapshot(const Snapshot& snap) override {
    NodeState& n = Node(snap.node);
    const SampleValue* rss = nullptr;
    for (const SampleValue& v : snap.values) {
      switch (v.kind) {
        case MetricKind::kProcessRss:
          rss = &v;
          break;
        case MetricKind::kCgroupMemLimit:
          n.cgroup_limit = v.value;
          break;
        case MetricKind::kMemTotal:
          n.mem_total = v.value;
          break;
        case MetricKind::kMemUsed:
          n.mem_used = v.value;
          break;
        default:
          break;
      }
    }
    if (rss == nullptr) return;
    const double bytes = rss->value;
    n.rss = bytes;
    if (n.first_seen_ns == 0) n.first_seen_ns = snap.ts_ns;
    const int64_t since = snap.ts_ns - n.first_seen_ns;
    // Before the first step is known, memory still grows while torch is imported and data
    // loaded: recent samples are judged that early only in a job that never marks steps.
    const int64_t now_from = n.step_seen ? settle_ns_ : unstepped_ns_;
    if (since < std::min(now_from, warmup_ns_)) return;  // loading, caches filling
    ++result().datapoints;
    ++n.judged;
    if (since >= now_from) {
      n.window.Add(snap.ts_ns, bytes);
      if (!n.fired && snap.ts_ns - n.last_check_ns >= kCheckEveryNs) {
        n.last_check_ns = snap.ts_ns;
        CheckRecent(snap.node, n);
      }
    }
    if (since < warmup_ns_) return;
    ++n.samples;
    if (n.trend.count() == 0) {
      n.start_ns = snap.ts_ns;
      n.first_bytes = bytes;
    }
    n.trend.Add(static_cast<double>(snap.ts_ns) / kNsPerSecond, bytes);
    n.last_bytes = bytes;
    n.last_ns = snap.ts_ns;
    if (n.clock.Due(snap.ts_ns)) Evaluate(snap.node, n, snap.ts_ns);
  }
  void OnStep(const StepRow& s) override {
    NodeState& n = Node(s.node);
    if (!n.step_seen) {
      // Training began: what came before was initialisation. The warm-up counts from here.
      n.step_seen = true;
      n.first_seen_ns = s.start_ns;
      n.trend = {};
      n.window.Clear();
      n.at_last_step = {};
      result().datapoints -= n.judged;
      n.samples = n.judged = 0;
    }
    n.at_last_step = {n.trend, n.start_ns, n.last_ns, n.last_bytes, n.samples, n.judged};
  }
  void Finalize(int64_t) override {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      NodeState& n = nodes_[i];
      if (n.step_seen) {  // judge the training loop, not its teardown
        result().datapoints -= n.judged - n.at_last_step.judged;
        n.trend = n.at_last_step.trend;
        n.start_ns = n.at_last_step.start_ns;
        n.last_ns = n.at_last_step.last_ns;
        n.last_bytes = n.at_last_step.last_bytes;
        n.samples = n.at_last_step.samples;
        n.judged = n.at_last_step.judged;
      }
      if (n.trend.count() > 0) Evaluate(static_cast<int32_t>(i), n, 0);
    }
  }

 private:
  static constexpr int64_t kCheckEveryNs = 1'000'000'000;  // recent samples: once a data second
  struct Trend {
    stats::LinearTrend trend;
    int64_t start_ns = 0, last_ns = 0;
    double last_bytes = 0;
    int64_t samples = 0, judged = 0;
  };
  struct NodeState {
    stats::LinearTrend trend;
    ScanClock clock{60'000'000'000};
    GrowthWindow window;
    int64_t first_seen_ns = 0, start_ns = 0, last_ns = 0, last_check_ns = INT64_MIN / 2;
    double first_bytes = 0, last_bytes = 0;
    int64_t samples = 0;  // samples in the trend
    int64_t judged = 0;   // samples read (the trend's and the recent window's)
    double rss = 0, cgroup_limit = 0, mem_total = 0, mem_used = 0;  // latest values
    bool fired = false;
    bool step_seen = false;
    Trend at_last_step;  // the trend as it was when the last step ended
  };
  struct Limit {
    double limit = 0, in_use = 0;
    std::string source;
  };

  NodeState& Node(int32_t node) {
    const size_t before = nodes_.size();
    NodeState& n = Grow(nodes_, static_cast<size_t>(node));
    for (size_t i = before; i < nodes_.size(); ++i) nodes_[i].window = GrowthWindow(window_);
    return n;
  }

  // The memory the job can grow into: the cgroup's memory.max when it has one, else the node's
  // memory (recorded, else the node facts); none when neither is known.
  Limit LimitOf(int32_t node_id, const NodeState& n) const {
    if (n.cgroup_limit > 0) return {n.cgroup_limit, n.rss, "the cgroup's memory.max"};
    double total = n.mem_total;
    const model::NodeInfo* info = ctx().NodeInfo(node_id);
    if (total <= 0 && info != nullptr && info->memory_total_bytes) {
      total = static_cast<double>(*info->memory_total_bytes);
    }
    if (total <= 0) return {};
    return {total, n.mem_used > 0 ? n.mem_used : n.rss, "the node's memory"};
  }
  static json SecondsLeft(const Limit& lim, double rate_per_s) {
    if (lim.limit <= 0 || rate_per_s <= 0) return nullptr;
    return Round(std::max(0.0, lim.limit - lim.in_use) / rate_per_s, 1);
  }
  static std::string Projection(const json& seconds_left, const Limit& lim) {
    if (seconds_left.is_null()) return "";
    return "; at this rate the job runs out of memory in " +
           DurationText(seconds_left.get<double>()) + " (" + lim.source + ": " +
           BytesText(lim.limit) + ", " + BytesText(lim.in_use) + " in use)";
  }

  void CheckRecent(int32_t node_id, NodeState& n) {
    const std::optional<GrowthFit> fit = n.window.Steady();
    if (!fit) return;
    // Enough growth to matter (a healthy heap grows a few MB while training settles; near a
    // full node even that would "project" an out-of-memory).
    const double grown = fit->rate_per_s * static_cast<double>(fit->end_ns - fit->start_ns) / 1e9;
    if (grown < min_growth_bytes_) return;
    const Limit lim = LimitOf(node_id, n);
    const json left = SecondsLeft(lim, fit->rate_per_s);
    const bool oom = !left.is_null() && left.get<double>() <= horizon_s_;
    if (!oom && fit->rate_per_s < fast_rate_) return;
    n.fired = true;
    ++result().violations;
    const std::string& node = ctx().NodeName(node_id);
    const double seconds = static_cast<double>(fit->end_ns - fit->start_ns) / kNsPerSecond;
    Emit(MakeFinding(
        oom ? Severity::kCritical : Severity::kWarning, node, "tree", fit->start_ns, fit->end_ns,
        "Host memory of the training processes on " + node + " grows " +
            BytesText(fit->rate_per_s) + "/s (R² " + Fixed(fit->r_squared, 2) + " over " +
            Fixed(seconds, 0) + " s, " + std::to_string(fit->points) + " samples, " +
            BytesText(fit->first_value) + " -> " + BytesText(fit->last_value) + ")" +
            Projection(left, lim),
        std::string(oom ? "Checkpoint now if the job must survive (a `stop`, `command` or "
                          "`webhook` action on this rule can do it for you). "
                        : "") +
            "Looks like a host memory leak: tensors or Python objects kept across steps "
            "(lists of losses or outputs, growing caches, a DataLoader worker copying a large "
            "dataset object). Store .item() values, not tensors; use tracemalloc or memray to "
            "find what grows.",
        {{"basis", "recent samples"},
         {"growth_bytes_per_second", Round(fit->rate_per_s, 0)},
         {"growth_bytes_per_hour", Round(fit->rate_per_s * 3600, 0)},
         {"r_squared", Round(fit->r_squared, 4)},
         {"samples", fit->points},
         {"start_ns", fit->start_ns},
         {"end_ns", fit->end_ns},
         {"first_bytes", fit->first_value},
         {"last_bytes", fit->last_value},
         {"fitted_last_bytes", Round(fit->fitted_end, 0)},
         {"thirds_bytes_per_second",
          {Round(fit->third_rates[0], 0), Round(fit->third_rates[1], 0),
           Round(fit->third_rates[2], 0)}},
         {"limit_bytes", lim.limit > 0 ? json(lim.limit) : json(nullptr)},
         {"limit_source", lim.source},
         {"in_use_bytes", lim.limit > 0 ? json(lim.in_use) : json(nullptr)},
         {"seconds_until_limit", left},
         {"projected_oom", oom},
         {"oom_horizon_s", horizon_s_},
         {"fast_growth_bytes_per_second", fast_rate_},
         {"fitted_growth_bytes", Round(grown, 0)},
         {"min_window_growth_bytes", min_growth_bytes_},
         {"min_r_squared", window_.min_r_squared},
         {"min_growth_bytes_per_hour", min_rate_},
         {"points", n.window.Points(fit->start_ns, 60)}}));
  }

  void Evaluate(int32_t node_id, NodeState& n, int64_t now_ns) {
    if (now_ns != 0) n.last_ns = now_ns;
    if (n.fired || n.last_ns - n.start_ns < min_duration_ns_) return;
    const double per_hour = n.trend.slope() * 3600;
    const double r2 = n.trend.r_squared();
    if (per_hour < min_rate_ || r2 < min_r2_) return;
    n.fired = true;
    ++result().violations;
    const std::string& node = ctx().NodeName(node_id);
    const model::NodeInfo* info = ctx().NodeInfo(node_id);
    json hours_left = nullptr;
    if (info != nullptr && info->memory_total_bytes) {
      hours_left =
          Round((static_cast<double>(*info->memory_total_bytes) - n.last_bytes) / per_hour, 2);
    }
    const Limit lim = LimitOf(node_id, n);
    const json left = SecondsLeft(lim, per_hour / 3600);
    const bool oom = !left.is_null() && left.get<double>() <= horizon_s_;
    Emit(MakeFinding(
        oom ? Severity::kCritical : Severity::kWarning, node, "tree", n.start_ns, n.last_ns,
        "Resident memory of the training processes on " + node + " grows steadily by " +
            Fixed(per_hour / (1 << 20), 0) + " MiB/hour (" + Fixed(n.first_bytes / (1 << 20), 0) +
            " -> " + Fixed(n.last_bytes / (1 << 20), 0) + " MiB, r^2 " + Fixed(r2, 2) + ")" +
            Projection(left, lim),
        "Looks like a host memory leak: tensors or Python objects kept across steps (lists of "
        "losses or outputs, growing caches, a DataLoader worker copying a large dataset "
        "object). Store .item() values, not tensors; use tracemalloc or memray to find what "
        "grows.",
        {{"basis", "trend since warm-up"},
         {"growth_bytes_per_hour", Round(per_hour, 0)},
         {"growth_bytes_per_second", Round(per_hour / 3600, 0)},
         {"r_squared", Round(r2, 4)},
         {"first_bytes", n.first_bytes},
         {"last_bytes", n.last_bytes},
         {"samples", n.trend.count()},
         {"start_ns", n.start_ns},
         {"end_ns", n.last_ns},
         {"hours_until_node_memory_full", hours_left},
         {"limit_bytes", lim.limit > 0 ? json(lim.limit) : json(nullptr)},
         {"limit_source", lim.source},
         {"in_use_bytes", lim.limit > 0 ? json(lim.in_use) : json(nullptr)},
         {"seconds_until_limit", left},
         {"projected_oom", oom},
         {"min_r_squared", min_r2_},
         {"min_growth_bytes_per_hour", min_rate_}}));
  }

  double min_rate_, min_r2_;
  int64_t min_duration_ns_, warmup_ns_, settle_ns_, unstepped_ns_;
  double horizon_s_, fast_rate_, min_growth_bytes_;
  GrowthOptions window_;
  std::vector<NodeState> nodes_;
};

// ---------------------------------------------------------------------------------------------
// GPUMemoryGrowth: per GPU, memory in use (gpu_memory_used_ratio) judged from the recent
// samples as HostMemoryGrowth's first test does: steady growth that fills the GPU within
// `oom_horizon_s` at its rate fires at once (critical), from `settle_s` after the node's first
// step (without steps: `warmup_s` after the GPU's first sample). SageMaker's GPUMemoryIncrease
// (fixed windows after `patience` samples) stays as it is.
class GpuMemoryGrowthRule : public Rule {
 public:
  GpuMemoryGrowthRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        warmup_ns_(this->params().Nanoseconds("warmup_s")),
        settle_ns_(this->params().Nanoseconds("settle_s")),
        horizon_s_(this->params().Number("oom_horizon_s")),
        min_growth_(this->params().Number("min_window_growth_ratio")) {
    window_.window_ns = this->params().Nanoseconds("window_s");
    window_.min_span_ns = this->params().Nanoseconds("min_window_s");
    window_.min_points = std::max<int64_t>(3, this->params().Integer("min_points"));
    window_.min_r_squared = this->params().Number("min_r_squared");
    window_.min_rate_per_s = this->params().Number("min_growth_ratio_per_hour") / 3600;
  }

  void OnSnapshot(const Snapshot& snap) override {
    for (const SampleValue& v : snap.values) {
      const SeriesKey& key = ctx().Series(v.series);
      if (key.kind == MetricKind::kGpuMemTotal) totals_[{key.node, key.device_index}] = v.value;
    }
    for (const SampleValue& v : snap.values) {
      const SeriesKey& key = ctx().Series(v.series);
      if (key.kind != MetricKind::kGpuMemUtil) continue;
      auto [it, added] = gpus_.try_emplace(v.series);
      Gpu& g = it->second;
      if (added) {
        g.window = GrowthWindow(window_);
        g.node = key.node;
        g.first_seen_ns = snap.ts_ns;
        auto started = first_step_ns_.find(key.node);
        if (started != first_step_ns_.end()) g.first_seen_ns = started->second, g.step_seen = true;
      }
      if (snap.ts_ns - g.first_seen_ns < (g.step_seen ? settle_ns_ : warmup_ns_)) continue;
      ++result().datapoints;
      ++g.judged;
      g.window.Add(snap.ts_ns, v.value);
      if (g.fired || snap.ts_ns - g.last_check_ns < kCheckEveryNs) continue;
      g.last_check_ns = snap.ts_ns;
      Check(v.series, g);
    }
  }
  void OnStep(const StepRow& s) override {
    if (!first_step_ns_.emplace(s.node, s.start_ns).second) return;
    for (auto& [series, g] : gpus_) {
      if (g.node != s.node || g.step_seen) continue;
      g.step_seen = true;
      g.first_seen_ns = s.start_ns;
      g.window.Clear();
      result().datapoints -= g.judged;
      g.judged = 0;
    }
  }

 private:
  static constexpr int64_t kCheckEveryNs = 1'000'000'000;
  struct Gpu {
    GrowthWindow window;
    int32_t node = 0;
    int64_t first_seen_ns = 0, last_check_ns = INT64_MIN / 2, judged = 0;
    bool step_seen = false, fired = false;
  };

  void Check(int32_t series, Gpu& g) {
    const std::optional<GrowthFit> fit = g.window.Steady();
    if (!fit) return;
    const double grown = fit->rate_per_s * static_cast<double>(fit->end_ns - fit->start_ns) / 1e9;
    if (grown < min_growth_) return;
    const double left = std::max(0.0, 1.0 - fit->last_value) / fit->rate_per_s;
    if (left > horizon_s_) return;
    g.fired = true;
    ++result().violations;
    const SeriesKey& key = ctx().Series(series);
    const std::string& node = ctx().NodeName(key.node);
    auto total = totals_.find({key.node, key.device_index});
    const double total_bytes = total == totals_.end() ? 0 : total->second;
    const double seconds = static_cast<double>(fit->end_ns - fit->start_ns) / kNsPerSecond;
    Emit(MakeFinding(
        Severity::kCritical, node, key.device, fit->start_ns, fit->end_ns,
        key.device + " memory on " + node + " grows " + Fixed(fit->rate_per_s * 100, 2) +
            " %/s of the GPU" +
            (total_bytes > 0 ? " (" + BytesText(fit->rate_per_s * total_bytes) + "/s of " +
                                   BytesText(total_bytes) + ")"
                             : std::string()) +
            " (R² " + Fixed(fit->r_squared, 2) + " over " + Fixed(seconds, 0) + " s, " +
            Pct(fit->first_value) + " -> " + Pct(fit->last_value) +
            "); at this rate it is full in " + DurationText(left),
        "GPU memory keeps growing: the job will fail with CUDA out of memory. Checkpoint now if "
        "it must survive (a `stop`, `command` or `webhook` action on this rule can do it). Look "
        "for tensors kept across steps (losses accumulated without .item()/.detach(), lists of "
        "outputs, growing caches) or batches / sequence lengths that grow.",
        {{"basis", "recent samples"},
         {"growth_ratio_per_second", Round(fit->rate_per_s, 6)},
         {"growth_bytes_per_second",
          total_bytes > 0 ? json(Round(fit->rate_per_s * total_bytes, 0)) : json(nullptr)},
         {"r_squared", Round(fit->r_squared, 4)},
         {"samples", fit->points},
         {"start_ns", fit->start_ns},
         {"end_ns", fit->end_ns},
         {"first_ratio", fit->first_value},
         {"last_ratio", fit->last_value},
         {"total_bytes", total_bytes > 0 ? json(total_bytes) : json(nullptr)},
         {"seconds_until_limit", Round(left, 1)},
         {"projected_oom", true},
         {"oom_horizon_s", horizon_s_},
         {"min_r_squared", window_.min_r_squared},
         {"points", g.window.Points(fit->start_ns, 60)}}));
  }

  int64_t warmup_ns_, settle_ns_;
  double horizon_s_, min_growth_;
  GrowthOptions window_;
  std::map<int32_t, Gpu> gpus_;  // by series
  std::map<int32_t, int64_t> first_step_ns_;
  std::map<std::pair<int32_t, int>, double> totals_;  // (node, GPU index) -> bytes
};

}  // namespace

RuleFactory HostMemoryGrowth() { return FactoryOf<HostMemoryGrowthRule>(); }
RuleFactory GpuMemoryGrowth() { return FactoryOf<GpuMemoryGrowthRule>(); }

}  // namespace trainprof::analyze::rules::own
