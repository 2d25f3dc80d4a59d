// SageMaker Debugger's system-metric rules: CPUBottleneck, IOBottleneck, LowGPUUtilization,
// BatchSize, GPUMemoryIncrease, LoadBalancing, OverallSystemUsage. Same names, parameters and
// defaults (smdebug_rulesconfig/profiler_rules/rules.py); thresholds are in percent as there,
// while stored ratios are 0..1. The differences from smdebug are deliberate fixes, listed in
// docs/rules.md: every value is analysed (also the last minute), each violation is counted
// once, GPUMemoryIncrease compares adjacent disjoint windows, LoadBalancing compares GPUs
// with each other.

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "analyze/rules/rule_util.h"
#include "analyze/rules/share_bound.h"

namespace trainprof::analyze::rules {
namespace {

using model::Severity;
using nlohmann::json;

constexpr int64_t kMinuteNs = 60'000'000'000;

// ---------------------------------------------------------------------------------------------
// Options of the share tests (share_bound.h) from a rule's parameters.
ShareOptions ShareOptionsOf(const Params& p) {
  ShareOptions o;
  o.block_ns = std::max<int64_t>(1, p.Nanoseconds("block_s"));
  o.min_span_ns = p.Nanoseconds("min_window_s");
  if (p.json().contains("window_s")) {
    o.max_span_ns = std::max(o.min_span_ns, p.Nanoseconds("window_s"));
  } else {
    o.max_span_ns = INT64_MAX / 4;  // bounded by a count of values instead
  }
  o.min_samples = std::max<int64_t>(2, p.Integer("min_samples"));
  o.confidence = std::clamp(p.Number("confidence"), 0.5, 0.999999);
  return o;
}

// When a node's samples are judged: from `settle_s` after its first training step; a node
// without steps (no framework data) after `patience` samples, SageMaker's warm-up.
struct JudgeFrom {
  int64_t first_step_ns = 0;
  int64_t samples = 0;
  bool Ready(int64_t ts_ns, int64_t settle_ns, int64_t patience) {
    ++samples;
    if (first_step_ns != 0) return ts_ns - first_step_ns >= settle_ns;
    return samples > patience;
  }
};

// JudgeFrom for each node, from a rule's `patience` and `settle_s` parameters: a step sets its
// node's first step; Ready() is asked once per snapshot (it counts the node's samples).
class NodesJudgedFrom {
 public:
  explicit NodesJudgedFrom(const Params& p)
      : patience_(p.Integer("patience")), settle_ns_(p.Nanoseconds("settle_s")) {}
  void OnStep(const StepRow& s) {
    JudgeFrom& f = Grow(from_, static_cast<size_t>(s.node));
    if (f.first_step_ns == 0) f.first_step_ns = s.start_ns;
  }
  bool Ready(const Snapshot& snap) {
    return Grow(from_, static_cast<size_t>(snap.node)).Ready(snap.ts_ns, settle_ns_, patience_);
  }

 private:
  int64_t patience_, settle_ns_;
  std::vector<JudgeFrom> from_;
};

json SpanEvidence(const ShareSpan& s, int j, const ShareOptions& o) {
  return {{"span_start_ns", s.start_ns},
          {"span_end_ns", s.end_ns},
          {"span_samples", s.samples},
          {"span_blocks", s.blocks},
          {"confidence", o.confidence},
          {"effective_samples", Round(s.effective_samples[j], 1)},
          {"design_effect", Round(s.design_effect[j], 3)},
          {"block_s", static_cast<double>(o.block_ns) / 1e9}};
}

// ---------------------------------------------------------------------------------------------
// CPUBottleneck / IOBottleneck: the share of samples in which a GPU was nearly idle while the
// CPU was saturated (or waiting for I/O), judged from the node's first step on with a
// confidence bound over recent spans (share_bound.h): fires once the lower bound of the share
// exceeds `threshold` %.
class CoincidenceRule : public Rule {
 public:
  CoincidenceRule(const RuleSpec& spec, Params params, bool io)
      : Rule(spec, std::move(params)),
        io_(io),
        threshold_(this->params().Number("threshold")),
        gpu_threshold_(this->params().Number("gpu_threshold")),
        busy_threshold_(this->params().Number(io ? "io_threshold" : "cpu_threshold")),
        patience_(this->params().Integer("patience")),
        settle_ns_(this->params().Nanoseconds("settle_s")),
        options_(ShareOptionsOf(this->params())) {}

  void OnStep(const StepRow& s) override {
    NodeState& n = Grow(nodes_, static_cast<size_t>(s.node));
    if (n.from.first_step_ns == 0) n.from.first_step_ns = s.start_ns;
  }

  void OnSnapshot(const Snapshot& snap) override {
    int low_gpus = 0, gpus = 0, busy = 0, busy_total = 0;
    bool has_total = false;
    double max_busy = 0;
    for (const SampleValue& v : snap.values) {
      const MetricKind kind = v.kind;
      const double pct = v.value * 100;
      if (kind == MetricKind::kGpuUtil) {
        ++gpus;
        if (pct < gpu_threshold_) ++low_gpus;
      } else if (kind == (io_ ? MetricKind::kIowaitCore : MetricKind::kCpuCore)) {
        if (pct > busy_threshold_) ++busy;
        max_busy = std::max(max_busy, pct);
      } else if (io_ && kind == MetricKind::kIowaitTotal) {
        has_total = true;
        if (pct > busy_threshold_) ++busy_total;
      }
    }
    if (gpus == 0) return;                    // nothing to correlate with on this node
    if (io_ && has_total) busy = busy_total;  // iowait is judged per node when the total exists
    NodeState& n = Grow(nodes_, static_cast<size_t>(snap.node));
    if (!n.from.Ready(snap.ts_ns, settle_ns_, patience_)) return;
    if (!n.share) n.share = ShareBound(options_);
    ++n.datapoints;
    ++result().datapoints;
    if (low_gpus > 0) ++n.low_gpu;
    if (n.first_sample_ns == 0) n.first_sample_ns = snap.ts_ns;
    const bool bottleneck = low_gpus > 0 && busy > 0;
    if (bottleneck) {
      ++n.bottlenecks;
      n.idle_gpu_samples += low_gpus;
      ++result().violations;
      if (n.first_ns == 0) n.first_ns = snap.ts_ns;
      n.last_ns = snap.ts_ns;
      n.max_busy_pct = std::max(n.max_busy_pct, max_busy);
    }
    if (!n.share->Add(snap.ts_ns, bottleneck) || n.fired) return;
    std::optional<ShareSpan> best;
    n.share->Spans([&](double a, double) { return a * 100 > threshold_; },  // lower <= share
                   [&](const ShareSpan& s) {
                     if (s.lower[0] * 100 > threshold_ && (!best || s.lower[0] > best->lower[0]))
                       best = s;
                     return false;
                   });
    if (!best) return;
    n.fired = true;
    const std::string& node = ctx().NodeName(snap.node);
    json evidence = {{"bottleneck_samples", best->hits[0]},
                     {"bottleneck_percent", Round(best->share[0] * 100, 2)},
                     {"lower_bound_percent", Round(best->lower[0] * 100, 2)},
                     {"threshold_percent", threshold_},
                     {"gpu_threshold_percent", gpu_threshold_},
                     {io_ ? "io_threshold_percent" : "cpu_threshold_percent", busy_threshold_},
                     {"first_bottleneck_ns", n.first_ns},
                     {"last_bottleneck_ns", n.last_ns},
                     {"low_gpu_samples", n.low_gpu},
                     // For the cost impact: GPU-samples left idle in bottleneck samples since
                     // judging began, and the span those datapoints cover (sampling interval).
                     {"datapoints", n.datapoints},
                     {"idle_gpu_samples", n.idle_gpu_samples},
                     {"gpus", gpus},
                     {"first_sample_ns", n.first_sample_ns},
                     {"last_sample_ns", snap.ts_ns},
                     // [[block start, samples, bottleneck samples, 0], ...]
                     {"blocks", n.share->Blocks(best->start_ns, 150)}};
    evidence.update(SpanEvidence(*best, 0, options_));
    std::string what = io_ ? "waiting for I/O" : "busy";
    Emit(MakeFinding(
        Severity::kWarning, node, "", best->start_ns, best->end_ns,
        name() + ": in " + Pct(best->share[0]) + " of " + std::to_string(best->samples) +
            " samples over the last " +
            Fixed(static_cast<double>(best->end_ns - best->start_ns) / 1e9, 0) + " s on " + node +
            " a GPU was below " + Fixed(gpu_threshold_, 0) + "% utilisation while the CPU was " +
            what + " above " + Fixed(busy_threshold_, 0) + "% (at least " + Pct(best->lower[0]) +
            " at " + Fixed(options_.confidence * 100, 0) + "% confidence; threshold " +
            Fixed(threshold_, 0) + "% of samples)",
        io_ ? "The GPUs wait for storage. Read training data from local NVMe or RAM (copy or "
              "cache the dataset first), use a streaming format with large sequential reads "
              "(WebDataset, TFRecord, FFCV), raise DataLoader num_workers and prefetch_factor."
            : "The GPUs wait for the CPU. Move preprocessing and augmentation to the GPU (DALI, "
              "torchvision v2 on CUDA tensors) or do it offline, raise DataLoader num_workers "
              "up to the free cores, or choose an instance with more vCPUs per GPU.",
        evidence));
  }

 private:
  struct NodeState {
    JudgeFrom from;
    std::optional<ShareBound> share;
    int64_t datapoints = 0, bottlenecks = 0, low_gpu = 0, idle_gpu_samples = 0;
    int64_t first_ns = 0, last_ns = 0, first_sample_ns = 0;
    double max_busy_pct = 0;
    bool fired = false;
  };
  bool io_;
  double threshold_, gpu_threshold_, busy_threshold_;
  int64_t patience_, settle_ns_;
  ShareOptions options_;
  std::vector<NodeState> nodes_;
};

class CpuBottleneckRule : public CoincidenceRule {
 public:
  CpuBottleneckRule(const RuleSpec& spec, Params params)
      : CoincidenceRule(spec, std::move(params), /*io=*/false) {}
};
class IoBottleneckRule : public CoincidenceRule {
 public:
  IoBottleneckRule(const RuleSpec& spec, Params params)
      : CoincidenceRule(spec, std::move(params), /*io=*/true) {}
};

// ---------------------------------------------------------------------------------------------
// LowGPUUtilization: per GPU, from the node's first step (without steps: after `patience`
// values), confidence bounds over recent spans of at most `window` values (share_bound.h) on
// the share of values at or above threshold_p95 ("busy") and below threshold_p5 ("idle"):
// under-used once the busy share is below 5 % with confidence (the 95th percentile is below
// threshold_p95), fluctuating once both shares are above 5 % with confidence (95th percentile
// above threshold_p95, 5th below threshold_p5).
class LowGpuUtilizationRule : public Rule {
 public:
  LowGpuUtilizationRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        p95_threshold_(this->params().Number("threshold_p95")),
        p5_threshold_(this->params().Number("threshold_p5")),
        window_(std::max<int64_t>(1, this->params().Integer("window"))),
        options_(ShareOptionsOf(this->params())),
        judge_(this->params()) {
    options_.max_samples = window_;
  }

  void OnStep(const StepRow& s) override { judge_.OnStep(s); }

  void OnSnapshot(const Snapshot& snap) override {
    const bool ready = judge_.Ready(snap);
    for (const SampleValue& v : snap.values) {
      if (v.kind != MetricKind::kGpuUtil) continue;
      ++result().datapoints;  // every value read (startup values are not judged)
      if (!ready) continue;
      auto [it, inserted] = gpus_.try_emplace(v.series, static_cast<size_t>(window_), options_);
      Gpu& g = it->second;
      const double pct = v.value * 100;
      g.recent.Add(snap.ts_ns, pct);
      if (!g.share.Add(snap.ts_ns, pct >= p95_threshold_, pct < p5_threshold_)) continue;
      if (g.fired_low && g.fired_fluct) continue;
      std::optional<ShareSpan> low, fluct;
      g.share.Spans(
          [&](double busy, double idle) {  // lower <= share <= upper
            return (!g.fired_low && busy < kTail) ||
                   (!g.fired_fluct && busy > kTail && idle > kTail);
          },
          [&](const ShareSpan& s) {
            if (!g.fired_low && s.upper[0] < kTail && (!low || s.upper[0] < low->upper[0])) low = s;
            const double weaker = std::min(s.lower[0], s.lower[1]);
            if (!g.fired_fluct && s.lower[0] > kTail && s.lower[1] > kTail &&
                (!fluct || weaker > std::min(fluct->lower[0], fluct->lower[1]))) {
              fluct = s;
            }
            return false;
          });
      if (low || fluct) ++result().violations;
      if (low) {
        g.fired_low = true;
        Report(v.series, g, *low, true);
      }
      if (fluct) {
        g.fired_fluct = true;
        Report(v.series, g, *fluct, false);
      }
    }
  }

 private:
  static constexpr double kTail = 0.05;  // the 95th / 5th percentiles: 5 % of values beyond
  struct Gpu {
    Gpu(size_t window, const ShareOptions& o) : recent(window), share(o) {}
    RecentValues recent;
    ShareBound share;
    bool fired_low = false, fired_fluct = false;
  };

  void Report(int32_t series, const Gpu& g, const ShareSpan& s, bool low) {
    g.recent.Copy(&scratch_);
    const size_t keep = std::min(scratch_.size(), static_cast<size_t>(s.samples));
    scratch_.erase(scratch_.begin(), scratch_.end() - static_cast<std::ptrdiff_t>(keep));
    double sum = 0;
    for (double v : scratch_) sum += v;
    const double mean = scratch_.empty() ? 0 : sum / static_cast<double>(scratch_.size());
    const double p95 = stats::QuantileInPlace(scratch_, 0.95);
    const double p5 = stats::QuantileInPlace(scratch_, 0.05);
    const SeriesKey& key = ctx().Series(series);
    const std::string& node = ctx().NodeName(key.node);
    const int j = low ? 0 : 1;
    json evidence = {{"p95_percent", Round(p95, 2)},
                     {"p5_percent", Round(p5, 2)},
                     {"mean_percent", Round(mean, 2)},
                     {"window_values", keep},
                     {"window_start_ns", s.start_ns},
                     {"window_end_ns", s.end_ns},
                     {"values_seen", g.recent.count()},
                     {"threshold_p95", p95_threshold_},
                     {"threshold_p5", p5_threshold_},
                     {"busy_share", Round(s.share[0], 4)},
                     {"busy_share_upper", Round(s.upper[0], 4)},
                     {"busy_share_lower", Round(s.lower[0], 4)},
                     {"idle_share", Round(s.share[1], 4)},
                     {"idle_share_lower", Round(s.lower[1], 4)},
                     // [[block start, values, values >= threshold_p95, values < threshold_p5]]
                     {"blocks", g.share.Blocks(s.start_ns, 150)},
                     {"kind", low ? "underutilized" : "fluctuating"}};
    evidence.update(SpanEvidence(s, j, options_));
    const std::string conf = Fixed(options_.confidence * 100, 0) + "% confidence";
    const std::string over = " over the last " +
                             Fixed(static_cast<double>(s.end_ns - s.start_ns) / 1e9, 0) + " s (" +
                             std::to_string(s.samples) + " samples)";
    if (low) {
      Emit(MakeFinding(Severity::kWarning, node, key.device, s.start_ns, s.end_ns,
                       key.device + " on " + node + " is under-used: " + Pct(s.share[0]) +
                           " of values at or above " + Fixed(p95_threshold_, 0) + "%" + over +
                           ", at most " + Pct(s.upper[0]) + " at " + conf +
                           ", so its 95th percentile is below " + Fixed(p95_threshold_, 0) +
                           "% (measured " + Fixed(p95) + "%, mean " + Fixed(mean) + "%)",
                       "Give the GPU more work per step: a larger batch size, mixed precision "
                       "with a larger model, or fewer GPUs / a smaller instance. Check the "
                       "data-loading and CPU rules: a starved GPU also shows as low "
                       "utilisation.",
                       evidence));
    } else {
      Emit(MakeFinding(Severity::kWarning, node, key.device, s.start_ns, s.end_ns,
                       key.device + " on " + node + " fluctuates" + over + ": " + Pct(s.share[0]) +
                           " of values at or above " + Fixed(p95_threshold_, 0) + "% and " +
                           Pct(s.share[1]) + " below " + Fixed(p5_threshold_, 0) +
                           "% (each more than 5% at " + conf + "; 95th percentile " + Fixed(p95) +
                           "%, 5th " + Fixed(p5) + "%)",
                       "The GPU alternates between busy and idle: look for host-side gaps "
                       "between steps, synchronisations (.item(), .cpu()), data-loading stalls "
                       "or periodic evaluation / checkpointing on the training path.",
                       evidence));
    }
  }

  double p95_threshold_, p5_threshold_;
  int64_t window_;
  ShareOptions options_;
  NodesJudgedFrom judge_;
  std::map<int32_t, Gpu> gpus_;
  std::vector<double> scratch_;
};

// ---------------------------------------------------------------------------------------------
// BatchSize: per GPU, from `settle_s` after the node's first step (without steps: after
// `patience` values), a confidence bound over recent spans of at most `window` values
// (share_bound.h) on the share of samples in which the node's CPU (mean of cores), the GPU or
// its memory is at or above its threshold ("busy"): the batch could be larger once that share
// is below 5 % with confidence, so that each of the three 95th percentiles is below its
// threshold. (Stricter than three separate tests where the busy moments do not coincide.)
class BatchSizeRule : public Rule {
 public:
  BatchSizeRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        cpu_p95_(this->params().Number("cpu_threshold_p95")),
        gpu_p95_(this->params().Number("gpu_threshold_p95")),
        mem_p95_(this->params().Number("gpu_memory_threshold_p95")),
        window_(std::max<int64_t>(1, this->params().Integer("window"))),
        options_(ShareOptionsOf(this->params())),
        judge_(this->params()) {
    options_.max_samples = window_;
  }

  void OnStep(const StepRow& s) override { judge_.OnStep(s); }

  void OnSnapshot(const Snapshot& snap) override {
    double core_sum = 0, total = -1;
    int cores = 0;
    bool any_gpu = false;
    for (const SampleValue& v : snap.values) {
      const MetricKind kind = v.kind;
      if (kind == MetricKind::kCpuCore) {
        core_sum += v.value;
        ++cores;
      } else if (kind == MetricKind::kCpuTotal) {
        total = v.value;
      } else if (kind == MetricKind::kGpuUtil || kind == MetricKind::kGpuMemUtil) {
        any_gpu = true;
      }
    }
    if (!any_gpu || (cores == 0 && total < 0)) return;
    ++result().datapoints;
    if (!judge_.Ready(snap)) {
      return;
    }
    NodeState& n = Grow(nodes_, static_cast<size_t>(snap.node));
    if (n.cpu.size() == 0) n.cpu = RecentValues(static_cast<size_t>(window_));
    const double cpu = (cores > 0 ? core_sum / cores : total) * 100;
    n.cpu.Add(snap.ts_ns, cpu);
    // This snapshot's utilisation and memory of each GPU (both are needed to judge it).
    seen_.clear();
    for (const SampleValue& v : snap.values) {
      const SeriesKey& key = ctx().Series(v.series);
      if (key.kind != MetricKind::kGpuUtil && key.kind != MetricKind::kGpuMemUtil) continue;
      auto& [util, mem] = seen_[key.device_index];
      (key.kind == MetricKind::kGpuUtil ? util : mem) = v.value * 100;
    }
    for (const auto& [index, values] : seen_) {
      const auto& [util, mem] = values;
      if (!util || !mem) continue;
      auto [it, inserted] = n.gpus.try_emplace(index, static_cast<size_t>(window_), options_);
      Gpu& g = it->second;
      g.util.Add(snap.ts_ns, *util);
      g.mem.Add(snap.ts_ns, *mem);
      const bool busy = cpu >= cpu_p95_ || *util >= gpu_p95_ || *mem >= mem_p95_;
      if (!g.share.Add(snap.ts_ns, busy) || g.fired) continue;
      std::optional<ShareSpan> low;
      g.share.Spans([](double share, double) { return share < kTail; },  // share <= upper
                    [&](const ShareSpan& s) {
                      if (s.upper[0] < kTail && (!low || s.upper[0] < low->upper[0])) low = s;
                      return false;
                    });
      if (!low) continue;
      ++result().violations;
      g.fired = true;
      Report(snap.node, index, n, g, *low);
    }
  }

 private:
  static constexpr double kTail = 0.05;  // the 95th percentiles: 5 % of values beyond
  struct Gpu {
    Gpu(size_t window, const ShareOptions& o) : util(window), mem(window), share(o) {}
    RecentValues util, mem;
    ShareBound share;
    bool fired = false;
  };
  struct NodeState {
    RecentValues cpu{0};
    std::map<int, Gpu> gpus;  // by GPU index
  };

  // The 95th percentile (and mean) of the span's last `keep` values of a series.
  std::pair<double, double> Tail(const RecentValues& values, size_t keep) {
    values.Copy(&scratch_);
    keep = std::min(keep, scratch_.size());
    scratch_.erase(scratch_.begin(), scratch_.end() - static_cast<std::ptrdiff_t>(keep));
    double sum = 0;
    for (double v : scratch_) sum += v;
    const double mean = scratch_.empty() ? 0 : sum / static_cast<double>(scratch_.size());
    return {stats::QuantileInPlace(scratch_, 0.95), mean};
  }

  void Report(int32_t node_id, int index, const NodeState& n, const Gpu& g, const ShareSpan& s) {
    const size_t keep = static_cast<size_t>(s.samples);
    const auto [cpu, cpu_mean] = Tail(n.cpu, keep);
    const auto [util, util_mean] = Tail(g.util, keep);
    const auto [mem, mem_mean] = Tail(g.mem, keep);
    const std::string& node = ctx().NodeName(node_id);
    const std::string device = "gpu" + std::to_string(index);
    json evidence = {{"cpu_p95_percent", Round(cpu, 2)},
                     {"gpu_p95_percent", Round(util, 2)},
                     {"gpu_mean_percent", Round(util_mean, 2)},
                     {"gpu_memory_p95_percent", Round(mem, 2)},
                     {"window_start_ns", s.start_ns},
                     {"window_end_ns", s.end_ns},
                     {"cpu_threshold_p95", cpu_p95_},
                     {"gpu_threshold_p95", gpu_p95_},
                     {"gpu_memory_threshold_p95", mem_p95_},
                     {"busy_share", Round(s.share[0], 4)},
                     {"busy_share_upper", Round(s.upper[0], 4)},
                     // [[block start, values, values with CPU, GPU or memory busy, 0]]
                     {"blocks", g.share.Blocks(s.start_ns, 150)}};
    evidence.update(SpanEvidence(s, 0, options_));
    Emit(MakeFinding(
        Severity::kInfo, node, device, s.start_ns, s.end_ns,
        device + " on " + node + " has room for a larger batch: over the last " +
            Fixed(static_cast<double>(s.end_ns - s.start_ns) / 1e9, 0) + " s (" +
            std::to_string(s.samples) + " samples) " + Pct(s.share[0]) +
            " of samples had the CPU, the GPU or its memory at or above its threshold, at most " +
            Pct(s.upper[0]) + " at " + Fixed(options_.confidence * 100, 0) +
            "% confidence; 95th percentiles GPU " + Fixed(util) + "%, GPU memory " + Fixed(mem) +
            "%, CPU " + Fixed(cpu) + "% (thresholds " + Fixed(gpu_p95_, 0) + "/" +
            Fixed(mem_p95_, 0) + "/" + Fixed(cpu_p95_, 0) + "%)",
        "Increase the batch size (scale the learning rate with it) to use the GPU's memory "
        "and compute, or run on a smaller / cheaper instance.",
        evidence));
  }

  double cpu_p95_, gpu_p95_, mem_p95_;
  int64_t window_;
  ShareOptions options_;
  NodesJudgedFrom judge_;
  std::vector<NodeState> nodes_;
  std::map<int, std::pair<std::optional<double>, std::optional<double>>> seen_;
  std::vector<double> scratch_;
};

// ---------------------------------------------------------------------------------------------
// GPUMemoryIncrease: the mean of the last `window` values against the mean of the `window`
// values just before them (smdebug compared overlapping, off-by-one slices).
class GpuMemoryIncreaseRule : public Rule {
 public:
  GpuMemoryIncreaseRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        increase_(this->params().Number("increase")),
        window_(std::max<int64_t>(1, this->params().Integer("window"))),
        judge_(this->params()) {}

  void OnStep(const StepRow& s) override { judge_.OnStep(s); }

  void OnSnapshot(const Snapshot& snap) override {
    // From `settle_s` after the node's first step (no steps: after `patience` values).
    if (!judge_.Ready(snap)) {
      return;
    }
    for (const SampleValue& v : snap.values) {
      if (v.kind != MetricKind::kGpuMemUtil) continue;
      Gpu& g = gpus_[v.series];
      const double pct = v.value * 100;
      const size_t w = static_cast<size_t>(window_);
      // Running sums over two adjacent, disjoint windows of `window` values.
      g.values.push_back(pct);
      g.ts.push_back(snap.ts_ns);
      g.cur_sum += pct;
      if (g.values.size() > w) {
        const double moved = g.values[g.values.size() - 1 - w];
        g.cur_sum -= moved;
        g.prev_sum += moved;
      }
      if (g.values.size() > 2 * w) {
        g.prev_sum -= g.values.front();
        g.values.pop_front();
        g.ts.pop_front();
      }
      ++g.count;
      ++result().datapoints;
      if (g.count < 2 * window_) continue;
      const double cur = g.cur_sum / static_cast<double>(window_);
      const double prev = g.prev_sum / static_cast<double>(window_);
      const double diff = cur - prev;
      const bool violating = diff > increase_;
      if (!g.episode.Update(violating)) continue;
      ++result().violations;  // one per increase, however many samples it spans
      const SeriesKey& key = ctx().Series(v.series);
      const std::string& node = ctx().NodeName(key.node);
      Emit(MakeFinding(
          Severity::kWarning, node, key.device, g.ts.front(), snap.ts_ns,
          key.device + " memory on " + node + " rose by " + Fixed(diff) +
              " percentage points: mean of the last " + std::to_string(window_) + " samples " +
              Fixed(cur) + "% vs " + Fixed(prev) + "% before (threshold " + Fixed(increase_, 0) +
              ")",
          "GPU memory keeps growing: look for tensors kept across steps (accumulated losses "
          "without .item()/.detach(), growing caches or lists of outputs), or a batch size / "
          "sequence length that grows; an out-of-memory error may follow.",
          {{"increase_percent_points", Round(diff, 3)},
           {"current_mean_percent", Round(cur, 3)},
           {"previous_mean_percent", Round(prev, 3)},
           {"current_value_percent", Round(pct, 3)},
           {"window", window_},
           {"values_seen", g.count},
           {"threshold", increase_}}));
    }
  }

 private:
  struct Gpu {
    std::deque<double> values;  // the last 2 * window values
    std::deque<int64_t> ts;
    double cur_sum = 0, prev_sum = 0;
    int64_t count = 0;
    Episode episode;
  };
  double increase_;
  int64_t window_;
  NodesJudgedFrom judge_;
  std::map<int32_t, Gpu> gpus_;
};

// ---------------------------------------------------------------------------------------------
// LoadBalancing: per GPU a histogram of its utilisation (2 % bins) from `settle_s` after its
// node's first step (a node without steps: after `patience` values), every pair of GPUs of the
// run compared as the data grows: a pair is imbalanced once, with `confidence`, its histograms
// differ (G-test of homogeneity, Bonferroni over the pairs) and their Jensen-Shannon distance,
// with the plug-in estimate's small-sample bias taken out, is above `threshold`. Utilisation
// samples are autocorrelated, so each GPU counts one observation per `block_s` block with data
// (fewer than its samples at sub-second sampling). Judged every block while the data is young,
// then every eighth of the data judged so far, at least once a minute: an imbalance from the
// start is named in about 20-40 s, and checking every pair stays cheap on long runs.
class LoadBalancingRule : public Rule {
 public:
  LoadBalancingRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        threshold_(this->params().Number("threshold")),
        block_ns_(std::max<int64_t>(1, this->params().Nanoseconds("block_s"))),
        min_span_ns_(this->params().Nanoseconds("min_window_s")),
        confidence_(std::clamp(this->params().Number("confidence"), 0.5, 0.999999)),
        judge_(this->params()) {}

  void OnStep(const StepRow& s) override { judge_.OnStep(s); }

  void OnSnapshot(const Snapshot& snap) override {
    bool ready = false, checked = false;
    for (const SampleValue& v : snap.values) {
      const SeriesKey& key = ctx().Series(v.series);
      if (key.kind != MetricKind::kGpuUtil) continue;
      ++result().datapoints;
      if (!checked) {
        checked = true;
        ready = judge_.Ready(snap);
      }
      if (!ready) continue;
      Gpu*& slot = Grow(by_series_, static_cast<size_t>(v.series));  // map nodes stay put
      if (slot == nullptr) slot = &gpus_[{ctx().NodeName(key.node), key.device_index}];
      Gpu& g = *slot;
      const int bin = std::clamp(static_cast<int>(v.value * 100 / 2), 0, kBins - 1);
      g.histogram[static_cast<size_t>(bin)] += 1;
      g.sum += v.value * 100;
      ++g.count;
      if (g.first_ns == 0) g.first_ns = snap.ts_ns;
      const int64_t block = snap.ts_ns / block_ns_;
      if (block != g.last_block) {
        g.last_block = block;
        ++g.blocks;
      }
      if (first_ns_ == 0) first_ns_ = snap.ts_ns;
    }
    if (first_ns_ == 0) return;
    last_ns_ = snap.ts_ns;
    const int64_t judged = last_ns_ - first_ns_;
    const int64_t every = std::clamp(judged / 8, block_ns_, kMinuteNs);
    if (judged >= min_span_ns_ && last_ns_ - last_check_ns_ >= every) {
      last_check_ns_ = last_ns_;
      Evaluate(last_ns_);
    }
  }

  void Finalize(int64_t) override {
    if (last_ns_ != last_check_ns_) Evaluate(last_ns_);
  }

 private:
  static constexpr int kBins = 50;
  struct Gpu {
    std::vector<double> histogram = std::vector<double>(kBins, 0.0);
    double sum = 0;
    int64_t count = 0, blocks = 0, last_block = -1;
    int64_t first_ns = 0;
    bool reported = false;
    double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0; }
    // Observations for the test: one per block with data, at most one per sample.
    double effective() const { return static_cast<double>(std::min(count, blocks)); }
  };
  using Key = std::pair<std::string, int>;  // node name, GPU index

  void Evaluate(int64_t now_ns) {
    std::vector<std::pair<const Key*, Gpu*>> eligible;
    for (auto& [key, g] : gpus_) {
      if (g.count >= 2 && now_ns - g.first_ns >= min_span_ns_) eligible.push_back({&key, &g});
    }
    if (eligible.size() < 2) return;
    std::vector<double> means;
    for (auto& e : eligible) means.push_back(e.second->mean());
    const double median = stats::Quantile(means, 0.5);
    const double pairs = static_cast<double>(eligible.size() * (eligible.size() - 1) / 2);
    const double p = 1 - (1 - confidence_) / pairs;  // Bonferroni over the pairs
    std::map<Key, json> new_pairs;                   // attributed GPU -> its new imbalanced peers
    for (size_t i = 0; i < eligible.size(); ++i) {
      for (size_t j = i + 1; j < eligible.size(); ++j) {
        const auto pair = std::make_pair(*eligible[i].first, *eligible[j].first);
        if (fired_pairs_.count(pair)) continue;
        const Gpu& a = *eligible[i].second;
        const Gpu& b = *eligible[j].second;
        const stats::HistogramComparison c =
            stats::CompareHistograms(a.histogram, b.histogram, a.effective(), b.effective());
        const double distance = c.corrected_distance();
        if (distance <= threshold_ || c.bins < 2) continue;
        const double critical = stats::ChiSquareQuantile(p, c.bins - 1);
        if (c.g_statistic <= critical) continue;
        fired_pairs_.insert(pair);
        ++result().violations;  // each pair once
        // Blame the GPU further from the run's typical utilisation.
        const bool first_is_odd = std::abs(a.mean() - median) >= std::abs(b.mean() - median);
        const size_t odd = first_is_odd ? i : j, peer = first_is_odd ? j : i;
        new_pairs[*eligible[odd].first].push_back(
            {{"node", eligible[peer].first->first},
             {"device", "gpu" + std::to_string(eligible[peer].first->second)},
             {"distance", Round(distance, 4)},
             {"distance_uncorrected", Round(std::sqrt(c.divergence), 4)},
             {"g_statistic", Round(c.g_statistic, 2)},
             {"chi_square_critical", Round(critical, 2)},
             {"degrees_of_freedom", c.bins - 1},
             {"peer_mean_percent", Round(eligible[peer].second->mean(), 2)},
             {"peer_effective_samples", eligible[peer].second->effective()}});
      }
    }
    for (auto& [key, peers] : new_pairs) {
      Gpu& g = gpus_[key];
      if (g.reported) continue;
      g.reported = true;
      const std::string device = "gpu" + std::to_string(key.second);
      Emit(MakeFinding(
          Severity::kWarning, key.first, device, g.first_ns, now_ns,
          device + " on " + key.first + " carries a different load than " +
              std::to_string(peers.size()) + " other GPU(s): mean utilisation " + Fixed(g.mean()) +
              "% vs a median of " + Fixed(median) + "% (histogram distance above " +
              Fixed(threshold_, 2) + " with " + Fixed(confidence_ * 100, 0) + "% confidence, " +
              Fixed(static_cast<double>(now_ns - g.first_ns) / 1e9, 0) + " s judged)",
          "Balance the work across GPUs: equal per-GPU batch sizes and sequence lengths "
          "(bucket by length), the same model shard sizes, no extra work (logging, "
          "evaluation) on rank 0 only; check that every GPU runs a training process.",
          {{"mean_percent", Round(g.mean(), 2)},
           {"median_of_gpu_means_percent", Round(median, 2)},
           {"imbalanced_peers", peers},
           {"threshold", threshold_},
           {"confidence", confidence_},
           {"values", g.count},
           {"effective_samples", g.effective()},
           {"block_s", static_cast<double>(block_ns_) / 1e9},
           {"judged_from_ns", g.first_ns}}));
    }
  }

  double threshold_;
  int64_t block_ns_, min_span_ns_;
  double confidence_;
  int64_t first_ns_ = 0, last_ns_ = 0, last_check_ns_ = 0;
  NodesJudgedFrom judge_;
  std::map<Key, Gpu> gpus_;
  std::vector<Gpu*> by_series_;  // series id -> its GPU in gpus_
  std::set<std::pair<Key, Key>> fired_pairs_;
};

// ---------------------------------------------------------------------------------------------
// OverallSystemUsage: per node percentiles of CPU, GPU, GPU memory, host memory, network and
// I/O wait. Never triggers, as in smdebug.
class OverallSystemUsageRule : public Rule {
 public:
  OverallSystemUsageRule(const RuleSpec& spec, Params params) : Rule(spec, std::move(params)) {}

  void OnSnapshot(const Snapshot& snap) override {
    Acc a;
    for (const SampleValue& v : snap.values) {
      switch (v.kind) {
        case MetricKind::kCpuCore:
          a.cpu += v.value;
          ++a.cores;
          break;
        case MetricKind::kCpuTotal:
          a.cpu_total = v.value;
          break;
        case MetricKind::kGpuUtil:
          a.gpu += v.value;
          ++a.gpus;
          break;
        case MetricKind::kGpuMemUtil:
          a.gpu_mem += v.value;
          ++a.gpu_mems;
          break;
        case MetricKind::kMemUsed:
          a.mem_used = v.value;
          break;
        case MetricKind::kMemTotal:
          a.mem_total = v.value;
          break;
        case MetricKind::kNetRx:
        case MetricKind::kNetTx:
          a.net += v.value;
          a.has_net = true;
          break;
        case MetricKind::kIowaitTotal:
          a.iowait = v.value;
          break;
        default:
          break;
      }
    }
    Series& s = series_[ctx().NodeName(snap.node)];
    if (a.cores > 0)
      s["CPU"].Add(a.cpu / a.cores * 100);
    else if (a.cpu_total >= 0)
      s["CPU"].Add(a.cpu_total * 100);
    if (a.gpus > 0) s["GPU"].Add(a.gpu / a.gpus * 100);
    if (a.gpu_mems > 0) s["GPU memory"].Add(a.gpu_mem / a.gpu_mems * 100);
    double total = a.mem_total;
    if (total <= 0) {
      const model::NodeInfo* info = ctx().NodeInfo(snap.node);
      if (info != nullptr && info->memory_total_bytes)
        total = static_cast<double>(*info->memory_total_bytes);
    }
    if (a.mem_used >= 0 && total > 0) s["CPU memory"].Add(a.mem_used / total * 100);
    if (a.has_net) s["Network bytes_per_second"].Add(a.net);
    if (a.iowait >= 0) s["I/O wait"].Add(a.iowait * 100);
    ++result().datapoints;
  }

  void Finalize(int64_t) override {
    json details = json::object();
    for (auto& [node, metrics] : series_) {
      for (auto& [metric, values] : metrics) {
        json& d = details[metric][node];
        d = {{"max", Round(values.Quantile(1.0), 3)},
             {"p99", Round(values.Quantile(0.99), 3)},
             {"p95", Round(values.Quantile(0.95), 3)},
             {"p50", Round(values.Quantile(0.50), 3)},
             {"min", Round(values.Quantile(0.0), 3)}};
        // A long run's percentiles come from the bounded sketch: say how close they are.
        if (!values.exact()) d["relative_error"] = values.relative_accuracy();
      }
    }
    result().details = details;
  }

 private:
  struct Acc {
    double cpu = 0, cpu_total = -1, gpu = 0, gpu_mem = 0, mem_used = -1, mem_total = -1;
    double net = 0, iowait = -1;
    int cores = 0, gpus = 0, gpu_mems = 0;
    bool has_net = false;
  };
  // Exact up to 16 384 ticks a series (27 minutes at 100 ms), then a sketch within 0.1 %: the
  // rule's memory does not grow with the run (it kept every tick: 1.7 MB an hour at 100 ms).
  using Series = std::map<std::string, stats::QuantileSketch>;
  std::map<std::string, Series> series_;
};

ParamSpec P(const char* name, json value, const char* description) {
  return {name, std::move(value), description};
}

}  // namespace

void AddSageMakerSystemRules(std::vector<BuiltinRule>* out) {
  const char* patience_doc =
      "without training steps on the node: values (samples) skipped before the first check "
      "(startup); with steps, judging starts `settle_s` after the first step";
  auto share_params = [](std::vector<ParamSpec> v, bool window_s) {
    v.push_back(P("settle_s", 5, "seconds after the node's first step before samples count"));
    v.push_back(P("confidence", 0.95, "one-sided confidence of the bound on the share (0.5..1)"));
    v.push_back(P("block_s", 2,
                  "seconds of samples per block (the design effect is measured between blocks)"));
    v.push_back(P("min_window_s", 20, "shortest span of recent samples judged, seconds"));
    if (window_s) v.push_back(P("window_s", 300, "longest span of recent samples judged, seconds"));
    v.push_back(P("min_samples", 10, "fewest samples in a span judged"));
    return v;
  };
  out->push_back(
      {{"CPUBottleneck",
        "Fires when, with confidence, more than `threshold` % of the recent samples are "
        "bottlenecks: a GPU below `gpu_threshold` % utilisation while a CPU core is above "
        "`cpu_threshold` %.",
        true,
        share_params(
            {P("threshold", 50, "percent of samples that must be bottlenecks (lower bound)"),
             P("gpu_threshold", 10, "GPU utilisation (%) below which a GPU counts as idle"),
             P("cpu_threshold", 90, "CPU core utilisation (%) above which a core counts as busy"),
             P("patience", 1000, patience_doc)},
            true)},
       FactoryOf<CpuBottleneckRule>()});
  out->push_back(
      {{"IOBottleneck",
        "Fires when, with confidence, more than `threshold` % of the recent samples are "
        "bottlenecks: a GPU below `gpu_threshold` % utilisation while I/O wait is above "
        "`io_threshold` %.",
        true,
        share_params(
            {P("threshold", 50, "percent of samples that must be bottlenecks (lower bound)"),
             P("gpu_threshold", 10, "GPU utilisation (%) below which a GPU counts as idle"),
             P("io_threshold", 50, "I/O wait (%) above which the node counts as I/O bound"),
             P("patience", 1000, patience_doc)},
            true)},
       FactoryOf<IoBottleneckRule>()});
  out->push_back(
      {{"LowGPUUtilization",
        "Per GPU, over recent spans: fires when the 95th percentile of utilisation is below "
        "`threshold_p95` % with confidence (under-used: fewer than 5 % of values at or above it), "
        "or above it while the 5th percentile is below `threshold_p5` % (fluctuating).",
        true,
        share_params(
            {P("threshold_p95", 70, "95th percentile (%) below which the GPU is under-used"),
             P("threshold_p5", 10, "5th percentile (%) below which a busy GPU fluctuates"),
             P("window", 500, "values in the longest span judged"),
             P("patience", 1000, patience_doc)},
            false)},
       FactoryOf<LowGpuUtilizationRule>()});
  out->push_back(
      {{"BatchSize",
        "Per GPU, over recent spans: fires when, with confidence, fewer than 5 % of samples have "
        "the CPU, the GPU or its memory at or above its threshold (each 95th percentile below "
        "it): the batch could be larger.",
        true,
        share_params({P("cpu_threshold_p95", 70, "CPU 95th percentile (%) threshold"),
                      P("gpu_threshold_p95", 70, "GPU 95th percentile (%) threshold"),
                      P("gpu_memory_threshold_p95", 70, "GPU memory 95th percentile (%) threshold"),
                      P("window", 500, "values in the longest span judged"),
                      P("patience", 1000, patience_doc)},
                     false)},
       FactoryOf<BatchSizeRule>()});
  out->push_back(
      {{"GPUMemoryIncrease",
        "Per GPU, from `settle_s` after the node's first step: fires when the mean memory "
        "utilisation of the last `window` samples exceeds the mean of the `window` samples "
        "before by more than `increase` percentage points.",
        true,
        {P("increase", 5, "percentage points of memory utilisation"),
         P("patience", 1000, patience_doc), P("window", 10, "samples per moving-average window"),
         P("settle_s", 5, "seconds after the node's first step before samples count")}},
       FactoryOf<GpuMemoryIncreaseRule>()});
  out->push_back(
      {{"LoadBalancing",
        "Fires when the utilisation histograms of two GPUs differ, with confidence, by a "
        "Jensen-Shannon distance above `threshold` (0: same shape, 0.83: disjoint).",
        true,
        {P("threshold", 0.5,
           "Jensen-Shannon distance between two GPUs' histograms, small-sample bias removed"),
         P("patience", 1000, patience_doc),
         P("settle_s", 5, "seconds after the node's first step before samples count"),
         P("confidence", 0.99, "confidence that two histograms differ (G-test, over all pairs)"),
         P("block_s", 2, "seconds of samples that count as one observation (autocorrelation)"),
         P("min_window_s", 20, "seconds of a GPU's samples before it is judged")}},
       FactoryOf<LoadBalancingRule>()});
  out->push_back(
      {{"OverallSystemUsage",
        "Per node percentiles (max, p99, p95, p50, min) of CPU, GPU, GPU memory, host memory, "
        "network and I/O wait. Summarises; never fires.",
        true,
        {}},
       FactoryOf<OverallSystemUsageRule>()});
}

}  // namespace trainprof::analyze::rules
