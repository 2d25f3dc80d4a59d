// trainprof's own rules, beyond SageMaker's: DataLoaderStarvation, GPUIdleBetweenSteps,
// HostMemoryGrowth, GPUMemoryGrowth, CPUThrottling, StragglerRank, CommunicationBound, LongPauses,
// UnderusedInstance. Ratios are 0..1 like the stored metrics. Each finding carries the values
// that made it fire and advice users can act on.

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <tuple>

#include "analyze/rules/growth.h"
#include "analyze/rules/rule_util.h"
#include "analyze/rules/share_bound.h"
#include "base/json_dump.h"

namespace trainprof::analyze::rules {
namespace {

using model::Severity;
using nlohmann::json;

constexpr double kNsPerSecond = 1e9;
using StreamKey = std::tuple<std::string, int64_t, int64_t, std::string>;  // node, rank, pid, mode

// ---------------------------------------------------------------------------------------------
// Shared shape of the two step-share rules: per stream, the share of time a part of each step
// takes (the wait for data; the gap before the step), decided from a confidence bound over the
// recent steps (issue 19: evidence, not a count of windows). After `warmup_steps`, steps are
// grouped into clusters of `cluster_steps` consecutive steps; each completed cluster closes the
// spans of the last J clusters, from `min_steps` to `window_steps` steps. A span's share is the
// ratio R = sum(part) / sum(whole); its variance is the ratio estimator's over the clusters,
// J / (J - 1) * sum_j (P_j - R W_j)^2 / (sum W)^2, so that a burst of slow steps, which comes in
// one or two clusters, widens the bound instead of counting as many independent steps. The rule
// fires when the one-sided lower bound R - z * sqrt(var) of some span exceeds `threshold_ratio`
// (the span with the highest bound is the evidence), once per episode; the episode ends when the
// longest span's upper bound is below the threshold. violations = clusters judged while some
// span's bound is above it.
class StepShareRule : public Rule {
 public:
  StepShareRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        threshold_(this->params().Number("threshold_ratio")),
        window_(std::max<int64_t>(2, this->params().Integer("window_steps"))),
        min_steps_(std::clamp<int64_t>(this->params().Integer("min_steps"), 2, window_)),
        // at least 2 clusters in the shortest span (a variance needs two)
        cluster_(std::clamp<int64_t>(this->params().Integer("cluster_steps"), 1, min_steps_ / 2)),
        warmup_(this->params().Integer("warmup_steps")),
        confidence_(std::clamp(this->params().Number("confidence"), 0.5, 0.999999)),
        z_(NormalQuantile(confidence_)) {}

  void OnStep(const StepRow& s) override {
    Stream& st = streams_[{ctx().NodeName(s.node), s.rank, s.pid, s.mode}];
    ++st.seen;
    const int64_t prev_end = st.prev_end_ns;
    st.prev_end_ns = s.end_ns();
    if (st.seen <= warmup_) return;
    double part = 0;
    if (!Measure(s, prev_end, &part)) return;
    ++result().datapoints;
    st.node = s.node;
    st.rank = s.rank;
    st.pid = s.pid;
    st.recent.push_back({s.start_ns, s.end_ns(), s.step, part, static_cast<double>(s.duration_ns),
                         Whole(part, static_cast<double>(s.duration_ns))});
    if (static_cast<int64_t>(st.recent.size()) > window_) st.recent.pop_front();
    if (++st.measured % cluster_ == 0) Judge(st);
  }

 protected:
  struct StepPart {
    int64_t start_ns = 0, end_ns = 0, step = 0;
    double part = 0, step_ns = 0, whole = 0;
  };
  struct Span {
    int64_t steps = 0, clusters = 0, first_step = 0, last_step = 0, start_ns = 0, end_ns = 0;
    double part_ns = 0, step_ns = 0;
    double share = 0, lower = 0, upper = 1;
  };
  struct Stream {
    int64_t seen = 0, prev_end_ns = 0, rank = 0, pid = 0;
    int64_t measured = 0;  // steps measured after the warm-up
    int32_t node = 0;
    std::deque<StepPart> recent;  // the last window_steps measured steps
    bool open = false;            // an episode is open (reported)
  };
  // The part of this step the rule measures; false to skip the step.
  virtual bool Measure(const StepRow& s, int64_t prev_end_ns, double* part_ns) = 0;
  // What the part is a share of: the step (the part lies inside it) or step + part.
  virtual double Whole(double part_ns, double step_ns) const = 0;
  virtual void Report(const Stream& st, const Span& span) = 0;

  // The rule's own evidence with what every finding of these rules carries about its span.
  json Evidence(const Span& sp, json own) const {
    own.update({{"steps", sp.steps},
                {"first_step", sp.first_step},
                {"last_step", sp.last_step},
                {"share_lower", Round(sp.lower)},
                {"share_upper", Round(sp.upper)},
                {"confidence", confidence_},
                {"threshold_ratio", threshold_},
                {"clusters", sp.clusters},
                {"cluster_steps", cluster_},
                {"min_steps", min_steps_},
                {"window_steps", window_}});
    return own;
  }
  double confidence() const { return confidence_; }

  double threshold_;

 private:
  void Judge(Stream& st) {
    const auto n_all = static_cast<int64_t>(st.recent.size());
    if (n_all < min_steps_) return;
    // Newest cluster first: sums over the last J clusters for every J in one pass.
    double p = 0, w = 0, pp = 0, pw = 0, ww = 0, step_ns = 0;
    std::optional<Span> best;
    Span longest;
    int64_t n = 0, clusters = 0;
    auto it = st.recent.rbegin();
    while (n + cluster_ <= n_all) {
      double cp = 0, cw = 0;
      for (int64_t i = 0; i < cluster_; ++i, ++it, ++n) {
        cp += it->part;
        cw += it->whole;
        step_ns += it->step_ns;
      }
      ++clusters;
      p += cp;
      w += cw;
      pp += cp * cp;
      pw += cp * cw;
      ww += cw * cw;
      if (n < min_steps_ || w <= 0) continue;
      const StepPart& first = *std::prev(it);
      Span sp;
      sp.steps = n;
      sp.clusters = clusters;
      sp.share = p / w;
      // sum_j (P_j - R W_j)^2 = pp - 2 R pw + R^2 ww (>= 0 up to rounding)
      const double resid = std::max(0.0, pp - 2 * sp.share * pw + sp.share * sp.share * ww);
      const double j = static_cast<double>(clusters);
      const double se = std::sqrt(j / (j - 1) * resid) / w;
      sp.lower = std::max(0.0, sp.share - z_ * se);
      sp.upper = std::min(1.0, sp.share + z_ * se);
      sp.part_ns = p;
      sp.step_ns = step_ns;
      sp.first_step = first.step;
      sp.start_ns = first.start_ns;
      sp.last_step = st.recent.back().step;
      sp.end_ns = st.recent.back().end_ns;
      if (sp.lower > threshold_ && (!best || sp.lower > best->lower)) best = sp;
      longest = sp;
    }
    if (best) {
      ++result().violations;
      if (!st.open) {
        st.open = true;
        Report(st, *best);
      }
    } else if (st.open && longest.steps > 0 && longest.upper < threshold_) {
      st.open = false;  // clearly below again: a later episode is a new finding
    }
  }

  int64_t window_, min_steps_, cluster_, warmup_;
  double confidence_, z_;
  std::map<StreamKey, Stream> streams_;
};

class DataLoaderStarvationRule : public StepShareRule {
 public:
  using StepShareRule::StepShareRule;
  void OnSnapshot(const Snapshot& snap) override { gpus_.OnSnapshot(ctx(), snap); }

 protected:
  bool Measure(const StepRow& s, int64_t, double* part) override {
    if (!Recorded(s.data_wait_ns) || s.duration_ns <= 0) return false;
    *part = static_cast<double>(s.data_wait_ns);
    return true;
  }
  double Whole(double, double step_ns) const override { return step_ns; }
  void Report(const Stream& st, const Span& sp) override {
    const std::string& node = ctx().NodeName(st.node);
    const model::NodeInfo* info = ctx().NodeInfo(st.node);
    const json cores = info && info->cpu_cores ? json(*info->cpu_cores) : json(nullptr);
    const double n = static_cast<double>(sp.steps);
    const double share = sp.share;
    const std::string cores_text = cores.is_null() ? std::string("n/a") : DumpJson(cores);
    const bool gpu = gpus_.Has(ctx(), st.node);
    Emit(MakeFinding(
        Severity::kWarning, node, WhoDevice(st.rank, st.pid), sp.start_ns, sp.end_ns,
        Capitalized(Who(st.rank, st.pid)) + " on " + node + " waits for its next batch " +
            Pct(share) + " of the step time (steps " + std::to_string(sp.first_step) + "-" +
            std::to_string(sp.last_step) + "; at least " + Pct(sp.lower) + " at " +
            Fixed(confidence() * 100, 0) + "% confidence, threshold " + Pct(threshold_) + ")",
        gpu ? "The input pipeline cannot keep up. Use DataLoader(num_workers=N) with N up to "
              "the cores per GPU (this node: " +
                  cores_text +
                  " cores), pin_memory=True, persistent_workers=True and a larger "
                  "prefetch_factor; move decoding/augmentation to the GPU or pre-process the "
                  "dataset offline."
            : "The input pipeline cannot keep up. Use DataLoader(num_workers=N) "
              "(this node: " +
                  cores_text +
                  " cores, shared with torch's operator threads: keep workers + "
                  "torch.get_num_threads() within them), persistent_workers=True and a larger "
                  "prefetch_factor, make decoding/augmentation cheaper, or pre-process the "
                  "dataset offline.",
        Evidence(sp, {{"data_wait_share", Round(share)},
                      {"mean_data_wait_ms", Round(sp.part_ns / n / 1e6, 3)},
                      {"mean_step_ms", Round(sp.step_ns / n / 1e6, 3)},
                      {"cores", cores},
                      {"gpu", gpu}})));
  }

 private:
  GpuPresence gpus_;
};

class GpuIdleBetweenStepsRule : public StepShareRule {
 public:
  GpuIdleBetweenStepsRule(const RuleSpec& spec, Params params)
      : StepShareRule(spec, std::move(params)),
        max_gap_ns_(this->params().Number("max_gap_s") * kNsPerSecond) {}

  void OnSnapshot(const Snapshot& snap) override {
    for (const SampleValue& v : snap.values) {
      if (v.kind == MetricKind::kGpuUtil) {
        Grow(gpu_seen_, static_cast<size_t>(snap.node)) = 1;
        return;
      }
    }
  }

 protected:
  bool Measure(const StepRow& s, int64_t prev_end, double* part) override {
    // Only where there is a GPU to idle: the node lists GPUs or GPU samples were seen. On a
    // CPU-only host a gap between steps idles nothing the rule can advise about.
    if (!HasGpu(s.node)) return false;
    if (prev_end == 0) return false;
    const double gap = static_cast<double>(s.start_ns - prev_end);
    // Overlapping steps (gap < 0) add nothing; long pauses belong to LongPauses.
    *part = std::clamp(gap, 0.0, max_gap_ns_);
    if (gap > max_gap_ns_) *part = 0;
    return true;
  }
  double Whole(double part_ns, double step_ns) const override { return part_ns + step_ns; }
  void Report(const Stream& st, const Span& sp) override {
    const std::string& node = ctx().NodeName(st.node);
    const double n = static_cast<double>(sp.steps);
    const double share = sp.share;
    Emit(MakeFinding(
        Severity::kWarning, node, WhoDevice(st.rank, st.pid), sp.start_ns, sp.end_ns,
        Capitalized(Who(st.rank, st.pid)) + " on " + node + " spends " + Pct(share) +
            " of its time between steps (host-side gaps of " + Fixed(sp.part_ns / n / 1e6) +
            " ms per step, steps " + std::to_string(sp.first_step) + "-" +
            std::to_string(sp.last_step) + "; at least " + Pct(sp.lower) + " at " +
            Fixed(confidence() * 100, 0) + "% confidence, threshold " + Pct(threshold_) + ")",
        "Work between optimizer steps leaves the GPU idle: log and compute metrics every N "
        "steps instead of every step, avoid host synchronisations (.item(), .cpu(), "
        "printing tensors), use non_blocking copies, and consider torch.compile or CUDA "
        "graphs to cut Python overhead.",
        Evidence(sp, {{"gap_share", Round(share)},
                      {"mean_gap_ms", Round(sp.part_ns / n / 1e6, 3)},
                      {"mean_step_ms", Round(sp.step_ns / n / 1e6, 3)}})));
  }

 private:
  bool HasGpu(int32_t node) {
    if (static_cast<size_t>(node) < gpu_seen_.size() && gpu_seen_[static_cast<size_t>(node)] != 0) {
      return true;
    }
    const model::NodeInfo* info = ctx().NodeInfo(node);
    return info != nullptr && !info->gpus.empty();
  }

  double max_gap_ns_;
  std::vector<uint8_t> gpu_seen_;  // per node: GPU samples seen
};

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

// ---------------------------------------------------------------------------------------------
// CPUThrottling: the container's CFS quota throttles it (cgroup_cpu_throttled_periods_ratio, the
// share of scheduler periods in which the cgroup was throttled), per data-time window.
class CpuThrottlingRule : public Rule {
 public:
  CpuThrottlingRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        threshold_(this->params().Number("threshold_ratio")),
        window_ns_(this->params().Nanoseconds("window_s")) {}

  void OnSnapshot(const Snapshot& snap) override {
    for (const SampleValue& v : snap.values) {
      if (v.kind != MetricKind::kCgroupThrottled) continue;
      NodeState& n = Grow(nodes_, static_cast<size_t>(snap.node));
      if (n.count > 0 && snap.ts_ns - n.start_ns >= window_ns_) Evaluate(snap.node, n);
      if (n.count == 0) n.start_ns = snap.ts_ns;
      n.end_ns = snap.ts_ns;
      n.sum += v.value;
      n.max = std::max(n.max, v.value);
      ++n.count;
      ++result().datapoints;
    }
  }
  void Finalize(int64_t) override {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].count >= 5) Evaluate(static_cast<int32_t>(i), nodes_[i]);
    }
  }

 private:
  struct NodeState {
    int64_t start_ns = 0, end_ns = 0, count = 0;
    double sum = 0, max = 0;
    Episode episode;
  };
  void Evaluate(int32_t node_id, NodeState& n) {
    const double mean = n.sum / static_cast<double>(n.count);
    const bool violating = mean > threshold_;
    if (violating) ++result().violations;
    if (n.episode.Update(violating)) {
      const std::string& node = ctx().NodeName(node_id);
      Emit(
          MakeFinding(Severity::kWarning, node, "", n.start_ns, n.end_ns,
                      "The container on " + node + " is CPU-throttled in " + Pct(mean) +
                          " of scheduler periods (threshold " + Pct(threshold_) + ")",
                      "The cgroup's CPU limit (cpu.max) is lower than what the job uses: raise the "
                      "container's CPU limit / request, or use fewer DataLoader workers and set "
                      "torch.set_num_threads() to fit the quota.",
                      {{"throttled_ratio_mean", Round(mean)},
                       {"throttled_ratio_max", Round(n.max)},
                       {"samples", n.count},
                       {"threshold_ratio", threshold_}}));
    }
    n.count = 0;
    n.sum = n.max = 0;
  }
  double threshold_;
  int64_t window_ns_;
  std::vector<NodeState> nodes_;
};

// ---------------------------------------------------------------------------------------------
// Cross-rank rules in data-time windows: StragglerRank (a rank's median step time against the
// median of all ranks) and CommunicationBound (collective time as a share of step time).
class RankWindowRule : public Rule {
 public:
  RankWindowRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        threshold_(this->params().Number("threshold_ratio")),
        window_ns_(this->params().Nanoseconds("window_s")) {}

  void OnStep(const StepRow& s) override {
    Tick(s.end_ns());
    Grow(node_ids_, static_cast<size_t>(s.node)) = ctx().NodeName(s.node);
    Rank& r = ranks_[{ctx().NodeName(s.node), s.rank}];
    r.durations_ms.push_back(static_cast<double>(s.duration_ns) / 1e6);
    if (Recorded(s.data_wait_ns)) r.data_wait_ns += s.data_wait_ns;
    r.step_ns += s.duration_ns;
    // This step's cycle: the gap since the rank's previous step (a pause longer than
    // max_gap_ns_ is LongPauses' business, not a straggler's) and the collectives that ended
    // since then; what is left is the rank's own time: compute, data and host gaps.
    const int64_t gap =
        r.prev_end_ns == 0 ? 0 : std::clamp<int64_t>(s.start_ns - r.prev_end_ns, 0, max_gap_ns_);
    const int64_t coll = std::min(r.pending_collective_ns, s.duration_ns + gap);
    r.prev_end_ns = s.end_ns();
    r.pending_collective_ns = 0;
    r.gap_ms.push_back(static_cast<double>(gap) / 1e6);
    r.step_collective_ms.push_back(static_cast<double>(coll) / 1e6);
    r.own_ms.push_back(static_cast<double>(s.duration_ns + gap - coll) / 1e6);
    if (recent_cap_ > 0) {
      // The last recent_cap_ steps, across windows, for the checks of the open window.
      r.recent.push_back({static_cast<double>(s.duration_ns + gap - coll) / 1e6,
                          static_cast<double>(s.duration_ns) / 1e6, static_cast<double>(coll) / 1e6,
                          static_cast<double>(gap) / 1e6});
      if (r.recent.size() > recent_cap_) r.recent.pop_front();
    }
    ++result().datapoints;
  }
  void OnSnapshot(const Snapshot& snap) override { gpus_.OnSnapshot(ctx(), snap); }
  void OnSpan(const SpanEvent& e) override {
    Tick(e.end_ns());
    if (e.category != "collective") return;
    Rank& r = ranks_[{ctx().NodeName(e.node), e.rank}];
    r.collective_ns += e.duration_ns;
    r.collective_by_name[e.name] += e.duration_ns;
    r.pending_collective_ns += e.duration_ns;
  }
  void Finalize(int64_t) override {
    if (window_start_ns_ != 0) Evaluate(last_ns_);
  }

 protected:
  struct Rank {
    std::vector<double> durations_ms;
    // Per step: time outside collectives (step + gap before it - collectives), the
    // collectives, the gap.
    std::vector<double> own_ms, step_collective_ms, gap_ms;
    int64_t prev_end_ns = 0, pending_collective_ns = 0;  // kept across windows
    int64_t step_ns = 0, data_wait_ns = 0, collective_ns = 0;
    std::map<std::string, int64_t> collective_by_name;
    Episode episode;
    bool early_fired = false;  // reported by a check of the open window
    struct Cycle {
      double own, step, coll, gap;  // ms
    };
    std::deque<Cycle> recent;  // the last recent_cap_ steps, kept across windows
  };
  using RankKey = std::pair<std::string, int64_t>;
  // `partial`: a check of the window so far (rules that decide before the window closes).
  virtual void EvaluateWindow(std::map<RankKey, Rank>& ranks, int64_t start, int64_t end,
                              bool partial) = 0;
  // Data time between checks of the open window; 0: judged only when it closes.
  int64_t early_check_ns_ = 0;
  size_t recent_cap_ = 0;  // steps per rank kept for those checks

  // Whether a node (by name) has a GPU, for advice that fits the machine.
  bool HasGpu(const std::string& node_name) const {
    for (int32_t i = 0; i < static_cast<int32_t>(node_ids_.size()); ++i) {
      if (node_ids_[static_cast<size_t>(i)] == node_name) return gpus_.Has(ctx(), i);
    }
    return false;
  }

  double threshold_;
  int64_t max_gap_ns_ = 10 * 1'000'000'000LL;
  GpuPresence gpus_;
  std::vector<std::string> node_ids_;  // engine node id -> name, as seen

 private:
  void Tick(int64_t t) {
    if (window_start_ns_ == 0) window_start_ns_ = last_check_ns_ = t;
    if (t - window_start_ns_ >= window_ns_) {
      Evaluate(t);
      window_start_ns_ = last_check_ns_ = t;
    } else if (early_check_ns_ > 0 && t - last_check_ns_ >= early_check_ns_) {
      last_check_ns_ = t;
      EvaluateWindow(ranks_, window_start_ns_, t, /*partial=*/true);
    }
    last_ns_ = t;
  }
  void Evaluate(int64_t end) {
    EvaluateWindow(ranks_, window_start_ns_, end, /*partial=*/false);
    for (auto& [key, r] : ranks_) {
      r.durations_ms.clear();
      r.own_ms.clear();
      r.step_collective_ms.clear();
      r.gap_ms.clear();
      r.step_ns = r.data_wait_ns = r.collective_ns = 0;
      r.collective_by_name.clear();
    }
  }
  int64_t window_ns_;
  int64_t window_start_ns_ = 0, last_ns_ = 0, last_check_ns_ = 0;
  std::map<RankKey, Rank> ranks_;
};

class StragglerRankRule : public RankWindowRule {
 public:
  StragglerRankRule(const RuleSpec& spec, Params params)
      : RankWindowRule(spec, std::move(params)),
        min_steps_(this->params().Integer("min_steps")),
        early_min_steps_(std::max<int64_t>(3, this->params().Integer("early_min_steps"))),
        z_(NormalQuantile(std::clamp(this->params().Number("confidence"), 0.5, 0.999999))) {
    max_gap_ns_ = this->params().Nanoseconds("max_gap_s");
    early_check_ns_ = this->params().Nanoseconds("check_s");
    recent_cap_ = static_cast<size_t>(std::min<int64_t>(early_min_steps_, 10000));
  }

 protected:
  // In synchronous training every rank's step cycle takes as long as the slowest rank's: the
  // others wait for it inside their collectives, so their steps are the long ones. The rank to
  // blame is the one with the most time of its own (outside collectives: compute, data loading,
  // gaps between steps), which is also the one that waits least in collectives. Without
  // collectives (independent processes) own time is the step cycle itself.
  //
  // Before the window closes (every `check_s` of data), a rank is named early when it is
  // above the threshold on medians and, with confidence, on most of its steps: the Wilson lower
  // bound of the share of its steps whose own time exceeds threshold_ratio x the median of
  // ranks is above one half (each rank with at least `early_min_steps` steps in the window).
  void EvaluateWindow(std::map<RankKey, Rank>& ranks, int64_t start, int64_t end,
                      bool partial) override {
    struct Active {
      Rank* rank;
      const RankKey* key;
      double own, step, coll, gap;
    };
    std::vector<Active> active;
    std::vector<double> owns;
    // Each active rank's own time per step: the window's, or (partial) its last steps.
    std::vector<std::vector<double>> own_of;
    for (auto& [key, r] : ranks) {
      if (partial) {
        if (static_cast<int64_t>(r.recent.size()) < early_min_steps_) continue;
        std::vector<double> own, step, coll, gap;
        for (const Rank::Cycle& c : r.recent) {
          own.push_back(c.own);
          step.push_back(c.step);
          coll.push_back(c.coll);
          gap.push_back(c.gap);
        }
        active.push_back({&r, &key, stats::Quantile(own, 0.5), stats::Quantile(step, 0.5),
                          stats::Quantile(coll, 0.5), stats::Quantile(gap, 0.5)});
        own_of.push_back(std::move(own));
      } else {
        if (static_cast<int64_t>(r.own_ms.size()) < min_steps_) continue;
        active.push_back(
            {&r, &key, stats::Quantile(r.own_ms, 0.5), stats::Quantile(r.durations_ms, 0.5),
             stats::Quantile(r.step_collective_ms, 0.5), stats::Quantile(r.gap_ms, 0.5)});
        own_of.push_back(r.own_ms);
      }
      owns.push_back(active.back().own);
    }
    if (active.size() < 2) return;
    const double typical = stats::Quantile(owns, 0.5);
    if (typical <= 0) return;
    for (size_t i = 0; i < active.size(); ++i) {
      const Active& a = active[i];
      const double ratio = a.own / typical;
      const bool violating = ratio > threshold_;
      // The share of this rank's steps beyond the threshold, and its lower bound.
      int64_t slow = 0;
      for (double own : own_of[i]) slow += own > threshold_ * typical ? 1 : 0;
      const double n_steps = static_cast<double>(own_of[i].size());
      const double slow_share = static_cast<double>(slow) / n_steps;
      const double slow_lower = WilsonLower(slow_share, n_steps, z_);
      if (partial) {
        // Named once while its recent steps stay slow; again only after they recovered.
        if (!violating) a.rank->early_fired = false;
        if (!violating || slow_lower <= 0.5 || a.rank->episode.open || a.rank->early_fired) {
          continue;
        }
        a.rank->early_fired = true;
      } else {
        if (violating) ++result().violations;
        const bool opened = a.rank->episode.Update(violating);
        if (!opened || a.rank->early_fired) continue;  // already named by an early check
      }
      double others_coll = 0;
      for (size_t j = 0; j < active.size(); ++j) {
        if (j != i) others_coll = std::max(others_coll, active[j].coll);
      }
      const bool waits_least = a.coll <= others_coll;
      const RankKey& key = *a.key;
      Emit(MakeFinding(
          Severity::kWarning, key.first, WhoDevice(key.second, 0), start, end,
          Capitalized(Who(key.second, 0)) + " on " + key.first + " is a straggler: median " +
              Fixed(a.own) +
              " ms per step of its own (compute, data and gaps between steps; step " +
              Fixed(a.step) + " ms, gap " + Fixed(a.gap) + " ms, collectives " + Fixed(a.coll) +
              " ms), " + Fixed(ratio, 2) + "x the median of the " + std::to_string(active.size()) +
              " ranks (" + Fixed(typical) + " ms)" +
              (others_coll > 0 && waits_least
                   ? "; it waits least in collectives while other ranks wait up to " +
                         Fixed(others_coll) + " ms per step for it"
                   : std::string()),
          std::string("One rank is slower than the others and, in synchronous training, holds "
                      "all of them back (they wait for it in their collectives). Check that "
                      "rank's time between steps (logging, checkpoints, host synchronisation on "
                      "that rank only), ") +
              (HasGpu(key.first) ? "its GPU (clocks, temperature, throttling, other processes), "
                                 : "its CPU share (other processes, threads per rank), ") +
              "its data shard (size, sequence lengths) and its host (CPU contention, slower "
              "disk).",
          {{"rank_median_own_ms", Round(a.own, 3)},
           {"median_of_ranks_own_ms", Round(typical, 3)},
           {"ratio", Round(ratio, 4)},
           {"rank_median_step_ms", Round(a.step, 3)},
           {"rank_median_collective_ms", Round(a.coll, 3)},
           {"rank_median_gap_ms", Round(a.gap, 3)},
           {"others_max_median_collective_ms", Round(others_coll, 3)},
           {"ranks_compared", active.size()},
           {"steps_in_window", own_of[i].size()},
           {"slow_step_share", Round(slow_share)},
           {"slow_step_share_lower", Round(slow_lower)},
           {"decided", partial ? "early (open window)" : "window closed"},
           {"own_ms", OwnPoints(own_of[i])},
           {"threshold_ratio", threshold_}}));
    }
  }

 private:
  // The rank's own time per step, the last 120 (for the finding's chart).
  static json OwnPoints(const std::vector<double>& v) {
    json out = json::array();
    for (size_t i = v.size() > 120 ? v.size() - 120 : 0; i < v.size(); ++i) {
      out.push_back(Round(v[i], 3));
    }
    return out;
  }
  int64_t min_steps_, early_min_steps_;
  double z_;
};

class CommunicationBoundRule : public RankWindowRule {
 public:
  using RankWindowRule::RankWindowRule;

 protected:
  void EvaluateWindow(std::map<RankKey, Rank>& ranks, int64_t start, int64_t end,
                      bool /*partial*/) override {
    for (auto& [key, r] : ranks) {
      if (r.step_ns <= 0) continue;
      const double share =
          std::min(1.0, static_cast<double>(r.collective_ns) / static_cast<double>(r.step_ns));
      const bool violating = share > threshold_;
      if (violating) ++result().violations;
      if (!r.episode.Update(violating)) continue;
      json by_name = json::object();
      for (const auto& [name, ns] : r.collective_by_name) by_name[name] = Ms(ns);
      Emit(MakeFinding(
          Severity::kWarning, key.first, WhoDevice(key.second, 0), start, end,
          Capitalized(Who(key.second, 0)) + " on " + key.first + " spends " + Pct(share) +
              " of its step time in collective communication (threshold " + Pct(threshold_) + ")",
          HasGpu(key.first)
              ? "Communication dominates the step: overlap it with compute (DDP bucket_cap_mb, "
                "gradient_as_bucket_view, FSDP prefetch), communicate less (gradient "
                "accumulation, a larger per-GPU batch, bf16/fp16 gradient compression), or use a "
                "faster interconnect (NVLink, EFA) / fewer nodes."
              : "Communication dominates the step: a rank may be waiting for a slower one "
                "(StragglerRank), or overlap it with compute (DDP bucket_cap_mb), communicate "
                "less (gradient accumulation, a larger batch per rank), or use fewer, larger "
                "nodes / a faster network.",
          {{"collective_share", Round(share)},
           {"collective_ms", Ms(r.collective_ns)},
           {"step_ms", Ms(r.step_ns)},
           {"collectives_ms_by_name", by_name},
           {"threshold_ratio", threshold_}}));
    }
  }
};

// ---------------------------------------------------------------------------------------------
// LongPauses: a gap between two consecutive steps of a process longer than
// max(min_pause_s, pause_factor x mean step); checkpoints overlapping the gap are named.
class LongPausesRule : public Rule {
 public:
  LongPausesRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        min_pause_ns_(this->params().Number("min_pause_s") * kNsPerSecond),
        factor_(this->params().Number("pause_factor")),
        max_findings_(this->params().Integer("max_findings")) {}

  void OnSpan(const SpanEvent& e) override {
    if (e.category != model::kCategoryPhase) return;
    auto& recent = phases_[ctx().NodeName(e.node)];
    recent.push_back(e);
    if (recent.size() > 32) recent.pop_front();
  }
  void OnStep(const StepRow& s) override {
    Stream& st = streams_[{ctx().NodeName(s.node), s.rank, s.pid, s.mode}];
    ++result().datapoints;
    if (st.prev_end_ns != 0) {
      const double gap = static_cast<double>(s.start_ns - st.prev_end_ns);
      const double limit = std::max(min_pause_ns_, factor_ * st.stats.mean() * 1e6);
      if (gap > limit) Report(s, st, gap, limit);
    }
    st.stats.Add(static_cast<double>(s.duration_ns) / 1e6);
    st.prev_end_ns = s.end_ns();
    st.prev_step = s.step;
  }

 private:
  struct Stream {
    stats::RunningStats stats;
    int64_t prev_end_ns = 0, prev_step = 0;
  };
  void Report(const StepRow& s, const Stream& st, double gap, double limit) {
    ++result().violations;  // every pause counts; findings are capped
    const std::string& node = ctx().NodeName(s.node);
    json overlapping = json::array();
    bool checkpoint = false;
    for (const SpanEvent& p : phases_[node]) {
      if (p.start_ns < s.start_ns && p.end_ns() > st.prev_end_ns) {
        overlapping.push_back(
            {{"phase", p.name}, {"start_ns", p.start_ns}, {"duration_ms", Ms(p.duration_ns)}});
        checkpoint |= p.name == "checkpoint";
      }
    }
    if (static_cast<int64_t>(result().findings.size()) >= max_findings_) return;
    Emit(MakeFinding(
        Severity::kWarning, node, WhoDevice(s.rank, s.pid), st.prev_end_ns, s.start_ns,
        "Training on " + Who(s.rank, s.pid) + " of " + node + " paused " +
            Fixed(gap / kNsPerSecond) + " s between steps " + std::to_string(st.prev_step) +
            " and " + std::to_string(s.step) + (checkpoint ? " while checkpointing" : "") +
            " (mean step " + Fixed(st.stats.mean()) + " ms)",
        checkpoint ? "Checkpointing stops training: save asynchronously (torch.distributed."
                     "checkpoint.async_save, a background thread), save less often, write to "
                     "local NVMe and upload in the background, or save only model and "
                     "optimizer state shards."
                   : "The training loop stopped for a long time: check periodic evaluation, "
                     "checkpointing, data re-sharding between epochs or blocking uploads, and "
                     "make them asynchronous or less frequent.",
        {{"pause_ms", Round(gap / 1e6, 3)},
         {"limit_ms", Round(limit / 1e6, 3)},
         {"mean_step_ms", Round(st.stats.mean(), 3)},
         {"step_before", st.prev_step},
         {"step_after", s.step},
         {"overlapping_phases", overlapping}}));
  }

  double min_pause_ns_, factor_;
  int64_t max_findings_;
  std::map<StreamKey, Stream> streams_;
  std::map<std::string, std::deque<SpanEvent>> phases_;
};

// ---------------------------------------------------------------------------------------------
// UnderusedInstance: the whole node is mostly idle during training (GPUs, GPU memory and CPU
// all low on average), so a smaller instance or a larger batch would do.
class UnderusedInstanceRule : public Rule {
 public:
  UnderusedInstanceRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        gpu_(this->params().Number("gpu_threshold_ratio")),
        mem_(this->params().Number("gpu_memory_threshold_ratio")),
        cpu_(this->params().Number("cpu_threshold_ratio")),
        min_duration_ns_(this->params().Nanoseconds("min_duration_s")) {}

  void OnStep(const StepRow& s) override {
    NodeState& n = Grow(nodes_, static_cast<size_t>(s.node));
    if (!n.training) {
      // Count from the first step: downloads and setup are not what the instance is for.
      n.training = true;
      n.Reset();
    }
  }
  void OnSnapshot(const Snapshot& snap) override {
    NodeState& n = Grow(nodes_, static_cast<size_t>(snap.node));
    double cpu = 0, gpu = 0, mem = 0, total = -1;
    int cores = 0, gpus = 0, mems = 0;
    for (const SampleValue& v : snap.values) {
      switch (v.kind) {
        case MetricKind::kCpuCore:
          cpu += v.value;
          ++cores;
          break;
        case MetricKind::kCpuTotal:
          total = v.value;
          break;
        case MetricKind::kGpuUtil:
          gpu += v.value;
          ++gpus;
          break;
        case MetricKind::kGpuMemUtil:
          mem += v.value;
          ++mems;
          break;
        default:
          break;
      }
    }
    if (cores == 0 && total < 0) return;
    ++result().datapoints;
    if (n.count == 0) n.start_ns = snap.ts_ns;
    n.end_ns = snap.ts_ns;
    ++n.count;
    n.cpu += total >= 0 ? total : cpu / cores;
    if (gpus > 0) {
      n.gpu += gpu / gpus;
      ++n.gpu_count;
    }
    if (mems > 0) {
      n.mem += mem / mems;
      ++n.mem_count;
    }
    if (n.training && n.clock.Due(snap.ts_ns)) Evaluate(snap.node, n);
  }
  void Finalize(int64_t) override {
    for (size_t i = 0; i < nodes_.size(); ++i) Evaluate(static_cast<int32_t>(i), nodes_[i]);
  }

 private:
  struct NodeState {
    bool training = false, fired = false;
    int64_t start_ns = 0, end_ns = 0, count = 0, gpu_count = 0, mem_count = 0;
    double cpu = 0, gpu = 0, mem = 0;
    ScanClock clock{60'000'000'000};
    void Reset() {
      count = gpu_count = mem_count = 0;
      cpu = gpu = mem = 0;
    }
  };
  void Evaluate(int32_t node_id, NodeState& n) {
    if (n.fired || n.count == 0 || n.end_ns - n.start_ns < min_duration_ns_) return;
    const double cpu = n.cpu / static_cast<double>(n.count);
    const bool has_gpu = n.gpu_count > 0;
    const double gpu = has_gpu ? n.gpu / static_cast<double>(n.gpu_count) : 0;
    const double mem = n.mem_count > 0 ? n.mem / static_cast<double>(n.mem_count) : 0;
    const bool idle = cpu < cpu_ && (!has_gpu || (gpu < gpu_ && mem < mem_));
    if (!idle) return;
    n.fired = true;
    ++result().violations;
    const std::string& node = ctx().NodeName(node_id);
    const double hours = static_cast<double>(n.end_ns - n.start_ns) / 3.6e12;
    Emit(MakeFinding(
        Severity::kWarning, node, "", n.start_ns, n.end_ns,
        "The instance " +
            (ctx().InstanceType().empty() ? node : ctx().InstanceType() + " (" + node + ")") +
            " is mostly idle while training: mean CPU " + Pct(cpu) +
            (has_gpu ? ", GPU " + Pct(gpu) + ", GPU memory " + Pct(mem) : std::string()) +
            " over " + Fixed(hours * 60, 0) + " minutes",
        has_gpu ? "Use the hardware or pay for less of it: raise the batch size (GPU memory is "
                  "mostly free), or move to an instance with fewer or smaller GPUs; `trainprof "
                  "cost` prices the alternatives."
                : "The job uses a small part of this machine: a smaller instance would do.",
        {{"cpu_mean_ratio", Round(cpu)},
         {"gpu_mean_ratio", has_gpu ? json(Round(gpu)) : json(nullptr)},
         {"gpu_memory_mean_ratio", n.mem_count > 0 ? json(Round(mem)) : json(nullptr)},
         {"duration_hours", Round(hours, 4)},
         // In dollars: the finding's cost_usd / cost_basis, joined from the cost advisor.
         {"instance_type", ctx().InstanceType()}}));
  }
  double gpu_, mem_, cpu_;
  int64_t min_duration_ns_;
  std::vector<NodeState> nodes_;
};

ParamSpec P(const char* name, json value, const char* description) {
  return {name, std::move(value), description};
}

}  // namespace

void AddOwnRules(std::vector<BuiltinRule>* out) {
  out->push_back(
      {{"DataLoaderStarvation",
        "Per training process: share of step time spent waiting for the next batch (data_wait) "
        "over the recent steps; fires when its lower confidence bound over the last "
        "`min_steps`..`window_steps` steps exceeds `threshold_ratio`.",
        false,
        {P("threshold_ratio", 0.2, "share of step time waiting for data (0..1)"),
         P("window_steps", 50, "most recent steps in a span judged"),
         P("min_steps", 20, "fewest steps in a span judged"),
         P("cluster_steps", 5,
           "consecutive steps per cluster (the bound's variance is measured between clusters)"),
         P("confidence", 0.95, "one-sided confidence of the bound on the share (0.5..1)"),
         P("warmup_steps", 5, "first steps ignored (workers starting)")}},
       FactoryOf<DataLoaderStarvationRule>()});
  out->push_back(
      {{"GPUIdleBetweenSteps",
        "Per training process: share of wall time spent between steps (host-side gaps shorter "
        "than `max_gap_s`) over the recent steps; fires when its lower confidence bound over "
        "the last `min_steps`..`window_steps` steps exceeds `threshold_ratio`.",
        false,
        {P("threshold_ratio", 0.15, "share of time between steps (0..1)"),
         P("window_steps", 50, "most recent steps in a span judged"),
         P("min_steps", 20, "fewest steps in a span judged"),
         P("cluster_steps", 5,
           "consecutive steps per cluster (the bound's variance is measured between clusters)"),
         P("confidence", 0.95, "one-sided confidence of the bound on the share (0.5..1)"),
         P("warmup_steps", 5, "first steps ignored"),
         P("max_gap_s", 10, "longer gaps are pauses (LongPauses), not counted here")}},
       FactoryOf<GpuIdleBetweenStepsRule>()});
  out->push_back(
      {{"HostMemoryGrowth",
        "Per node: least-squares fits of the training process tree's resident memory: recent "
        "samples (fires as soon as steady growth would exhaust the memory limit within "
        "`oom_horizon_s`, or is faster than `fast_growth_bytes_per_second`) and the trend since "
        "warm-up (slow leaks).",
        false,
        {P("min_growth_bytes_per_hour", 536870912.0, "growth rate that counts as a leak"),
         P("min_r_squared", 0.8, "how straight the trend since warm-up must be (0..1)"),
         P("min_duration_s", 600, "seconds of trend since warm-up before judging it"),
         P("warmup_s", 300,
           "seconds after the first step before the trend starts (model and data loading)"),
         P("settle_s", 5, "seconds after the first step before recent samples are judged"),
         P("unstepped_warmup_s", 300,
           "no step yet: seconds after the first sample before recent samples are judged"),
         P("window_s", 60, "longest span of recent samples fitted, seconds"),
         P("min_window_s", 5, "shortest span of recent samples fitted, seconds"),
         P("min_points", 10, "fewest samples in a fitted span"),
         P("window_min_r_squared", 0.9, "how straight recent growth must be (0..1)"),
         P("oom_horizon_s", 900,
           "recent growth that reaches the memory limit within this many seconds fires"),
         P("fast_growth_bytes_per_second", 33554432.0,
           "recent growth this fast fires whatever the limit"),
         P("min_window_growth_bytes", 33554432.0,
           "least growth over the fitted recent span (bytes) before it can fire")}},
       FactoryOf<HostMemoryGrowthRule>()});
  out->push_back(
      {{"GPUMemoryGrowth",
        "Per GPU: least-squares fit of recent memory in use (gpu_memory_used_ratio); fires as "
        "soon as steady growth would fill the GPU within `oom_horizon_s`.",
        false,
        {P("settle_s", 5, "seconds after the node's first step before samples are judged"),
         P("warmup_s", 60, "without steps: seconds after the GPU's first sample"),
         P("window_s", 60, "longest span of recent samples fitted, seconds"),
         P("min_window_s", 5, "shortest span fitted, seconds"),
         P("min_points", 10, "fewest samples in a fitted span"),
         P("min_r_squared", 0.9, "how straight the growth must be (0..1)"),
         P("min_growth_ratio_per_hour", 0.01, "slowest growth judged (share of the GPU)"),
         P("min_window_growth_ratio", 0.02, "least growth over the fitted span (share of the GPU)"),
         P("oom_horizon_s", 900, "growth that fills the GPU within this many seconds fires")}},
       FactoryOf<GpuMemoryGrowthRule>()});
  out->push_back({{"CPUThrottling",
                   "Per node: mean share of CFS periods in which the container was throttled "
                   "(cgroup_cpu_throttled_periods_ratio), per window.",
                   false,
                   {P("threshold_ratio", 0.1, "share of throttled periods (0..1)"),
                    P("window_s", 60, "seconds per window")}},
                  FactoryOf<CpuThrottlingRule>()});
  out->push_back(
      {{"StragglerRank",
        "Per data-time window: a rank whose median own time per step (step + gap before it - "
        "collectives: what the other ranks wait for) exceeds `threshold_ratio` times the "
        "median over all ranks.",
        false,
        {P("threshold_ratio", 1.15, "rank median own time / median of ranks"),
         P("window_s", 60, "seconds per window"),
         P("min_steps", 5, "steps a rank needs in a window to be compared"),
         P("max_gap_s", 10, "longer gaps between steps are pauses (LongPauses), not counted"),
         P("check_s", 2, "seconds of data between checks of the open window (0: none)"),
         P("early_min_steps", 40,
           "the open window is checked on each rank's last this many steps (all ranks need "
           "them)"),
         P("confidence", 0.95, "one-sided confidence of the early check's bound (0.5..1)")}},
       FactoryOf<StragglerRankRule>()});
  out->push_back(
      {{"CommunicationBound",
        "Per rank and data-time window: time in collective calls (all_reduce...) as a share "
        "of step time.",
        false,
        {P("threshold_ratio", 0.3, "collective time / step time (0..1)"),
         P("window_s", 60, "seconds per window")}},
       FactoryOf<CommunicationBoundRule>()});
  out->push_back(
      {{"LongPauses",
        "Per training process: a gap between consecutive steps longer than max(`min_pause_s`, "
        "`pause_factor` x mean step); names overlapping checkpoint / evaluation phases.",
        false,
        {P("min_pause_s", 60, "shortest pause reported, seconds"),
         P("pause_factor", 10, "pause / mean step time"),
         P("max_findings", 20, "findings reported (all pauses are counted)")}},
       FactoryOf<LongPausesRule>()});
  out->push_back(
      {{"UnderusedInstance",
        "Per node, from the first step: mean CPU, GPU and GPU memory utilisation all below "
        "their thresholds: a smaller instance or a bigger batch would do.",
        false,
        {P("gpu_threshold_ratio", 0.3, "mean GPU utilisation (0..1)"),
         P("gpu_memory_threshold_ratio", 0.3, "mean GPU memory utilisation (0..1)"),
         P("cpu_threshold_ratio", 0.3, "mean CPU utilisation (0..1)"),
         P("min_duration_s", 600, "seconds of training before judging")}},
       FactoryOf<UnderusedInstanceRule>()});
}

}  // namespace trainprof::analyze::rules
