#include "analyze/cost/finding_cost.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/strings.h"

namespace trainprof::cost {
namespace {

using nlohmann::json;

constexpr double kNs = 1e9;

std::string PerHour(double usd_per_hour) { return "$" + StrFormat("%.6g", usd_per_hour) + "/h"; }
std::string Seconds(double s) { return StrFormat("%.1f", s) + " s"; }
std::string Percent(double pct) { return StrFormat("%.1f", pct) + " %"; }

// The instance and its price with date and source, e.g. "ml.p3.8xlarge at $14.688/h (sagemaker
// training on-demand; <source>, as of 2021-11-29)".
std::string PriceText(const NodeCost& n, bool with_storage = true) {
  std::string s = n.instance_type + " at " + PerHour(n.price.price_usd_per_hour) + " (" +
                  n.price.basis + "; " + n.price.source + ", as of " + n.price.as_of + ")";
  if (with_storage && n.storage_cost_usd > 0) {
    s += " + ML storage $" +
         StrFormat("%.4f", n.rate_usd_per_second * 3600 - n.price.price_usd_per_hour) + "/h";
  }
  return s;
}

// One accelerator's share of the instance price.
std::string GpuRateText(const NodeCost& n) {
  return "one GPU's share of " + PriceText(n, /*with_storage=*/false) + ": " +
         PerHour(*n.accelerator_usd_per_second * 3600) + " per GPU (" +
         std::to_string(n.instance.AcceleratorCount()) + " GPUs)";
}

int RanksOn(const NodeCost& n) { return std::max(1, n.ranks); }
double RankRatePerSecond(const NodeCost& n) { return n.rate_usd_per_second / RanksOn(n); }
std::string RankRateText(const NodeCost& n) {
  return "the rank's share of " + PriceText(n) + ": " + PerHour(RankRatePerSecond(n) * 3600) +
         (n.ranks > 1 ? " (" + std::to_string(n.ranks) + " ranks on the node)"
                      : " (the only rank on the node: the whole instance)");
}

const NodeCost* NodeFor(const CostReport& r, const std::string& node) {
  for (const NodeCost& n : r.nodes) {
    if (!n.assumed && (node.empty() || n.node == node)) return &n;
  }
  return nullptr;
}

std::optional<double> Number(const json& ev, const char* key) {
  auto it = ev.find(key);
  if (it == ev.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

FindingCost None(std::string why) { return {std::nullopt, std::move(why)}; }
FindingCost Priced(double usd, std::string basis) { return {usd, std::move(basis)}; }
FindingCost MissingEvidence(const char* key) {
  return None(std::string("the finding's evidence has no ") + key +
              " (recorded by an older trainprof?): its cost impact cannot be computed");
}

// GPU-level: the idle share (100 - mean utilisation) of one GPU over the finding's window.
FindingCost IdleGpuShare(const CostReport& r, const NodeCost& n, const model::Finding& f,
                         double mean_pct, const std::string& what) {
  if (!n.accelerator_usd_per_second) {
    return None(n.instance_type + " has no accelerators in the catalog: no GPU share to price");
  }
  const double idle = std::clamp(1 - mean_pct / 100, 0.0, 1.0);
  const double usd = AcceleratorCostOfRange(r, n.node, 1, f.start_ns, f.end_ns) * idle;
  return Priced(usd, (f.device.empty() ? std::string("the GPU") : f.device) + " idle share " +
                         Percent(idle * 100) + " (100 % - mean utilisation " + Percent(mean_pct) +
                         ") over " + what + " of " +
                         Seconds(static_cast<double>(f.end_ns - f.start_ns) / kNs) + ", at " +
                         GpuRateText(n));
}

FindingCost Coincidence(const NodeCost& n, const model::Finding& f, const json& ev) {
  auto idle = Number(ev, "idle_gpu_samples");
  auto points = Number(ev, "datapoints");
  auto first = Number(ev, "first_sample_ns");
  auto last = Number(ev, "last_sample_ns");
  if (!idle || !points || !first || !last) return MissingEvidence("idle_gpu_samples");
  if (!n.accelerator_usd_per_second) {
    return None(n.instance_type + " has no accelerators in the catalog: no GPU time to price");
  }
  if (*points < 2 || *last <= *first) return None("too few samples to know the sampling interval");
  const double interval_s = (*last - *first) / kNs / (*points - 1);
  const double gpu_s = *idle * interval_s;
  return Priced(gpu_s * *n.accelerator_usd_per_second,
                "GPU time left idle while the CPU was " +
                    std::string(f.rule == "IOBottleneck" ? "waiting for I/O" : "busy") + ": " +
                    StrFormat("%.0f", *idle) + " idle GPU-samples x " +
                    StrFormat("%.3f", interval_s) +
                    " s sampling interval = " + StrFormat("%.3f", gpu_s / 3600) +
                    " GPU-hours, until the rule fired, at " + GpuRateText(n));
}

FindingCost StepOutlier(const NodeCost& n, const json& ev) {
  auto it = ev.find("outlier_steps");
  if (it == ev.end() || !it->is_array()) return MissingEvidence("outlier_steps");
  double excess_ms = 0;
  int steps = 0;
  bool from_threshold = false;
  for (const json& s : *it) {
    auto d = Number(s, "duration_ms");
    auto mean = Number(s, "mean_ms");
    if (!mean) {
      mean = Number(s, "threshold_ms");
      from_threshold = true;
    }
    if (!d || !mean) continue;
    excess_ms += std::max(0.0, *d - *mean);
    ++steps;
  }
  const double secs = excess_ms / 1e3;
  return Priced(secs * RankRatePerSecond(n),
                "time beyond the mean step in the " + std::to_string(steps) +
                    " outlier steps counted when the rule fired: " + Seconds(secs) +
                    (from_threshold ? " (beyond the threshold: the evidence has no mean)" : "") +
                    ", at " + RankRateText(n));
}

FindingCost PerRankTime(const NodeCost& n, double secs, const std::string& what) {
  return Priced(secs * RankRatePerSecond(n),
                what + ": " + Seconds(secs) + ", at " + RankRateText(n));
}

FindingCost Underused(const CostReport& r, const Catalog* catalog, const NodeCost& n,
                      const model::Finding& f, const json& ev) {
  const WhatIf* best = nullptr;
  for (const WhatIf& w : r.what_ifs) {
    if ((w.id == "rightsize" || w.id == "fewer_gpus") && (!best || w.saving_usd > best->saving_usd))
      best = &w;
  }
  const std::string run_cost = "the run cost " + model::FormatUsd(r.total_cost_usd) + " (" +
                               std::to_string(r.instance_count) + " x " + PriceText(n) + ")";
  if (best != nullptr) {
    std::string priced;
    if (catalog != nullptr) {
      if (const InstanceType* row = FindInstance(*catalog, best->instance_type);
          row != nullptr && row->price_usd_per_hour) {
        priced = "; " + row->instance_type + " at " + PerHour(*row->price_usd_per_hour) +
                 " list price (" + row->price_source + ", as of " + row->price_as_of + ")";
      }
    }
    return Priced(best->saving_usd, run_cost + "; " + best->title + " would cost " +
                                        model::FormatUsd(best->new_cost_usd) + ", saving " +
                                        model::FormatUsd(best->saving_usd) + " (" +
                                        StrFormat("%.0f", best->saving_pct) + " %)" + priced);
  }
  // No cheaper catalog type: the unused share of what was paid over the finding's range.
  std::string why;
  for (const std::string& s : r.not_proposed) {
    if (s.rfind("rightsizing", 0) == 0 || s.rfind("fewer GPUs", 0) == 0)
      why += (why.empty() ? "" : "; ") + s;
  }
  const double secs = static_cast<double>(f.end_ns - f.start_ns) / kNs;
  auto gpu = Number(ev, "gpu_mean_ratio");
  if (gpu && n.accelerator_usd_per_second) {
    const int count = n.instance.AcceleratorCount();
    const double idle = std::clamp(1 - *gpu, 0.0, 1.0);
    return Priced(AcceleratorCostOfRange(r, n.node, count, f.start_ns, f.end_ns) * idle,
                  run_cost + "; no smaller instance to propose (" +
                      (why.empty() ? "no what-if" : why) + "): the unused GPU share " +
                      Percent(idle * 100) + " of " + std::to_string(count) + " GPUs over " +
                      Seconds(secs) + " of training, at " + GpuRateText(n));
  }
  auto cpu = Number(ev, "cpu_mean_ratio");
  if (!cpu) return MissingEvidence("cpu_mean_ratio");
  const double idle = std::clamp(1 - *cpu, 0.0, 1.0);
  return Priced(CostOfRange(r, n.node, f.start_ns, f.end_ns) * idle,
                run_cost + "; no smaller instance to propose (" +
                    (why.empty() ? "no what-if" : why) + "): the unused CPU share " +
                    Percent(idle * 100) + " of the instance over " + Seconds(secs) +
                    " of training");
}

}  // namespace

FindingCost CostOfFinding(const CostReport& r, const Catalog* catalog, const model::Finding& f) {
  const std::string& rule = f.rule;
  json ev = json::parse(f.evidence_json, nullptr, false);
  if (!ev.is_object()) ev = json::object();

  // Rules whose findings describe no billed time or capacity lost.
  if (rule == "GPUMemoryIncrease" || rule == "GPUMemoryGrowth" || rule == "HostMemoryGrowth") {
    return None(
        "memory growth loses no billed time by itself; its cost is the run lost if it "
        "ends in an out-of-memory failure");
  }
  if (rule == "LossNaN" || rule == "LossNotDecreasing" || rule == "ExplodingGradient" ||
      rule == "VanishingGradient") {
    return None(
        "training health: the steps after the problem are wasted, but the finding does not "
        "know how long the job would have gone on (a `stop` action ends it)");
  }
  if (rule == "CPUThrottling") {
    return None("the training time lost to CPU throttling is not measured");
  }
  if (r.nodes.empty()) return None("the cost report has no nodes");

  if (rule == "MaxInitializationTime") {
    const double usd = CostOfRange(r, "", f.start_ns, f.end_ns);
    auto step = ev.find("first_step_ns");
    const bool no_step = step != ev.end() && step->is_null();
    return Priced(
        usd,
        std::string("every instance billed from the job's start to ") +
            (no_step ? "when the rule fired, with no training step yet (" : "its first step (") +
            Seconds(static_cast<double>(f.end_ns - f.start_ns) / kNs) + " x " +
            std::to_string(r.instance_count) + " instance(s)), at " + PriceText(r.nodes.front()));
  }

  const NodeCost* n = NodeFor(r, f.node);
  if (n == nullptr) return None("node '" + f.node + "' is not in the run's cost report");

  if (rule == "LowGPUUtilization") {
    auto mean = Number(ev, "mean_percent");
    if (!mean) return MissingEvidence("mean_percent");
    return IdleGpuShare(r, *n, f, *mean, "the span of samples that decided it");
  }
  if (rule == "BatchSize") {
    auto mean = Number(ev, "gpu_mean_percent");
    if (!mean) return MissingEvidence("gpu_mean_percent");
    return IdleGpuShare(r, *n, f, *mean, "the span of samples that decided it");
  }
  if (rule == "LoadBalancing") {
    auto mean = Number(ev, "mean_percent");
    auto median = Number(ev, "median_of_gpu_means_percent");
    if (!mean || !median) return MissingEvidence("mean_percent");
    if (*mean >= *median) {
      return None(
          "this GPU is busier than the median GPU; the others' idle time is priced by "
          "LowGPUUtilization");
    }
    if (!n->accelerator_usd_per_second) {
      return None(n->instance_type + " has no accelerators in the catalog");
    }
    const double gap = (*median - *mean) / 100;
    return Priced(AcceleratorCostOfRange(r, n->node, 1, f.start_ns, f.end_ns) * gap,
                  "utilisation below the median GPU (" + Percent(*median) + " - " + Percent(*mean) +
                      " = " + Percent(gap * 100) + ") of one GPU over " +
                      Seconds(static_cast<double>(f.end_ns - f.start_ns) / kNs) + ", at " +
                      GpuRateText(*n));
  }
  if (rule == "CPUBottleneck" || rule == "IOBottleneck") return Coincidence(*n, f, ev);
  if (rule == "StepOutlier") return StepOutlier(*n, ev);
  if (rule == "Dataloader") {
    auto median = Number(ev, "parallel_dataloaders_median");
    auto cores = Number(ev, "cores");
    auto min = Number(ev, "min_threshold");
    if (!median || !cores || !min) return MissingEvidence("parallel_dataloaders_median");
    if (*median >= *cores * *min / 100) {
      return None(
          "more data-loader workers than cores cost CPU contention, which is not "
          "measured as time");
    }
    if (!r.steps.data_wait_fraction) {
      return None(
          "the steps record no data_wait: the time lost to too few workers is not "
          "measured (DataLoaderStarvation prices it when it is)");
    }
    const double share = *r.steps.data_wait_fraction;
    return Priced(CostOfRange(r, n->node, f.start_ns, f.end_ns) * share,
                  "the run's share of step time waiting for data (" + Percent(share * 100) +
                      ") x the node's cost over the finding's " +
                      Seconds(static_cast<double>(f.end_ns - f.start_ns) / kNs) + ", at " +
                      PriceText(*n));
  }
  if (rule == "DataLoaderStarvation") {
    auto steps = Number(ev, "steps");
    auto wait = Number(ev, "mean_data_wait_ms");
    if (!steps || !wait) return MissingEvidence("mean_data_wait_ms");
    return PerRankTime(*n, *steps * *wait / 1e3,
                       "time waiting for the next batch in the window's " +
                           StrFormat("%.0f", *steps) + " steps (" + StrFormat("%.3f", *wait) +
                           " ms per step)");
  }
  if (rule == "GPUIdleBetweenSteps") {
    auto steps = Number(ev, "steps");
    auto gap = Number(ev, "mean_gap_ms");
    if (!steps || !gap) return MissingEvidence("mean_gap_ms");
    return PerRankTime(*n, *steps * *gap / 1e3,
                       "host-side gaps between the window's " + StrFormat("%.0f", *steps) +
                           " steps (" + StrFormat("%.3f", *gap) + " ms per step)");
  }
  if (rule == "Recompilation") {
    auto excess = Number(ev, "excess_ms");
    auto count = Number(ev, "recompiles_in_window");
    if (!excess || !count) return MissingEvidence("excess_ms");
    return PerRankTime(*n, *excess / 1e3,
                       "time the " + StrFormat("%.0f", *count) +
                           " recompiling steps took beyond the usual step (" +
                           StrFormat("%.3f", *excess / 1e3) + " s)");
  }
  if (rule == "LongPauses") {
    auto pause = Number(ev, "pause_ms");
    if (!pause) return MissingEvidence("pause_ms");
    return PerRankTime(*n, *pause / 1e3, "the pause between steps");
  }
  if (rule == "CommunicationBound") {
    auto coll = Number(ev, "collective_ms");
    if (!coll) return MissingEvidence("collective_ms");
    return PerRankTime(*n, *coll / 1e3,
                       "time in collective calls in the window (an upper bound of what "
                       "overlapping or communicating less saves)");
  }
  if (rule == "StragglerRank") {
    // The others wait for the straggler's own time (outside collectives) beyond theirs;
    // findings stored before own time was measured carry step medians instead.
    auto rank = Number(ev, "rank_median_own_ms");
    auto typical = Number(ev, "median_of_ranks_own_ms");
    if (!rank || !typical) {
      rank = Number(ev, "rank_median_step_ms");
      typical = Number(ev, "median_of_ranks_ms");
    }
    auto ranks = Number(ev, "ranks_compared");
    auto steps = Number(ev, "steps_in_window");
    if (!rank || !typical || !ranks || !steps) return MissingEvidence("rank_median_own_ms");
    const double wait_s = std::max(0.0, *rank - *typical) / 1e3 * *steps * (*ranks - 1);
    return PerRankTime(*n, wait_s,
                       "the other " + StrFormat("%.0f", *ranks - 1) + " ranks waiting " +
                           StrFormat("%.3f", *rank - *typical) + " ms per step for " +
                           StrFormat("%.0f", *steps) +
                           " steps (synchronous training; each rank "
                           "priced like this one)");
  }
  if (rule == "UnderusedInstance") return Underused(r, catalog, *n, f, ev);
  return None("no cost model for rule " + rule);
}

void PriceFinding(const CostReport& report, const Catalog* catalog, model::Finding* finding) {
  FindingCost c = CostOfFinding(report, catalog, *finding);
  finding->cost_usd = c.cost_usd;
  finding->cost_basis = std::move(c.basis);
}

void MarkUnpriced(const std::string& why, model::Finding* finding) {
  finding->cost_usd.reset();
  finding->cost_basis = why;
}

}  // namespace trainprof::cost
