#include "analyze/cost/cost_usage.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/event.h"

namespace trainprof::cost::cost_detail {

namespace {

int PhasePriority(const std::string& phase) {
  // When phase spans overlap (a checkpoint inside training), the more specific one wins.
  static const std::map<std::string, int> kPriority = {
      {"checkpoint", 0},   {"evaluation", 1},     {"upload", 2},  {"download", 3},
      {"finalization", 4}, {"initialization", 5}, {"training", 7}};
  auto it = kPriority.find(phase);
  return it == kPriority.end() ? 6 : it->second;
}

}  // namespace

int PhaseOrder(const std::string& phase) {
  static const std::vector<std::string> kOrder = {"download",   "initialization", "training",
                                                  "evaluation", "checkpoint",     "finalization",
                                                  "upload",     kPhaseOther,      kPhaseRoundUp};
  auto it = std::find(kOrder.begin(), kOrder.end(), phase);
  return it == kOrder.end() ? 100 : static_cast<int>(it - kOrder.begin());
}

std::vector<Segment> Segments(const std::vector<Span>& spans, int64_t start, int64_t end) {
  std::vector<int64_t> bounds = {start, end};
  for (const Span& s : spans) {
    if (s.start_ns > start && s.start_ns < end) bounds.push_back(s.start_ns);
    if (s.end_ns > start && s.end_ns < end) bounds.push_back(s.end_ns);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  std::vector<Segment> out;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    int64_t a = bounds[i], b = bounds[i + 1];
    const Span* best = nullptr;
    for (const Span& s : spans) {
      if (s.start_ns <= a && s.end_ns >= b &&
          (best == nullptr || PhasePriority(s.name) < PhasePriority(best->name))) {
        best = &s;
      }
    }
    std::string phase = best ? best->name : (spans.empty() ? "training" : kPhaseOther);
    if (!out.empty() && out.back().phase == phase && out.back().end_ns == a) {
      out.back().end_ns = b;
    } else {
      out.push_back({a, b, phase});
    }
  }
  return out;
}

const std::string& PhaseAt(const std::vector<Segment>& segs, int64_t t) {
  static const std::string kNone = kPhaseOther;
  auto it = std::upper_bound(segs.begin(), segs.end(), t,
                             [](int64_t v, const Segment& s) { return v < s.start_ns; });
  if (it == segs.begin()) return kNone;
  --it;
  return t < it->end_ns ? it->phase : kNone;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest rank.
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

double MedianInterval(const std::vector<Sample>& s) {
  std::vector<double> d;
  for (size_t i = 1; i < s.size(); ++i)
    d.push_back(static_cast<double>(s[i].ts_ns - s[i - 1].ts_ns));
  return d.empty() ? kNs : Percentile(d, 50);
}

std::optional<double> ValueNear(const std::vector<Sample>& s, int64_t ts, int64_t tolerance) {
  auto it = std::lower_bound(s.begin(), s.end(), ts,
                             [](const Sample& x, int64_t v) { return x.ts_ns < v; });
  std::optional<double> best;
  int64_t best_d = tolerance + 1;
  if (it != s.end() && it->ts_ns - ts < best_d) {
    best = it->value;
    best_d = it->ts_ns - ts;
  }
  if (it != s.begin()) {
    --it;
    if (ts - it->ts_ns < best_d) best = it->value;
  }
  return best;
}

void MeasureUsage(const SeriesMap& sm, const std::vector<Segment>& segs, int64_t window_ns,
                  double price_per_s, const CostOptions& options, NodeCost* nc,
                  std::vector<std::string>* warnings) {
  const int accel_count = nc->instance.AcceleratorCount();
  if (accel_count > 0) {
    nc->accelerator_usd_per_second = price_per_s / accel_count;
  }
  std::vector<std::pair<int64_t, double>> max_gpu_by_ts;
  double weighted = 0, thr_s = 0, held_s = 0;
  std::map<std::string, double> idle_by_phase;
  for (const auto& [key, samples] : sm) {
    const auto& [metric, device] = key;
    std::vector<double> values;
    for (const Sample& s : samples) {
      if (s.ts_ns >= nc->window_start_ns && s.ts_ns <= nc->window_end_ns) values.push_back(s.value);
    }
    if (values.empty()) continue;
    if (metric == "cpu_utilization_ratio") {
      nc->usage.cpu_p95_ratio = Percentile(values, 95);
      nc->usage.cpu_max_ratio = *std::max_element(values.begin(), values.end());
    } else if (metric == "memory_used_bytes") {
      nc->usage.host_memory_peak_bytes = *std::max_element(values.begin(), values.end());
    } else if (metric == "gpu_utilization_ratio") {
      GpuUsage g;
      g.device = device;
      g.samples = static_cast<int64_t>(values.size());
      double sum = 0;
      for (double v : values) sum += v;
      g.mean_ratio = sum / static_cast<double>(values.size());
      g.p5_ratio = Percentile(values, 5);
      g.p95_ratio = Percentile(values, 95);
      auto mem_it = sm.find({"gpu_memory_used_bytes", device});
      auto tot_it = sm.find({"gpu_memory_total_bytes", device});
      if (mem_it != sm.end() && !mem_it->second.empty()) {
        double peak = 0;
        for (const Sample& s : mem_it->second) {
          if (s.ts_ns >= nc->window_start_ns && s.ts_ns <= nc->window_end_ns) {
            peak = std::max(peak, s.value);
          }
        }
        g.memory_peak_bytes = peak;
      }
      if (tot_it != sm.end() && !tot_it->second.empty()) {
        g.memory_total_bytes = tot_it->second.back().value;
      }
      // Each sample stands for the interval that ends at it (utilisation over the period).
      const double median = MedianInterval(samples);
      for (size_t i = 0; i < samples.size(); ++i) {
        double dt = median;
        if (i > 0) {
          double gap = static_cast<double>(samples[i].ts_ns - samples[i - 1].ts_ns);
          if (gap <= 3 * median) dt = gap;  // longer gaps are unmeasured, not idle
        }
        int64_t b = std::min(samples[i].ts_ns, nc->window_end_ns);
        int64_t a = std::max(samples[i].ts_ns - static_cast<int64_t>(dt), nc->window_start_ns);
        if (b <= a) continue;
        double len = static_cast<double>(b - a) / kNs;
        double u = std::clamp(samples[i].value, 0.0, 1.0);
        g.measured_seconds += len;
        weighted += (1 - u) * len;
        if (u < options.idle_threshold_ratio) {
          g.idle_seconds += len;
          thr_s += len;
          idle_by_phase[PhaseAt(segs, a + (b - a) / 2)] += len;
          if (mem_it != sm.end()) {
            auto used = ValueNear(mem_it->second, samples[i].ts_ns, static_cast<int64_t>(median));
            double total = g.memory_total_bytes.value_or(0);
            if (used && total > 0 && *used > 0.01 * total) {
              g.idle_held_seconds += len;
              held_s += len;
            }
          }
        }
      }
      if (g.p95_ratio >= options.idle_threshold_ratio) ++nc->usage.gpus_busy;
      nc->usage.gpus.push_back(std::move(g));
      for (const Sample& s : samples) max_gpu_by_ts.push_back({s.ts_ns, s.value});
    }
  }
  if (!nc->usage.gpus.empty() && nc->accelerator_usd_per_second) {
    const double q = *nc->accelerator_usd_per_second;
    nc->idle_weighted_cost_usd = weighted * q;
    nc->idle_threshold_cost_usd = thr_s * q;
    nc->idle_threshold_accelerator_seconds = thr_s;
    nc->idle_held_cost_usd = held_s * q;
    for (const auto& [phase, secs] : idle_by_phase) {
      nc->idle_threshold_cost_by_phase[phase] = secs * q;
    }
    double covered = 0;
    for (const GpuUsage& g : nc->usage.gpus) covered = std::max(covered, g.measured_seconds);
    if (window_ns > 0 && covered < 0.5 * static_cast<double>(window_ns) / kNs) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.1f %%",
                    100 * covered * kNs / static_cast<double>(window_ns));
      warnings->push_back("node " + nc->node + ": GPU samples cover " + buf +
                          " of the billed window; idle cost covers the sampled time only");
    }
    if (static_cast<int>(nc->usage.gpus.size()) != accel_count) {
      warnings->push_back("node " + nc->node + ": " + std::to_string(nc->usage.gpus.size()) +
                          " GPUs have "
                          "utilisation samples but " +
                          nc->instance_type + " has " + std::to_string(accel_count) +
                          " accelerators; idle cost covers the measured ones");
    }
  } else if (accel_count > 0) {
    warnings->push_back("node " + nc->node +
                        ": no gpu_utilization_ratio samples; idle "
                        "accelerator cost is n/a");
  }
  // CPU-bound share: samples where every GPU is under 10 % while the CPU is over 90 %.
  auto cpu_it = sm.find({"cpu_utilization_ratio", "total"});
  if (cpu_it != sm.end() && !max_gpu_by_ts.empty()) {
    std::map<int64_t, double> gmax;
    for (const auto& [ts, v] : max_gpu_by_ts) gmax[ts] = std::max(gmax[ts], v);
    std::vector<Sample> gm;
    for (const auto& [ts, v] : gmax) gm.push_back({ts, v});
    int64_t tol = static_cast<int64_t>(MedianInterval(gm));
    int64_t n = 0, bound = 0;
    for (const Sample& c : cpu_it->second) {
      if (c.ts_ns < nc->window_start_ns || c.ts_ns > nc->window_end_ns) continue;
      auto g = ValueNear(gm, c.ts_ns, tol);
      if (!g) continue;
      ++n;
      if (*g < 0.10 && c.value > 0.90) ++bound;
    }
    if (n > 0) nc->usage.cpu_bound_fraction = static_cast<double>(bound) / static_cast<double>(n);
  }
}

void FillStepCosts(const store::StepTable& steps, const std::function<bool(size_t)>& selected,
                   const std::string& mode, double cluster_rate_usd_per_second,
                   double total_cost_usd,
                   const std::function<std::optional<double>(const char*)>& key_number,
                   const std::set<std::string>& epoch_marks, StepCosts* sc) {
  sc->mode = mode;
  std::vector<double> durations;
  std::set<int64_t> step_numbers;
  int64_t wait_ns = 0, wait_total_ns = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!selected(i) || steps.duration_ns[i] <= 0) continue;
    durations.push_back(static_cast<double>(steps.duration_ns[i]) / kNs);
    step_numbers.insert(steps.step[i]);
    if (steps.data_wait_ns[i] != model::kMissing) {
      wait_ns += steps.data_wait_ns[i];
      wait_total_ns += steps.duration_ns[i];
    }
  }
  sc->steps = static_cast<int64_t>(step_numbers.size());
  const double rate = cluster_rate_usd_per_second;
  if (!durations.empty()) {
    sc->median_step_seconds = Percentile(durations, 50);
    sc->p90_step_seconds = Percentile(durations, 90);
    sc->cost_per_step_usd = rate * *sc->median_step_seconds;
    sc->cost_per_step_p90_usd = rate * *sc->p90_step_seconds;
    sc->amortised_cost_per_step_usd = total_cost_usd / static_cast<double>(sc->steps);
  }
  if (wait_total_ns > 0) {
    sc->data_wait_fraction = static_cast<double>(wait_ns) / static_cast<double>(wait_total_ns);
  }
  sc->samples_per_step = key_number(kKeySamplesPerStep);
  sc->steps_per_epoch = key_number(kKeyStepsPerEpoch);
  sc->epochs = key_number(kKeyEpochs);
  if (!sc->epochs && !epoch_marks.empty()) sc->epochs = static_cast<double>(epoch_marks.size());
  if (sc->steps_per_epoch && sc->cost_per_step_usd) {
    sc->cost_per_epoch_usd = *sc->cost_per_step_usd * *sc->steps_per_epoch;
  }
  if (sc->epochs && *sc->epochs > 0) {
    sc->amortised_cost_per_epoch_usd = total_cost_usd / *sc->epochs;
  } else if (sc->steps_per_epoch && sc->amortised_cost_per_step_usd) {
    sc->amortised_cost_per_epoch_usd = *sc->amortised_cost_per_step_usd * *sc->steps_per_epoch;
  }
  if (sc->samples_per_step && *sc->samples_per_step > 0) {
    if (sc->cost_per_step_usd) {
      sc->cost_per_1000_samples_usd = *sc->cost_per_step_usd / *sc->samples_per_step * 1000;
    }
    if (sc->amortised_cost_per_step_usd) {
      sc->amortised_cost_per_1000_samples_usd =
          *sc->amortised_cost_per_step_usd / *sc->samples_per_step * 1000;
    }
  }
}

}  // namespace trainprof::cost::cost_detail
