// SageMaker Debugger's system-metric rules: CPUBottleneck, IOBottleneck, LowGPUUtilization,
// BatchSize, GPUMemoryIncrease, LoadBalancing, OverallSystemUsage. Same names, parameters and
// defaults (smdebug_rulesconfig/profiler_rules/rules.py); thresholds are in percent as there,
// while stored ratios are 0..1. The differences from smdebug are deliberate fixes, listed in
// docs/rules.md: every value is analysed (also the last minute), each violation is counted
// once, GPUMemoryIncrease compares adjacent disjoint windows, LoadBalancing compares GPUs
// with each other.

#include <deque>
#include <map>
#include <set>
#include <unordered_map>

#include "analyze/rules/rule_util.h"

namespace trainprof::analyze::rules {
namespace {

using model::Severity;
using nlohmann::json;

constexpr int64_t kMinuteNs = 60'000'000'000;

// ---------------------------------------------------------------------------------------------
// CPUBottleneck / IOBottleneck: the share of samples in which a GPU was nearly idle while the
// CPU was saturated (or waiting for I/O).
class CoincidenceRule : public Rule {
 public:
  CoincidenceRule(const RuleSpec& spec, Params params, bool io)
      : Rule(spec, std::move(params)),
        io_(io),
        threshold_(this->params().Number("threshold")),
        gpu_threshold_(this->params().Number("gpu_threshold")),
        busy_threshold_(this->params().Number(io ? "io_threshold" : "cpu_threshold")),
        patience_(this->params().Integer("patience")) {}

  void OnSnapshot(const Snapshot& snap) override {
    int low_gpus = 0, gpus = 0, busy = 0, busy_total = 0;
    bool has_total = false;
    double max_busy = 0;
    for (const SampleValue& v : snap.values) {
      const MetricKind kind = ctx().Series(v.series).kind;
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
    ++n.datapoints;
    ++result().datapoints;
    if (low_gpus > 0) ++n.low_gpu;
    if (n.first_sample_ns == 0) n.first_sample_ns = snap.ts_ns;
    if (low_gpus > 0 && busy > 0) {
      ++n.bottlenecks;
      n.idle_gpu_samples += low_gpus;
      ++result().violations;
      if (n.first_ns == 0) n.first_ns = snap.ts_ns;
      n.last_ns = snap.ts_ns;
      n.max_busy_pct = std::max(n.max_busy_pct, max_busy);
    }
    if (n.fired || n.datapoints <= patience_) return;
    const double share = static_cast<double>(n.bottlenecks) / static_cast<double>(n.datapoints);
    if (share * 100 <= threshold_) return;
    n.fired = true;
    const std::string& node = ctx().NodeName(snap.node);
    json evidence = {{"bottleneck_samples", n.bottlenecks},
                     {"datapoints", n.datapoints},
                     {"bottleneck_percent", Round(share * 100, 2)},
                     {"low_gpu_samples", n.low_gpu},
                     {"threshold_percent", threshold_},
                     {"gpu_threshold_percent", gpu_threshold_},
                     {io_ ? "io_threshold_percent" : "cpu_threshold_percent", busy_threshold_},
                     {"first_bottleneck_ns", n.first_ns},
                     {"last_bottleneck_ns", n.last_ns},
                     // For the cost impact: GPU-samples left idle in bottleneck samples, and
                     // the span the datapoints cover (sampling interval).
                     {"idle_gpu_samples", n.idle_gpu_samples},
                     {"gpus", gpus},
                     {"first_sample_ns", n.first_sample_ns},
                     {"last_sample_ns", snap.ts_ns}};
    std::string what = io_ ? "waiting for I/O" : "busy";
    Emit(MakeFinding(
        Severity::kWarning, node, "", n.first_ns, snap.ts_ns,
        name() + ": in " + Pct(share) + " of " + std::to_string(n.datapoints) + " samples on " +
            node + " a GPU was below " + Fixed(gpu_threshold_, 0) +
            "% utilisation while the CPU was " + what + " above " + Fixed(busy_threshold_, 0) +
            "% (threshold " + Fixed(threshold_, 0) + "% of samples)",
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
    int64_t datapoints = 0, bottlenecks = 0, low_gpu = 0, idle_gpu_samples = 0;
    int64_t first_ns = 0, last_ns = 0, first_sample_ns = 0;
    double max_busy_pct = 0;
    bool fired = false;
  };
  bool io_;
  double threshold_, gpu_threshold_, busy_threshold_;
  int64_t patience_;
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
// LowGPUUtilization: per GPU, quantiles over tumbling windows of `window` values once
// `patience` values were seen, plus the trailing window at the end.
class LowGpuUtilizationRule : public Rule {
 public:
  LowGpuUtilizationRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        p95_threshold_(this->params().Number("threshold_p95")),
        p5_threshold_(this->params().Number("threshold_p5")),
        window_(std::max<int64_t>(1, this->params().Integer("window"))),
        patience_(this->params().Integer("patience")) {}

  void OnSnapshot(const Snapshot& snap) override {
    for (const SampleValue& v : snap.values) {
      if (ctx().Series(v.series).kind != MetricKind::kGpuUtil) continue;
      auto [it, inserted] = gpus_.try_emplace(v.series, static_cast<size_t>(window_));
      Gpu& g = it->second;
      g.recent.Add(snap.ts_ns, v.value * 100);
      ++result().datapoints;
      const int64_t c = g.recent.count();
      if (c > patience_ && c % window_ == 0) Evaluate(v.series, g);
    }
  }

  void Finalize(int64_t) override {
    // The trailing values since the last full window: smdebug never analysed them.
    for (auto& [series, g] : gpus_) {
      const int64_t c = g.recent.count();
      if (c > patience_ && c % window_ != 0) Evaluate(series, g);
    }
  }

 private:
  struct Gpu {
    explicit Gpu(size_t window) : recent(window) {}
    RecentValues recent;
    Episode low, fluctuating;
  };

  void Evaluate(int32_t series, Gpu& g) {
    auto [start, end] = g.recent.Copy(&scratch_);
    double sum = 0;
    for (double v : scratch_) sum += v;
    const double mean = scratch_.empty() ? 0 : sum / static_cast<double>(scratch_.size());
    const double p95 = stats::QuantileInPlace(scratch_, 0.95);
    const double p5 = stats::QuantileInPlace(scratch_, 0.05);
    const bool low = p95 < p95_threshold_;
    const bool fluct = !low && p95 > p95_threshold_ && p5 < p5_threshold_;
    if (low || fluct) ++result().violations;
    const bool open_low = g.low.Update(low);
    const bool open_fluct = g.fluctuating.Update(fluct);
    if (!open_low && !open_fluct) return;
    const SeriesKey& key = ctx().Series(series);
    const std::string& node = ctx().NodeName(key.node);
    json evidence = {
        {"p95_percent", Round(p95, 2)},    {"p5_percent", Round(p5, 2)},
        {"mean_percent", Round(mean, 2)},  {"window_values", scratch_.size()},
        {"window_start_ns", start},        {"window_end_ns", end},
        {"values_seen", g.recent.count()}, {"threshold_p95", p95_threshold_},
        {"threshold_p5", p5_threshold_},   {"kind", low ? "underutilized" : "fluctuating"}};
    if (low) {
      Emit(MakeFinding(Severity::kWarning, node, key.device, start, end,
                       key.device + " on " + node +
                           " is under-used: 95th percentile of "
                           "utilisation " +
                           Fixed(p95) + "% < " + Fixed(p95_threshold_, 0) + "% over the last " +
                           std::to_string(scratch_.size()) + " samples",
                       "Give the GPU more work per step: a larger batch size, mixed precision "
                       "with a larger model, or fewer GPUs / a smaller instance. Check the "
                       "data-loading and CPU rules: a starved GPU also shows as low "
                       "utilisation.",
                       evidence));
    } else {
      Emit(MakeFinding(Severity::kWarning, node, key.device, start, end,
                       key.device + " on " + node + " fluctuates: 95th percentile " + Fixed(p95) +
                           "% but 5th percentile " + Fixed(p5) + "% < " + Fixed(p5_threshold_, 0) +
                           "%",
                       "The GPU alternates between busy and idle: look for host-side gaps "
                       "between steps, synchronisations (.item(), .cpu()), data-loading stalls "
                       "or periodic evaluation / checkpointing on the training path.",
                       evidence));
    }
  }

  double p95_threshold_, p5_threshold_;
  int64_t window_, patience_;
  std::map<int32_t, Gpu> gpus_;
  std::vector<double> scratch_;
};

// ---------------------------------------------------------------------------------------------
// BatchSize: CPU, GPU and GPU memory all low (95th percentiles) over the same window.
class BatchSizeRule : public Rule {
 public:
  BatchSizeRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        cpu_p95_(this->params().Number("cpu_threshold_p95")),
        gpu_p95_(this->params().Number("gpu_threshold_p95")),
        mem_p95_(this->params().Number("gpu_memory_threshold_p95")),
        patience_(this->params().Integer("patience")),
        window_(std::max<int64_t>(1, this->params().Integer("window"))) {}

  void OnSnapshot(const Snapshot& snap) override {
    double core_sum = 0, total = -1;
    int cores = 0;
    bool any_gpu = false;
    for (const SampleValue& v : snap.values) {
      const MetricKind kind = ctx().Series(v.series).kind;
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
    NodeState& n = Grow(nodes_, static_cast<size_t>(snap.node));
    if (n.cpu.size() == 0) n.cpu = RecentValues(static_cast<size_t>(window_));
    n.cpu.Add(snap.ts_ns, (cores > 0 ? core_sum / cores : total) * 100);
    for (const SampleValue& v : snap.values) {
      const SeriesKey& key = ctx().Series(v.series);
      if (key.kind != MetricKind::kGpuUtil && key.kind != MetricKind::kGpuMemUtil) continue;
      auto [it, inserted] = n.gpus.try_emplace(key.device_index, static_cast<size_t>(window_));
      (key.kind == MetricKind::kGpuUtil ? it->second.util : it->second.mem)
          .Add(snap.ts_ns, v.value * 100);
    }
    ++result().datapoints;
    const int64_t c = n.cpu.count();
    if (c > patience_ && c % window_ == 0) Evaluate(snap.node, n);
  }

  void Finalize(int64_t) override {
    for (size_t node = 0; node < nodes_.size(); ++node) {
      const int64_t c = nodes_[node].cpu.count();
      if (c > patience_ && c % window_ != 0) Evaluate(static_cast<int32_t>(node), nodes_[node]);
    }
  }

 private:
  struct Gpu {
    explicit Gpu(size_t window) : util(window), mem(window) {}
    RecentValues util, mem;
    Episode episode;
  };
  struct NodeState {
    RecentValues cpu{0};
    std::map<int, Gpu> gpus;  // by GPU index
  };

  void Evaluate(int32_t node_id, NodeState& n) {
    auto [start, end] = n.cpu.Copy(&scratch_);
    const double cpu = stats::QuantileInPlace(scratch_, 0.95);
    for (auto& [index, g] : n.gpus) {
      bool violating = false;
      double util = 0, mem = 0, util_mean = 0;
      if (cpu < cpu_p95_ && g.util.size() > 0 && g.mem.size() > 0) {
        g.util.Copy(&scratch_);
        for (double v : scratch_) util_mean += v;
        if (!scratch_.empty()) util_mean /= static_cast<double>(scratch_.size());
        util = stats::QuantileInPlace(scratch_, 0.95);
        g.mem.Copy(&scratch_);
        mem = stats::QuantileInPlace(scratch_, 0.95);
        violating = util < gpu_p95_ && mem < mem_p95_;
      }
      if (violating) ++result().violations;
      if (!g.episode.Update(violating)) continue;
      const std::string& node = ctx().NodeName(node_id);
      const std::string device = "gpu" + std::to_string(index);
      Emit(MakeFinding(
          Severity::kInfo, node, device, start, end,
          device + " on " + node + " has room for a larger batch: 95th percentiles GPU " +
              Fixed(util) + "%, GPU memory " + Fixed(mem) + "%, CPU " + Fixed(cpu) +
              "% (all below " + Fixed(gpu_p95_, 0) + "/" + Fixed(mem_p95_, 0) + "/" +
              Fixed(cpu_p95_, 0) + "%)",
          "Increase the batch size (scale the learning rate with it) to use the GPU's memory "
          "and compute, or run on a smaller / cheaper instance.",
          {{"cpu_p95_percent", Round(cpu, 2)},
           {"gpu_p95_percent", Round(util, 2)},
           {"gpu_mean_percent", Round(util_mean, 2)},
           {"gpu_memory_p95_percent", Round(mem, 2)},
           {"window_start_ns", start},
           {"window_end_ns", end},
           {"cpu_threshold_p95", cpu_p95_},
           {"gpu_threshold_p95", gpu_p95_},
           {"gpu_memory_threshold_p95", mem_p95_}}));
    }
  }

  double cpu_p95_, gpu_p95_, mem_p95_;
  int64_t patience_, window_;
  std::vector<NodeState> nodes_;
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
        patience_(this->params().Integer("patience")),
        window_(std::max<int64_t>(1, this->params().Integer("window"))) {}

  void OnSnapshot(const Snapshot& snap) override {
    for (const SampleValue& v : snap.values) {
      if (ctx().Series(v.series).kind != MetricKind::kGpuMemUtil) continue;
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
      if (g.count < 2 * window_ || g.count <= patience_) continue;
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
  int64_t patience_, window_;
  std::map<int32_t, Gpu> gpus_;
};

// ---------------------------------------------------------------------------------------------
// LoadBalancing: histograms of utilisation per GPU (2 % bins) compared between every pair of
// GPUs of the run with the Jensen-Shannon distance, each data-time minute and at the end.
class LoadBalancingRule : public Rule {
 public:
  LoadBalancingRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        threshold_(this->params().Number("threshold")),
        patience_(this->params().Integer("patience")),
        clock_(kMinuteNs) {}

  void OnSnapshot(const Snapshot& snap) override {
    if (clock_.Due(snap.ts_ns)) Evaluate(snap.ts_ns);
    for (const SampleValue& v : snap.values) {
      const SeriesKey& key = ctx().Series(v.series);
      if (key.kind != MetricKind::kGpuUtil) continue;
      Gpu& g = gpus_[{ctx().NodeName(key.node), key.device_index}];
      const int bin = std::clamp(static_cast<int>(v.value * 100 / 2), 0, kBins - 1);
      g.histogram[static_cast<size_t>(bin)] += 1;
      g.sum += v.value * 100;
      ++g.count;
      if (g.first_ns == 0) g.first_ns = snap.ts_ns;
      ++result().datapoints;
    }
    last_ns_ = snap.ts_ns;
  }

  void Finalize(int64_t) override { Evaluate(last_ns_); }

 private:
  static constexpr int kBins = 50;
  struct Gpu {
    std::vector<double> histogram = std::vector<double>(kBins, 0.0);
    double sum = 0;
    int64_t count = 0;
    int64_t first_ns = 0;
    bool reported = false;
    double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0; }
  };
  using Key = std::pair<std::string, int>;  // node name, GPU index

  void Evaluate(int64_t now_ns) {
    std::vector<std::pair<const Key*, Gpu*>> eligible;
    for (auto& [key, g] : gpus_) {
      if (g.count > patience_) eligible.push_back({&key, &g});
    }
    if (eligible.size() < 2) return;
    std::vector<double> means;
    for (auto& e : eligible) means.push_back(e.second->mean());
    const double median = stats::Quantile(means, 0.5);
    std::map<Key, json> new_pairs;  // attributed GPU -> its new imbalanced peers
    for (size_t i = 0; i < eligible.size(); ++i) {
      for (size_t j = i + 1; j < eligible.size(); ++j) {
        const auto pair = std::make_pair(*eligible[i].first, *eligible[j].first);
        if (fired_pairs_.count(pair)) continue;
        const double d = stats::JensenShannonDistance(eligible[i].second->histogram,
                                                      eligible[j].second->histogram);
        if (d <= threshold_) continue;
        fired_pairs_.insert(pair);
        ++result().violations;  // each pair once
        // Blame the GPU further from the run's typical utilisation.
        const bool first_is_odd = std::abs(eligible[i].second->mean() - median) >=
                                  std::abs(eligible[j].second->mean() - median);
        const size_t odd = first_is_odd ? i : j, peer = first_is_odd ? j : i;
        new_pairs[*eligible[odd].first].push_back(
            {{"node", eligible[peer].first->first},
             {"device", "gpu" + std::to_string(eligible[peer].first->second)},
             {"distance", Round(d, 4)},
             {"peer_mean_percent", Round(eligible[peer].second->mean(), 2)}});
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
              Fixed(threshold_, 2) + ")",
          "Balance the work across GPUs: equal per-GPU batch sizes and sequence lengths "
          "(bucket by length), the same model shard sizes, no extra work (logging, "
          "evaluation) on rank 0 only; check that every GPU runs a training process.",
          {{"mean_percent", Round(g.mean(), 2)},
           {"median_of_gpu_means_percent", Round(median, 2)},
           {"imbalanced_peers", peers},
           {"threshold", threshold_},
           {"values", g.count}}));
    }
  }

  double threshold_;
  int64_t patience_;
  ScanClock clock_;
  int64_t last_ns_ = 0;
  std::map<Key, Gpu> gpus_;
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
      switch (ctx().Series(v.series).kind) {
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
      s["CPU"].push_back(a.cpu / a.cores * 100);
    else if (a.cpu_total >= 0)
      s["CPU"].push_back(a.cpu_total * 100);
    if (a.gpus > 0) s["GPU"].push_back(a.gpu / a.gpus * 100);
    if (a.gpu_mems > 0) s["GPU memory"].push_back(a.gpu_mem / a.gpu_mems * 100);
    double total = a.mem_total;
    if (total <= 0) {
      const model::NodeInfo* info = ctx().NodeInfo(snap.node);
      if (info != nullptr && info->memory_total_bytes)
        total = static_cast<double>(*info->memory_total_bytes);
    }
    if (a.mem_used >= 0 && total > 0) s["CPU memory"].push_back(a.mem_used / total * 100);
    if (a.has_net) s["Network bytes_per_second"].push_back(a.net);
    if (a.iowait >= 0) s["I/O wait"].push_back(a.iowait * 100);
    ++result().datapoints;
  }

  void Finalize(int64_t) override {
    json details = json::object();
    for (auto& [node, metrics] : series_) {
      for (auto& [metric, values] : metrics) {
        details[metric][node] = {{"max", Round(stats::QuantileInPlace(values, 1.0), 3)},
                                 {"p99", Round(stats::QuantileInPlace(values, 0.99), 3)},
                                 {"p95", Round(stats::QuantileInPlace(values, 0.95), 3)},
                                 {"p50", Round(stats::QuantileInPlace(values, 0.50), 3)},
                                 {"min", Round(stats::QuantileInPlace(values, 0.0), 3)}};
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
  using Series = std::map<std::string, std::vector<double>>;
  std::map<std::string, Series> series_;
};

ParamSpec P(const char* name, json value, const char* description) {
  return {name, std::move(value), description};
}

}  // namespace

void AddSageMakerSystemRules(std::vector<BuiltinRule>* out) {
  const char* patience_doc =
      "values (samples) to record before the first check; startup is skipped this way";
  out->push_back(
      {{"CPUBottleneck",
        "Fires when, in more than `threshold` % of the samples, a GPU was below "
        "`gpu_threshold` % utilisation while a CPU core was above `cpu_threshold` %.",
        true,
        {P("threshold", 50, "percent of samples that must be bottlenecks"),
         P("gpu_threshold", 10, "GPU utilisation (%) below which a GPU counts as idle"),
         P("cpu_threshold", 90, "CPU core utilisation (%) above which a core counts as busy"),
         P("patience", 1000, patience_doc)}},
       FactoryOf<CpuBottleneckRule>()});
  out->push_back({{"IOBottleneck",
                   "Fires when, in more than `threshold` % of the samples, a GPU was below "
                   "`gpu_threshold` % utilisation while I/O wait was above `io_threshold` %.",
                   true,
                   {P("threshold", 50, "percent of samples that must be bottlenecks"),
                    P("gpu_threshold", 10, "GPU utilisation (%) below which a GPU counts as idle"),
                    P("io_threshold", 50, "I/O wait (%) above which the node counts as I/O bound"),
                    P("patience", 1000, patience_doc)}},
                  FactoryOf<IoBottleneckRule>()});
  out->push_back({{"LowGPUUtilization",
                   "Per GPU: fires when the 95th percentile of utilisation over a window is below "
                   "`threshold_p95` % (under-used), or above it while the 5th percentile is below "
                   "`threshold_p5` % (fluctuating).",
                   true,
                   {P("threshold_p95", 70, "95th percentile (%) below which the GPU is under-used"),
                    P("threshold_p5", 10, "5th percentile (%) below which a busy GPU fluctuates"),
                    P("window", 500, "values per window the percentiles are computed over"),
                    P("patience", 1000, patience_doc)}},
                  FactoryOf<LowGpuUtilizationRule>()});
  out->push_back(
      {{"BatchSize",
        "Per GPU: fires when, over a window, the 95th percentiles of CPU, GPU and GPU memory "
        "utilisation are all below their thresholds: the batch could be larger.",
        true,
        {P("cpu_threshold_p95", 70, "CPU 95th percentile (%) threshold"),
         P("gpu_threshold_p95", 70, "GPU 95th percentile (%) threshold"),
         P("gpu_memory_threshold_p95", 70, "GPU memory 95th percentile (%) threshold"),
         P("patience", 1000, patience_doc), P("window", 500, "samples per window")}},
       FactoryOf<BatchSizeRule>()});
  out->push_back(
      {{"GPUMemoryIncrease",
        "Per GPU: fires when the mean memory utilisation of the last `window` samples exceeds "
        "the mean of the `window` samples before by more than `increase` percentage points.",
        true,
        {P("increase", 5, "percentage points of memory utilisation"),
         P("patience", 1000, patience_doc), P("window", 10, "samples per moving-average window")}},
       FactoryOf<GpuMemoryIncreaseRule>()});
  out->push_back(
      {{"LoadBalancing",
        "Fires when the utilisation histograms of two GPUs differ by a Jensen-Shannon distance "
        "above `threshold` (0: same shape, 0.83: disjoint).",
        true,
        {P("threshold", 0.5, "Jensen-Shannon distance between two GPUs' histograms"),
         P("patience", 1000, patience_doc)}},
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
