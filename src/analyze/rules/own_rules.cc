// trainprof's own rules, beyond SageMaker's: DataLoaderStarvation, GPUIdleBetweenSteps,
// HostMemoryGrowth, GPUMemoryGrowth, CPUThrottling, StragglerRank, CommunicationBound, LongPauses,
// UnderusedInstance. Ratios are 0..1 like the stored metrics. Each finding carries the values
// that made it fire and advice users can act on.

// The step-share and memory-growth rules live in own_rules_steps.cc and own_rules_memory.cc
// (own_rules_internal.h).

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

namespace trainprof::analyze::rules {
namespace {

using model::Severity;
using nlohmann::json;
using own::kNsPerSecond;
using own::StreamKey;

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
    run_training_ = true;
    if (!n.training || n.inferred) {
      // Count from the node's first step: downloads and setup are not what it is for.
      n.training = true;
      n.inferred = false;
      n.Reset();
    }
  }
  void OnSnapshot(const Snapshot& snap) override {
    NodeState& n = Grow(nodes_, static_cast<size_t>(snap.node));
    if (!n.training && run_training_) {
      // A node whose own processes record no step (a parameter server, a data node, the other
      // instances of a job whose rank 0 alone records steps) trains from the job's first step,
      // until a step of its own says when it began.
      n.training = true;
      n.inferred = true;
      n.Reset();
    }
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
    // A snapshot may hold the CPU, the GPUs or both (SageMaker writes them at different
    // times): each counts toward what it holds.
    if (cores == 0 && total < 0 && gpus == 0 && mems == 0) return;
    ++result().datapoints;
    if (n.count == 0) n.start_ns = snap.ts_ns;
    n.end_ns = snap.ts_ns;
    ++n.count;
    if (cores > 0 || total >= 0) {
      n.cpu += total >= 0 ? total : cpu / cores;
      ++n.cpu_count;
    }
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
    // Only while training: a run without a step says nothing about what the instance is for.
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].training) Evaluate(static_cast<int32_t>(i), nodes_[i]);
    }
  }

 private:
  struct NodeState {
    bool training = false, fired = false;
    bool inferred = false;  // training from the job's first step, not yet from one of its own
    int64_t start_ns = 0, end_ns = 0, count = 0, cpu_count = 0, gpu_count = 0, mem_count = 0;
    double cpu = 0, gpu = 0, mem = 0;
    ScanClock clock{60'000'000'000};
    void Reset() {
      count = cpu_count = gpu_count = mem_count = 0;
      cpu = gpu = mem = 0;
    }
  };
  void Evaluate(int32_t node_id, NodeState& n) {
    if (n.fired || n.cpu_count == 0 || n.end_ns - n.start_ns < min_duration_ns_) return;
    const double cpu = n.cpu / static_cast<double>(n.cpu_count);
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
  bool run_training_ = false;  // a step was seen on some node
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
       own::DataLoaderStarvation()});
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
       own::GpuIdleBetweenSteps()});
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
       own::HostMemoryGrowth()});
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
       own::GpuMemoryGrowth()});
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
