// SageMaker Debugger's GPU rules among its system-metric rules: BatchSize, GPUMemoryIncrease,
// LoadBalancing (registered, with their parameters, in sagemaker_system_rules.cc; what they
// share in sagemaker_system_rules_internal.h). The differences from smdebug are listed in
// docs/rules.md.

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "analyze/rules/rule_util.h"
#include "analyze/rules/sagemaker_system_rules_internal.h"
#include "analyze/rules/share_bound.h"

namespace trainprof::analyze::rules::smsys {
namespace {

using model::Severity;

constexpr int64_t kMinuteNs = 60'000'000'000;

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

}  // namespace

RuleFactory BatchSize() { return FactoryOf<BatchSizeRule>(); }
RuleFactory GpuMemoryIncrease() { return FactoryOf<GpuMemoryIncreaseRule>(); }
RuleFactory LoadBalancing() { return FactoryOf<LoadBalancingRule>(); }

}  // namespace trainprof::analyze::rules::smsys
