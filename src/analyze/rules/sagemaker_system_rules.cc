// SageMaker Debugger's system-metric rules: CPUBottleneck, IOBottleneck, LowGPUUtilization,
// BatchSize, GPUMemoryIncrease, LoadBalancing, OverallSystemUsage. Same names, parameters and
// defaults (smdebug_rulesconfig/profiler_rules/rules.py); thresholds are in percent as there,
// while stored ratios are 0..1. The differences from smdebug are deliberate fixes, listed in
// docs/rules.md: every value is analysed (also the last minute), each violation is counted
// once, GPUMemoryIncrease compares adjacent disjoint windows, LoadBalancing compares GPUs
// with each other.
// BatchSize, GPUMemoryIncrease and LoadBalancing live in sagemaker_gpu_rules.cc.

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "analyze/rules/rule_util.h"
#include "analyze/rules/sagemaker_system_rules_internal.h"
#include "analyze/rules/share_bound.h"

namespace trainprof::analyze::rules {
namespace {

using model::Severity;
using nlohmann::json;
using smsys::JudgeFrom;
using smsys::NodesJudgedFrom;
using smsys::ShareOptionsOf;
using smsys::SpanEvidence;

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
        case MetricKind::kMemRatio:
          a.mem_ratio = v.value;
          break;
        case MetricKind::kNetRx:
        case MetricKind::kNetTx:
          a.net += v.value;
          a.has_net = true;
          break;
        case MetricKind::kIowaitTotal:
          a.iowait = v.value;
          break;
        case MetricKind::kIowaitCore:
          a.iowait_cores += v.value;
          ++a.iowait_core_count;
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
    // Memory in use: bytes where the samplers give them, else the ratio alone (SageMaker's
    // MemoryUsedPercent, imported as memory_utilization_ratio).
    if (a.mem_used >= 0 && total > 0) {
      s["CPU memory"].Add(a.mem_used / total * 100);
    } else if (a.mem_ratio >= 0) {
      s["CPU memory"].Add(a.mem_ratio * 100);
    }
    if (a.has_net) s["Network bytes_per_second"].Add(a.net);
    // I/O wait of the node: its total, else the mean of its cores (SageMaker writes per-core
    // I/OWaitPercentage only).
    if (a.iowait >= 0) {
      s["I/O wait"].Add(a.iowait * 100);
    } else if (a.iowait_core_count > 0) {
      s["I/O wait"].Add(a.iowait_cores / a.iowait_core_count * 100);
    }
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
    double net = 0, iowait = -1, mem_ratio = -1, iowait_cores = 0;
    int cores = 0, gpus = 0, gpu_mems = 0, iowait_core_count = 0;
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
       smsys::BatchSize()});
  out->push_back(
      {{"GPUMemoryIncrease",
        "Per GPU, from `settle_s` after the node's first step: fires when the mean memory "
        "utilisation of the last `window` samples exceeds the mean of the `window` samples "
        "before by more than `increase` percentage points.",
        true,
        {P("increase", 5, "percentage points of memory utilisation"),
         P("patience", 1000, patience_doc), P("window", 10, "samples per moving-average window"),
         P("settle_s", 5, "seconds after the node's first step before samples count")}},
       smsys::GpuMemoryIncrease()});
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
       smsys::LoadBalancing()});
  out->push_back(
      {{"OverallSystemUsage",
        "Per node percentiles (max, p99, p95, p50, min) of CPU, GPU, GPU memory, host memory, "
        "network and I/O wait. Summarises; never fires.",
        true,
        {}},
       FactoryOf<OverallSystemUsageRule>()});
}

}  // namespace trainprof::analyze::rules
