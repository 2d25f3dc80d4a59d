#include "analyze/cost/what_if.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "base/strings.h"
#include "base/time.h"

namespace trainprof::cost {
namespace {

constexpr double kHeadroom = 1.2;         // 20 % above the measured peak
constexpr double kTargetGpuUtil = 0.80;   // what "fewer GPUs" packs the work into
constexpr double kLowGpuP95 = 0.70;       // LowGPUUtilization / BatchSize threshold
constexpr double kMaxInitSeconds = 1200;  // MaxInitializationTime default: 20 min
constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

double PhaseSeconds(const NodeCost& n, std::initializer_list<const char*> names) {
  double s = 0;
  for (const PhaseCost& p : n.phases) {
    for (const char* name : names) {
      if (p.phase == name) s += p.billed_seconds;
    }
  }
  return s;
}

bool RuleFired(const WhatIfEvidence& ev, const std::string& rule) {
  for (const auto& f : ev.findings) {
    if (f.rule == rule) return true;
  }
  return false;
}

// Effective price of a candidate: its list price times the factor the current price carries
// (spot, discount), so alternatives are compared on the same basis.
std::optional<double> EffectivePrice(const NodeCost& current, const InstanceType& cand) {
  if (!cand.price_usd_per_hour) return std::nullopt;
  double factor = 1;
  if (current.price.list_price_usd_per_hour && *current.price.list_price_usd_per_hour > 0) {
    factor = current.price.price_usd_per_hour / *current.price.list_price_usd_per_hour;
  }
  return *cand.price_usd_per_hour * factor;
}

// Step-time factor on another accelerator: the slower of the compute-bound estimate (16-bit
// tensor peak, else fp32) and the memory-bound one (bandwidth). An estimate from peaks.
std::optional<double> TimeFactor(const Catalog& catalog, const std::string& from,
                                 const std::string& to, std::string* how) {
  if (Lower(from) == Lower(to)) {
    *how = "same accelerator: same step time";
    return 1.0;
  }
  const Accelerator* a = FindAccelerator(catalog, from);
  const Accelerator* b = FindAccelerator(catalog, to);
  if (a == nullptr || b == nullptr) return std::nullopt;
  std::optional<double> compute;
  std::string unit;
  if (a->TensorTflops16() && b->TensorTflops16()) {
    compute = *a->TensorTflops16() / *b->TensorTflops16();
    unit = "16-bit tensor";
  } else if (a->fp32_tflops && b->fp32_tflops) {
    compute = *a->fp32_tflops / *b->fp32_tflops;
    unit = "fp32";
  }
  if (!compute || !a->mem_bw_gbs || !b->mem_bw_gbs) return std::nullopt;
  double bw = *a->mem_bw_gbs / *b->mem_bw_gbs;
  double f = std::max(*compute, bw);
  *how = StrFormat(
      "estimated step time x%.2f on %s vs %s (peak %s ratio %.2f, memory bandwidth ratio "
      "%.2f; the slower bound; gpus.csv peaks, not a measurement)",
      f, to.c_str(), from.c_str(), unit.c_str(), *compute, bw);
  return f;
}

struct Requirements {
  int gpus = 0;
  std::optional<double> gpu_mem_bytes;  // per GPU, with headroom
  std::optional<double> vcpus;
  std::optional<double> host_mem_gib;
  std::vector<std::string> evidence;
  bool measured = false;
};

Requirements Measure(const CostReport& r, const InstanceType& cur) {
  Requirements q;
  q.gpus = cur.AcceleratorCount();
  int busy = 0;
  bool gpu_measured = false;
  double gpu_mem_peak = -1;
  std::optional<double> cpu_cores, host_mem, cores_of;
  bool cores_recorded = false;
  for (const NodeCost& n : r.nodes) {
    if (n.assumed) continue;
    if (!n.usage.gpus.empty()) {
      gpu_measured = true;
      busy = std::max(busy, n.usage.gpus_busy);
      for (const GpuUsage& g : n.usage.gpus) {
        if (g.memory_peak_bytes) gpu_mem_peak = std::max(gpu_mem_peak, *g.memory_peak_bytes);
      }
    }
    // The ratio is of the recorded machine's cores; the label's vCPUs only stand in when the
    // run has no host facts.
    std::optional<double> cores =
        n.recorded_cpu_cores ? std::optional<double>(*n.recorded_cpu_cores) : n.instance.vcpus;
    if (n.usage.cpu_p95_ratio && cores) {
      cpu_cores = std::max(cpu_cores.value_or(0), *n.usage.cpu_p95_ratio * *cores);
      cores_of = cores;
      cores_recorded = n.recorded_cpu_cores.has_value();
    }
    if (n.usage.host_memory_peak_bytes) {
      host_mem = std::max(host_mem.value_or(0), *n.usage.host_memory_peak_bytes);
    }
  }
  if (gpu_measured && q.gpus > 0) {
    q.measured = true;
    q.gpus = std::max(1, busy);
    q.evidence.push_back(StrFormat("%d of %d GPUs busy (p95 gpu_utilization_ratio >= %.0f %%)",
                                   busy, cur.AcceleratorCount(), r.idle_threshold_ratio * 100));
    if (gpu_mem_peak >= 0) {
      q.gpu_mem_bytes = gpu_mem_peak * kHeadroom;
      q.evidence.push_back(StrFormat("peak GPU memory %.1f GiB per GPU (gpu_memory_used_bytes)",
                                     gpu_mem_peak / kGiB));
    }
  }
  if (cpu_cores) {
    q.measured = true;
    q.vcpus = *cpu_cores * kHeadroom;
    q.evidence.push_back(StrFormat("CPU p95 %.1f of %.0f %s busy (cpu_utilization_ratio total)",
                                   *cpu_cores, cores_of.value_or(0),
                                   cores_recorded ? "recorded CPU cores" : "vCPUs"));
  } else {
    q.vcpus = cur.vcpus;
  }
  if (host_mem) {
    q.measured = true;
    q.host_mem_gib = *host_mem / kGiB * kHeadroom;
    q.evidence.push_back(StrFormat("peak host memory %.1f GiB of %.0f (memory_used_bytes)",
                                   *host_mem / kGiB, cur.memory_gib.value_or(0)));
  } else {
    q.host_mem_gib = cur.memory_gib;
  }
  if (!q.gpu_mem_bytes) q.gpu_mem_bytes = cur.AcceleratorMemoryBytes();
  return q;
}

bool Fits(const InstanceType& cand, const Requirements& q, std::string* why) {
  if (cand.AcceleratorCount() < q.gpus) return false;
  if (q.gpus > 0) {
    auto mem = cand.AcceleratorMemoryBytes();
    if (!mem || (q.gpu_mem_bytes && *mem < *q.gpu_mem_bytes)) return false;
  }
  if (q.vcpus && (!cand.vcpus || *cand.vcpus < *q.vcpus)) return false;
  if (q.host_mem_gib && (!cand.memory_gib || *cand.memory_gib < *q.host_mem_gib)) return false;
  *why = "fits";
  return true;
}

// Cost of the run's instances on `cand`: accelerator-bound phases scale by `factor`, the rest
// (download, upload, initialisation...) stays as measured.
double CostOn(const CostReport& r, const InstanceType& cand, double price, double factor) {
  double total = 0;
  for (const NodeCost& n : r.nodes) {
    double busy = PhaseSeconds(n, {"training", "evaluation"});
    double secs = static_cast<double>(n.billed_seconds) - busy + busy * factor;
    double storage_per_s = 0;
    if (n.storage_volume_gb && cand.IsSageMakerTraining() && cand.local_nvme_gb &&
        *cand.local_nvme_gb == 0 && n.billed_seconds > 0) {
      storage_per_s = n.storage_cost_usd / static_cast<double>(n.billed_seconds);
    }
    total += secs * (price / 3600 + storage_per_s);
  }
  return total;
}

void Finish(WhatIf w, const CostReport& r, std::vector<WhatIf>* out) {
  w.saving_usd = r.total_cost_usd - w.new_cost_usd;
  w.saving_pct = r.total_cost_usd > 0 ? 100 * w.saving_usd / r.total_cost_usd : 0;
  out->push_back(std::move(w));
}

double BucketMid(const std::string& bucket, bool* known) {
  *known = true;
  if (bucket == "<5%") return 0.025;
  if (bucket == "5-10%") return 0.075;
  if (bucket == "10-15%") return 0.125;
  if (bucket == "15-20%") return 0.175;
  if (bucket == ">20%") return 0.25;
  *known = false;
  return 0.125;
}

void SpotWhatIf(const Catalog& catalog, const CostOptions& options, const WhatIfEvidence& ev,
                CostReport* r, std::vector<WhatIf>* out) {
  const NodeCost& first = r->nodes.front();
  if (first.price.spot_discount_pct || options.spot) {
    r->not_proposed.push_back("managed spot: the job already ran on spot");
    return;
  }
  if (options.price_usd_per_hour) {
    r->not_proposed.push_back(
        "managed spot: the price was given with --price-usd-per-hour; no "
        "list price to discount");
    return;
  }
  WhatIf w;
  w.id = "managed_spot";
  w.instance_type = first.instance_type;
  std::string basis;
  double d = TypicalSpotDiscountPct(catalog, first.instance, &basis);
  bool known = false;
  double f = BucketMid(first.instance.spot_interrupt_bucket, &known);
  const double t_s = static_cast<double>(first.billed_seconds);
  const double n = static_cast<double>(r->instance_count);
  const double k = n * f * t_s / (730 * 3600);  // expected interruptions of the job
  // What an interruption bills again: the initialisation and the lost work. The download that
  // a restart repeats (Downloading after Interrupted) is not billed by SageMaker.
  const double restart_s = ev.initialization_seconds;
  const double train_s = PhaseSeconds(first, {"training", "evaluation"});
  double lost_s;
  if (ev.checkpoint_interval_seconds) {
    lost_s = *ev.checkpoint_interval_seconds / 2;
  } else {
    lost_s = train_s / 2;  // no checkpoint: half the progress, on average, is redone
  }
  const double rework = t_s > 0 ? k * (lost_s + restart_s) / t_s : 0;
  w.new_cost_usd = 0;
  for (const NodeCost& node : r->nodes) {
    std::string b;
    double dn = TypicalSpotDiscountPct(catalog, node.instance, &b);
    // Spot discounts the instance, not its ML storage volume (as the bill with --spot does);
    // both are billed for the reworked time too.
    w.new_cost_usd +=
        (node.compute_cost_usd * (1 - dn / 100) + node.storage_cost_usd) * (1 + rework);
  }
  w.title = StrFormat("Run on managed spot: about %.0f %% off %s", d, first.instance_type.c_str());
  w.evidence.push_back("discount: " + basis);
  const std::string& spot_date = first.instance.spot_as_of;
  auto age = AgeDays(spot_date, options.now_ns != 0 ? options.now_ns : WallNowNs());
  if (first.instance.spot_discount_pct && age && *age > options.max_price_age_days) {
    w.assumptions.push_back("the spot figure is from " + spot_date + " (" + std::to_string(*age) +
                            " days old): spot prices move; check the Spot Instance Advisor");
  }
  w.evidence.push_back(
      StrFormat("restart cost measured in this run: %.0f s initialisation billed again (the %.0f s "
                "download is repeated but not billed)",
                ev.initialization_seconds, ev.download_seconds));
  w.evidence.push_back(ev.checkpoint_spans > 0
                           ? StrFormat("%d checkpoint phase spans (median interval %.0f s)",
                                       ev.checkpoint_spans,
                                       ev.checkpoint_interval_seconds.value_or(0))
                           : "no checkpoint phase spans recorded");
  w.assumptions.push_back(
      known ? "interruption frequency " + first.instance.spot_interrupt_bucket +
                  " a month (Spot Advisor bucket in the catalog)"
            : "interruption frequency assumed 10-15 % a month (no Spot Advisor bucket for this "
              "type in the catalog)");
  w.assumptions.push_back(
      StrFormat("%.2f expected interruptions over %.1f h x %d instances; each restarts every "
                "instance, bills its initialisation again and loses %.0f s of work (rework "
                "+%.3f %%); the repeated download is not billed; the discount applies to the "
                "instances, not their storage",
                k, t_s / 3600, r->instance_count, lost_s, rework * 100));
  w.assumptions.push_back(
      "SageMaker reports the real saving per job "
      "(1 - BillableTimeInSeconds / TrainingTimeInSeconds); spot capacity "
      "may add waiting time (MaxWaitTimeInSeconds)");
  if (ev.checkpoint_spans == 0) {
    w.assumptions.push_back(
        "without checkpoints an interruption restarts training from the "
        "beginning: add checkpoints first (CheckpointConfig); built-in "
        "algorithms that cannot checkpoint are capped at MaxWaitTimeInSeconds "
        "= 3600 s");
  }
  w.action =
      "EnableManagedSpotTraining=True, MaxWaitTimeInSeconds > MaxRuntimeInSeconds, "
      "checkpoints to CheckpointConfig.S3Uri";
  Finish(std::move(w), *r, out);
}

void RightsizeWhatIfs(const Catalog& catalog, const WhatIfEvidence& ev, CostReport* r,
                      std::vector<WhatIf>* out) {
  const NodeCost& first = r->nodes.front();
  const InstanceType& cur = first.instance;
  Requirements q = Measure(*r, cur);
  if (!q.measured) {
    r->not_proposed.push_back("rightsizing: no CPU, memory or GPU usage was measured");
    return;
  }
  if (cur.provider == "custom") {
    r->not_proposed.push_back("rightsizing: the instance type is not in the catalog");
    return;
  }
  for (const char* rule : {"LowGPUUtilization", "BatchSize"}) {
    if (RuleFired(ev, rule)) q.evidence.push_back(std::string("rule ") + rule + " fired");
  }
  struct Option {
    const InstanceType* row;
    double cost;
    std::string how;
  };
  auto best_option = [&](const Requirements& req, bool same_model_only) -> std::optional<Option> {
    std::optional<Option> best;
    for (const InstanceType& cand : catalog.instances) {
      if (cand.provider != cur.provider || cand.service != cur.service) continue;
      if (Lower(cand.instance_type) == Lower(cur.instance_type)) continue;
      if (req.gpus > 0 && cand.AcceleratorCount() == 0) continue;
      if (same_model_only && Lower(cand.accel_model) != Lower(cur.accel_model)) continue;
      std::string why;
      if (!Fits(cand, req, &why)) continue;
      auto price = EffectivePrice(first, cand);
      if (!price) continue;
      std::string how;
      double factor = 1;
      if (req.gpus > 0) {
        auto f = TimeFactor(catalog, cur.accel_model, cand.accel_model, &how);
        if (!f) continue;
        factor = *f;
      }
      double cost = CostOn(*r, cand, *price, factor);
      if (!best || cost < best->cost) best = Option{&cand, cost, how};
    }
    return best;
  };

  auto opt = best_option(q, false);
  if (!opt || opt->cost >= r->total_cost_usd - 0.005) {
    r->not_proposed.push_back(
        "rightsizing: no cheaper catalog type holds the measured peaks "
        "with 20 % headroom");
  } else {
    WhatIf w;
    w.id = "rightsize";
    w.instance_type = opt->row->instance_type;
    w.new_cost_usd = opt->cost;
    w.title = "Use " + opt->row->instance_type + " instead of " + cur.instance_type;
    w.evidence = q.evidence;
    w.assumptions.push_back(StrFormat(
        "%s has %d x %s, %.0f vCPUs, %.0f GiB: holds the measured peaks plus 20 %% headroom",
        opt->row->instance_type.c_str(), opt->row->AcceleratorCount(),
        opt->row->accel_model.empty() ? "no accelerator" : opt->row->accel_model.c_str(),
        opt->row->vcpus.value_or(0), opt->row->memory_gib.value_or(0)));
    if (!opt->how.empty()) w.assumptions.push_back(opt->how);
    w.assumptions.push_back(
        "idle GPUs contributed no throughput; download, upload and "
        "initialisation take as long as measured");
    w.assumptions.push_back("priced from the catalog (" + opt->row->price_source + ", " +
                            opt->row->price_as_of + ")");
    if (opt->row->instance_type.find(".xlarge") != std::string::npos &&
        opt->row->AcceleratorCount() > 0) {
      w.assumptions.push_back(
          "the smallest GPU sizes carry a +40 % SageMaker markup (NOTES.md "
          "section 1.1); the 2xlarge is often the better buy");
    }
    w.action = "train on " + opt->row->instance_type;
    Finish(std::move(w), *r, out);
  }

  // Fewer GPUs / bigger batch: the busy GPUs are under-used as a group.
  if (q.gpus > 0 && cur.AcceleratorCount() > 0) {
    double sum_mean = 0, max_p95 = 0;
    int busy = 0;
    for (const NodeCost& n : r->nodes) {
      if (n.assumed || n.node != first.node) continue;
      for (const GpuUsage& g : n.usage.gpus) {
        if (g.p95_ratio < r->idle_threshold_ratio) continue;
        ++busy;
        sum_mean += g.mean_ratio;
        max_p95 = std::max(max_p95, g.p95_ratio);
      }
    }
    if (busy == 0) {
      r->not_proposed.push_back("fewer GPUs: no GPU utilisation measured above the threshold");
      return;
    }
    if (max_p95 >= kLowGpuP95) {
      r->not_proposed.push_back(
          StrFormat("fewer GPUs / bigger batch: busy GPUs reach p95 %.0f %% "
                    "(LowGPUUtilization threshold 70 %%)",
                    max_p95 * 100));
      return;
    }
    int target = std::max(1, static_cast<int>(std::ceil(sum_mean / kTargetGpuUtil - 1e-9)));
    if (target >= busy && busy >= cur.AcceleratorCount()) {
      r->not_proposed.push_back("fewer GPUs: the work would not fit in fewer GPUs at 80 %");
      return;
    }
    Requirements fewer = q;
    fewer.gpus = target;
    auto f = best_option(fewer, true);
    if (!f || f->cost >= r->total_cost_usd - 0.005 || (opt && f->row == opt->row)) {
      r->not_proposed.push_back(StrFormat(
          "fewer GPUs / bigger batch: GPUs under-used (busy GPUs p95 at most %.0f %%, mean sum "
          "%.2f GPUs) but no cheaper %s size with %d GPU(s) beyond the rightsizing one",
          max_p95 * 100, sum_mean, cur.accel_model.c_str(), target));
      return;
    }
    WhatIf w;
    w.id = "fewer_gpus";
    w.instance_type = f->row->instance_type;
    w.new_cost_usd = f->cost;
    w.title = StrFormat("Bigger batch on fewer GPUs: %d x %s (%s)", f->row->AcceleratorCount(),
                        cur.accel_model.c_str(), f->row->instance_type.c_str());
    w.evidence.push_back(
        StrFormat("%d busy GPUs with p95 utilisation at most %.0f %% (< 70 %%: "
                  "LowGPUUtilization / BatchSize shape); their mean utilisation adds "
                  "up to %.2f GPUs",
                  busy, max_p95 * 100, sum_mean));
    for (const char* rule : {"LowGPUUtilization", "BatchSize"}) {
      if (RuleFired(ev, rule)) w.evidence.push_back(std::string("rule ") + rule + " fired");
    }
    w.assumptions.push_back(
        StrFormat("the same work packs into %d GPU(s) at 80 %% utilisation with a "
                  "larger per-GPU batch; step count and wall-clock as measured "
                  "(optimistic: scaling is rarely linear, and wall-clock may grow)",
                  target));
    w.assumptions.push_back("per-GPU memory grows with the per-GPU batch: check it fits");
    w.action =
        "raise the per-GPU batch size (and learning rate) and train on " + f->row->instance_type;
    Finish(std::move(w), *r, out);
  }
}

void MixedPrecisionWhatIf(const Catalog& catalog, const WhatIfEvidence& ev, CostReport* r,
                          std::vector<WhatIf>* out) {
  const NodeCost& first = r->nodes.front();
  if (first.instance.AcceleratorCount() == 0) return;
  if (ev.kernel_events == 0 || !ev.fp32_matmul_kernel_share) {
    r->not_proposed.push_back(
        "mixed precision: no GPU kernel trace in the run (import a Kineto "
        "trace), so the precision used is unknown");
    return;
  }
  const Accelerator* a = FindAccelerator(catalog, first.instance.accel_model);
  if (a == nullptr || !a->TensorTflops16() || !a->fp32_tflops) {
    r->not_proposed.push_back("mixed precision: no tensor-core figure for " +
                              first.instance.accel_model);
    return;
  }
  const double ratio = *a->TensorTflops16() / *a->fp32_tflops;
  const double s = *ev.fp32_matmul_kernel_share;
  if (s < 0.10 || ratio < 1.5) {
    r->not_proposed.push_back(
        StrFormat("mixed precision: fp32 matmul kernels are %.0f %% of kernel "
                  "time (need 10 %%) on a %.1fx tensor/fp32 accelerator",
                  s * 100, ratio));
    return;
  }
  WhatIf w;
  w.id = "mixed_precision";
  w.instance_type = first.instance_type;
  double new_cost = 0;
  for (const NodeCost& n : r->nodes) {
    double busy = PhaseSeconds(n, {"training", "evaluation"});
    double saved_s = busy * s * (1 - 1 / ratio);
    new_cost += n.total_cost_usd - saved_s * n.rate_usd_per_second;
  }
  w.new_cost_usd = new_cost;
  w.title = StrFormat("Mixed precision (bf16/fp16 autocast): up to %.0f %% less training time",
                      100 * s * (1 - 1 / ratio));
  w.evidence.push_back(
      StrFormat("%.0f %% of GPU kernel time is matmul/convolution kernels without "
                "tensor-core names (%lld kernel events)",
                s * 100, static_cast<long long>(ev.kernel_events)));
  w.evidence.push_back(StrFormat("%s: %.0f TFLOPS 16-bit tensor vs %.1f fp32 (x%.1f, gpus.csv)",
                                 a->accel_model.c_str(), *a->TensorTflops16(), *a->fp32_tflops,
                                 ratio));
  w.assumptions.push_back(
      "upper bound: only the fp32 matmul share of training time speeds up, "
      "by the peak ratio; real speed-ups are smaller and must be measured");
  w.assumptions.push_back("activation memory halves, which also allows a bigger batch");
  w.action = "torch.autocast(dtype=torch.bfloat16) (or fp16 with a GradScaler)";
  Finish(std::move(w), *r, out);
}

void CpuGroupWhatIf(const Catalog& catalog, const WhatIfEvidence& ev, CostReport* r,
                    std::vector<WhatIf>* out) {
  const NodeCost& first = r->nodes.front();
  if (first.instance.AcceleratorCount() == 0) return;
  std::optional<double> w_frac;
  std::vector<std::string> evidence;
  if (r->steps.data_wait_fraction && *r->steps.data_wait_fraction >= 0.20) {
    w_frac = *r->steps.data_wait_fraction;
    evidence.push_back(StrFormat("data_wait is %.0f %% of step time", *w_frac * 100));
  }
  if (first.usage.cpu_bound_fraction && *first.usage.cpu_bound_fraction > 0.5) {
    if (!w_frac) w_frac = *first.usage.cpu_bound_fraction;
    evidence.push_back(
        StrFormat("GPUs under 10 %% while CPU over 90 %% for %.0f %% of samples "
                  "(CPUBottleneck shape)",
                  *first.usage.cpu_bound_fraction * 100));
  }
  if (RuleFired(ev, "CPUBottleneck")) evidence.push_back("rule CPUBottleneck fired");
  if (!w_frac) {
    r->not_proposed.push_back(
        "heterogeneous CPU group: no evidence of a CPU-bound input "
        "pipeline (data_wait < 20 % of step time, CPUBottleneck shape "
        "not seen)");
    return;
  }
  if (first.instance.provider != "aws") {
    r->not_proposed.push_back("heterogeneous CPU group: a SageMaker feature; not priced for " +
                              first.instance.provider);
    return;
  }
  // The cheapest compute-optimised type of the same service with as many vCPUs as the GPU node.
  const InstanceType* cpu = nullptr;
  for (const InstanceType& t : catalog.instances) {
    if (t.provider != first.instance.provider || t.service != first.instance.service ||
        t.family != "c5" || !t.price_usd_per_hour || !t.vcpus) {
      continue;
    }
    if (*t.vcpus >= first.instance.vcpus.value_or(0) &&
        (cpu == nullptr || *t.price_usd_per_hour < *cpu->price_usd_per_hour)) {
      cpu = &t;
    }
  }
  if (cpu == nullptr) {
    r->not_proposed.push_back("heterogeneous CPU group: no c5 row large enough in the catalog");
    return;
  }
  double new_cost = 0;
  double hours = 0;
  for (const NodeCost& n : r->nodes) {
    double busy = PhaseSeconds(n, {"training"});
    double saved_s = busy * *w_frac;
    double secs = static_cast<double>(n.billed_seconds) - saved_s;
    new_cost += n.total_cost_usd - saved_s * n.rate_usd_per_second;
    new_cost += secs * *EffectivePrice(n, *cpu) / 3600;
    hours += secs / 3600;
  }
  if (new_cost >= r->total_cost_usd - 0.005) {
    r->not_proposed.push_back(
        StrFormat("heterogeneous CPU group: %s for %.1f h costs more than the "
                  "GPU time it would recover",
                  cpu->instance_type.c_str(), hours));
    return;
  }
  WhatIf w;
  w.id = "heterogeneous_cpu_group";
  w.instance_type = cpu->instance_type;
  w.new_cost_usd = new_cost;
  w.title = "Move data preprocessing to an " + cpu->instance_type + " instance group";
  w.evidence = evidence;
  w.assumptions.push_back(
      StrFormat("the input wait (%.0f %% of training time) disappears once a CPU "
                "group feeds batches; one %s per GPU instance for the whole job",
                *w_frac * 100, cpu->instance_type.c_str()));
  w.assumptions.push_back(
      "needs SageMaker Python SDK >= 2.98 and PyTorch >= 1.10 or "
      "TensorFlow >= 2.6 (heterogeneous clusters)");
  w.action =
      "a heterogeneous cluster with tf.data service / a data-loading instance group, or "
      "more data-loader workers first";
  Finish(std::move(w), *r, out);
}

void StartupWhatIfs(const WhatIfEvidence& ev, CostReport* r, std::vector<WhatIf>* out) {
  double download_cost = 0, download_s = 0;
  for (const PhaseCost& p : r->phases) {
    if (p.phase == "download") {
      download_cost += p.cost_usd;
      download_s += p.billed_seconds;
    }
  }
  const NodeCost& first = r->nodes.front();
  const double billed = static_cast<double>(first.billed_seconds);
  if (download_s <= 0) {
    r->not_proposed.push_back("streaming input (FastFile / Pipe): no download phase recorded");
  } else if (ev.download_seconds < 60 || ev.download_seconds < 0.05 * billed) {
    r->not_proposed.push_back(
        StrFormat("streaming input (FastFile / Pipe): the download takes %.0f s, "
                  "under a minute or 5 %% of the job",
                  ev.download_seconds));
  } else {
    WhatIf w;
    w.id = "streaming_input";
    w.new_cost_usd = r->total_cost_usd - download_cost;
    w.title = "Stream the input (FastFile or Pipe mode) instead of downloading it first";
    w.evidence.push_back(
        StrFormat("download phase: %.0f s per instance (%.0f %% of billed time), "
                  "billed in File mode",
                  ev.download_seconds, 100 * ev.download_seconds / billed));
    w.assumptions.push_back(
        "the billed download phase disappears; training reads the data as "
        "it streams and keeps its speed (check IOBottleneck after the change)");
    w.action = "TrainingInputMode FastFile (S3 prefix) or Pipe; or FSx for Lustre";
    Finish(std::move(w), *r, out);
  }
  const bool rule = RuleFired(ev, "MaxInitializationTime");
  if (ev.initialization_seconds > kMaxInitSeconds) {
    WhatIf w;
    w.id = "shorter_initialization";
    double saved = 0;
    for (const NodeCost& n : r->nodes) {
      saved += (ev.initialization_seconds - kMaxInitSeconds) * n.rate_usd_per_second;
    }
    w.new_cost_usd = r->total_cost_usd - saved;
    w.title = StrFormat("Shorten initialisation from %.0f min to the 20-minute rule threshold",
                        ev.initialization_seconds / 60);
    w.evidence.push_back(StrFormat("initialisation %.0f s per instance (%s)",
                                   ev.initialization_seconds, r->initialization_basis.c_str()));
    if (rule) w.evidence.push_back("rule MaxInitializationTime fired");
    w.assumptions.push_back(
        "initialisation brought down to MaxInitializationTime's 20 minutes "
        "(default threshold); the rest of the job unchanged");
    w.action = "cache the dataset and container image, start the first step sooner";
    Finish(std::move(w), *r, out);
  } else if (r->initialization_seconds) {
    r->not_proposed.push_back(
        StrFormat("shorter initialisation: %.0f s per instance, under the "
                  "20-minute MaxInitializationTime threshold",
                  ev.initialization_seconds));
  }
}

}  // namespace

bool IsMatmulKernel(const std::string& name) {
  std::string n = Lower(name);
  for (const char* k : {"gemm", "matmul", "cutlass", "conv", "cudnn", "xmma", "wgrad", "dgrad"}) {
    if (n.find(k) != std::string::npos) return true;
  }
  return false;
}

bool IsTensorCoreKernel(const std::string& name) {
  std::string n = Lower(name);
  for (const char* k :
       {"f16", "bf16", "fp16", "half", "hmma", "h884", "h1688", "h16816", "s1688", "s16816", "tf32",
        "884", "1688", "16816", "wgmma", "e4m3", "e5m2", "i8816", "imma"}) {
    if (n.find(k) != std::string::npos) return true;
  }
  return false;
}

void AddWhatIfs(const Catalog& catalog, const CostOptions& options, const WhatIfEvidence& ev,
                CostReport* report) {
  if (report->nodes.empty()) return;
  std::vector<WhatIf> out;
  SpotWhatIf(catalog, options, ev, report, &out);
  // Sizing and accelerator what-ifs read the measurements against the instance: not when the
  // recorded hardware is not the labelled one.
  const NodeCost& first = report->nodes.front();
  if (first.hardware_mismatch.empty()) {
    RightsizeWhatIfs(catalog, ev, report, &out);
    MixedPrecisionWhatIf(catalog, ev, report, &out);
    CpuGroupWhatIf(catalog, ev, report, &out);
  } else {
    const int gpus = first.recorded_gpus.value_or(0);
    const std::string recorded =
        std::to_string(first.recorded_cpu_cores.value_or(0)) + " CPU cores, " +
        (gpus == 0 ? std::string("no GPU") : std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs"));
    const int label_gpus = first.instance.AcceleratorCount();
    const std::string label = StrFormat("%.0f vCPUs, %d %s", first.instance.vcpus.value_or(0),
                                        label_gpus, label_gpus == 1 ? "GPU" : "GPUs");
    for (const char* what : {"rightsizing", "fewer GPUs / mixed precision / CPU group"}) {
      report->not_proposed.push_back(std::string(what) + ": the recorded hardware (" + recorded +
                                     ") is not the labelled " + first.instance_type + " (" + label +
                                     "); its measurements cannot size that instance");
    }
  }
  StartupWhatIfs(ev, report, &out);
  std::vector<WhatIf> kept;
  for (WhatIf& w : out) {
    if (w.saving_usd >= 0.005) {
      kept.push_back(std::move(w));
    } else {
      report->not_proposed.push_back(w.id + ": no saving (" + StrFormat("%.2f", w.saving_usd) +
                                     " $)");
    }
  }
  std::stable_sort(kept.begin(), kept.end(),
                   [](const WhatIf& a, const WhatIf& b) { return a.saving_usd > b.saving_usd; });
  report->what_ifs = std::move(kept);
}

}  // namespace trainprof::cost
