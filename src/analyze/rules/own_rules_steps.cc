// trainprof's own step-share rules: DataLoaderStarvation and GPUIdleBetweenSteps (registered in
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

}  // namespace

RuleFactory DataLoaderStarvation() { return FactoryOf<DataLoaderStarvationRule>(); }
RuleFactory GpuIdleBetweenSteps() { return FactoryOf<GpuIdleBetweenStepsRule>(); }

}  // namespace trainprof::analyze::rules::own
