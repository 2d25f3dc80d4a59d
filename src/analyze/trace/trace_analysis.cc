#include "analyze/trace/trace_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <unordered_map>

#include "analyze/trace/intervals.h"

namespace trainprof::analyze::trace {
namespace {

double Round(double v, int digits) {
  double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

double Pct(int64_t part, int64_t whole, int digits = 2) {
  return whole > 0 ? Round(100.0 * static_cast<double>(part) / static_cast<double>(whole), digits)
                   : 0.0;
}

bool Contains(const std::string& s, const char* needle) {
  return s.find(needle) != std::string::npos;
}

bool IsComm(const std::string& name, bool ncclkernel_only) {
  if (ncclkernel_only) return Contains(name, "ncclKernel");
  // ncclKernel_* (NCCL < 2.19), ncclDevKernel_* (NCCL >= 2.19), ncclX..., and gloo.
  return name.rfind("nccl", 0) == 0 || Contains(name, "ncclKernel") ||
         Contains(name, "ncclDevKernel") || name.rfind("gloo:", 0) == 0;
}

// One decimal, for percentages in recommendation text.
std::string Format(const char* /*fmt*/, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// numpy's (and pandas') default percentile: linear between the two nearest ranks, so the
// median of an even count is the mean of the middle two (nearest rank took the upper one).
int64_t Percentile(std::vector<int64_t>& v, double q) {
  if (v.empty()) return 0;
  const double h = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(h);
  std::nth_element(v.begin(), v.begin() + static_cast<long>(lo), v.end());
  const int64_t a = v[lo];
  if (lo + 1 >= v.size()) return a;
  const int64_t b = *std::min_element(v.begin() + static_cast<long>(lo) + 1, v.end());
  return a + static_cast<int64_t>(
                 std::llround((h - static_cast<double>(lo)) * static_cast<double>(b - a)));
}

// A map from correlation ids (>= 0; a later Put of an id replaces its value) to values, for
// the runtime call and the GPU end of each id: open addressing in one array, a power of two at
// least twice the ids, so that building it allocates once and a lookup is a probe or two.
// Replaces unordered_maps whose nodes were an allocation an entry.
template <typename V>
class IdMap {
 public:
  explicit IdMap(size_t ids) {
    size_t cap = 16;
    int bits = 4;
    while (cap < 2 * ids) {
      cap *= 2;
      ++bits;
    }
    slots_.assign(cap, Slot{-1, V{}});
    mask_ = cap - 1;
    shift_ = 64 - bits;
  }
  void Put(int64_t id, V value) {
    Slot* slot = Find(id);
    slot->id = id;
    slot->value = value;
  }
  const V* Get(int64_t id) const {
    if (id < 0) return nullptr;
    for (size_t i = Hash(id);; i = (i + 1) & mask_) {
      if (slots_[i].id == id) return &slots_[i].value;
      if (slots_[i].id < 0) return nullptr;
    }
  }

 private:
  struct Slot {
    int64_t id;
    V value;
  };
  size_t Hash(int64_t id) const {  // Fibonacci hashing: the product's top bits
    return static_cast<size_t>((static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  Slot* Find(int64_t id) {
    for (size_t i = Hash(id);; i = (i + 1) & mask_) {
      if (slots_[i].id == id || slots_[i].id < 0) return &slots_[i];
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 60;
};

std::vector<NameTotal> TopTotals(std::unordered_map<int32_t, NameTotal>& by_name,
                                 const RankTrace& t, size_t n) {
  std::vector<NameTotal> v;
  v.reserve(by_name.size());
  for (auto& [code, x] : by_name) {
    x.name = t.Name(code);
    x.mean_ns = x.count > 0 ? static_cast<double>(x.total_ns) / static_cast<double>(x.count) : 0;
    v.push_back(std::move(x));
  }
  std::sort(v.begin(), v.end(), [](const NameTotal& a, const NameTotal& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  if (v.size() > n) v.resize(n);
  return v;
}

}  // namespace

const char* KernelTypeName(KernelType t) {
  switch (t) {
    case KernelType::kComputation:
      return "COMPUTATION";
    case KernelType::kCommunication:
      return "COMMUNICATION";
    case KernelType::kMemory:
      return "MEMORY";
  }
  return "?";
}

KernelType ClassifyGpu(const GpuActivity& a, const std::string& name, bool ncclkernel_only) {
  // Memory by category, not by "Memcpy" in the name (HTA's rule also matches compute kernels
  // whose names merely contain the word).
  if (a.kind == GpuKind::kMemcpy || a.kind == GpuKind::kMemset) return KernelType::kMemory;
  if (IsComm(name, ncclkernel_only)) return KernelType::kCommunication;
  return KernelType::kComputation;
}

RankAnalysis AnalyzeRank(const RankTrace& t, const AnalysisOptions& o) {
  RankAnalysis r;
  r.rank = t.rank;
  r.label = t.label;
  r.node = t.node;
  r.cpu_spans = static_cast<int64_t>(t.cpu.size());

  // GPU activities that count as busy: kernels, memcpy, memset (and syncs in HTA mode).
  std::vector<const GpuActivity*> busy;
  std::vector<KernelType> types;
  busy.reserve(t.gpu.size());
  types.reserve(t.gpu.size());
  for (const GpuActivity& a : t.gpu) {
    if (a.kind == GpuKind::kSync && !o.hta_count_sync_as_busy) continue;
    busy.push_back(&a);
    types.push_back(ClassifyGpu(a, t.Name(a.name), o.hta_comm_by_ncclkernel_only));
  }
  r.gpu_activities = static_cast<int64_t>(busy.size());

  Intervals by_type[3];
  Intervals all;
  all.reserve(busy.size());
  for (size_t i = 0; i < busy.size(); ++i) {
    Interval x{busy[i]->start_ns, busy[i]->end_ns};
    all.push_back(x);
    by_type[static_cast<int>(types[i])].push_back(x);
  }
  all = Merge(std::move(all));
  for (auto& v : by_type) v = Merge(std::move(v));

  if (!all.empty()) {
    Temporal tb;
    tb.kernel_ns = all.back().second - all.front().first;
    tb.idle_ns = tb.kernel_ns - Length(all);
    tb.compute_ns = Length(by_type[0]);
    tb.non_compute_ns = tb.kernel_ns - tb.compute_ns - tb.idle_ns;
    tb.idle_pct = Pct(tb.idle_ns, tb.kernel_ns);
    tb.compute_pct = Pct(tb.compute_ns, tb.kernel_ns);
    tb.non_compute_pct = Pct(tb.non_compute_ns, tb.kernel_ns);
    r.temporal = tb;

    // Kernel-type breakdown with overlaps: a sweep over the three merged lists.
    // Each type's edges are in order already (merged intervals): merged, not sorted.
    std::vector<std::pair<int64_t, int>> type_edges[3];
    for (int k = 0; k < 3; ++k) {
      auto& e = type_edges[k];
      e.reserve(2 * by_type[k].size());
      for (const Interval& x : by_type[k]) {
        e.emplace_back(x.first, 1 << k);
        e.emplace_back(x.second, -(1 << k));
      }
      // An empty interval's start comes before its end here, after it in pair order.
      if (!std::is_sorted(e.begin(), e.end())) std::sort(e.begin(), e.end());
    }
    std::vector<std::pair<int64_t, int>> first_two, edges;
    first_two.reserve(type_edges[0].size() + type_edges[1].size());
    std::merge(type_edges[0].begin(), type_edges[0].end(), type_edges[1].begin(),
               type_edges[1].end(), std::back_inserter(first_two));
    edges.reserve(first_two.size() + type_edges[2].size());
    std::merge(first_two.begin(), first_two.end(), type_edges[2].begin(), type_edges[2].end(),
               std::back_inserter(edges));
    std::map<int, int64_t> by_mask;
    int mask = 0;
    for (size_t i = 0; i < edges.size(); ++i) {
      mask += edges[i].second;
      if (i + 1 < edges.size() && mask > 0) by_mask[mask] += edges[i + 1].first - edges[i].first;
    }
    int64_t sum = 0;
    for (const auto& [m, ns] : by_mask) sum += ns;
    for (const auto& [m, ns] : by_mask) {
      if (ns <= 0) continue;
      std::string label;
      for (int k = 0; k < 3; ++k) {
        if ((m & (1 << k)) == 0) continue;
        if (!label.empty()) label += " overlapping ";
        label += KernelTypeName(static_cast<KernelType>(k));
      }
      r.kernel_types.push_back({label, ns, Pct(ns, sum, 1)});
    }
    std::sort(
        r.kernel_types.begin(), r.kernel_types.end(),
        [](const KernelTypeTime& a, const KernelTypeTime& b) { return a.time_ns > b.time_ns; });
    if (!by_type[1].empty()) {
      r.comm_comp_overlap_pct = Pct(IntersectLength(by_type[1], by_type[0]), Length(by_type[1]));
    }
  }

  // Runtime calls by correlation id: launch statistics and host-wait detection.
  IdMap<const CpuSpan*> runtime_by_corr(static_cast<size_t>(std::count_if(
      t.cpu.begin(), t.cpu.end(), [](const CpuSpan& c) { return c.kind == CpuKind::kRuntime; })));
  for (const CpuSpan& c : t.cpu) {
    if (c.kind == CpuKind::kRuntime && c.correlation >= 0) runtime_by_corr.Put(c.correlation, &c);
  }

  // Idle time per stream.
  std::map<std::pair<int64_t, int64_t>, std::vector<const GpuActivity*>> streams;
  for (const GpuActivity* a : busy) streams[{a->device, a->stream}].push_back(a);
  for (auto& [key, acts] : streams) {
    int64_t cat_ns[3] = {0, 0, 0};  // host_wait, kernel_wait, other
    int64_t cat_gaps[3] = {0, 0, 0};
    int64_t prev_end = acts.front()->end_ns;
    for (size_t i = 1; i < acts.size(); ++i) {
      const GpuActivity* a = acts[i];
      int64_t gap = a->start_ns - prev_end;
      int64_t launched = INT64_MIN;
      if (const CpuSpan* const* call = runtime_by_corr.Get(a->correlation)) {
        launched = (*call)->start_ns;
      }
      int c = 2;
      if (launched != INT64_MIN && launched > prev_end)
        c = 0;
      else if (gap < o.kernel_wait_threshold_ns)
        c = 1;
      if (gap > 0) {
        cat_ns[c] += gap;
        ++cat_gaps[c];
      }
      prev_end = std::max(prev_end, a->end_ns);
    }
    int64_t total = cat_ns[0] + cat_ns[1] + cat_ns[2];
    static const char* kNames[3] = {"host_wait", "kernel_wait", "other"};
    for (int c = 0; c < 3; ++c) {
      IdleEntry e;
      e.device = key.first;
      e.stream = key.second;
      e.category = kNames[c];
      e.time_ns = cat_ns[c];
      e.gaps = cat_gaps[c];
      e.ratio =
          total > 0 ? Round(static_cast<double>(cat_ns[c]) / static_cast<double>(total), 4) : 0.0;
      r.idle.push_back(e);
    }
  }

  // Kernel launch statistics.
  std::vector<int64_t> delays;
  for (const GpuActivity* a : busy) {
    if (a->kind != GpuKind::kKernel) continue;
    ++r.launch.kernels;
    const CpuSpan* const* call = runtime_by_corr.Get(a->correlation);
    if (call == nullptr) continue;
    ++r.launch.correlated;
    const CpuSpan& rt = **call;
    int64_t delay = a->start_ns - rt.start_ns;
    delays.push_back(delay);
    if (a->end_ns - a->start_ns < rt.end_ns - rt.start_ns) ++r.launch.short_kernels;
    if (rt.end_ns - rt.start_ns > o.runtime_cutoff_ns) ++r.launch.runtime_outliers;
    if (delay > o.launch_delay_cutoff_ns) ++r.launch.launch_delay_outliers;
  }
  r.launch.launch_delay_p50_ns = Percentile(delays, 0.5);
  r.launch.launch_delay_p90_ns = Percentile(delays, 0.9);
  r.launch.launch_delay_max_ns =
      delays.empty() ? 0 : *std::max_element(delays.begin(), delays.end());

  // Top lists.
  std::unordered_map<int32_t, NameTotal> kernels, ops;
  for (size_t i = 0; i < busy.size(); ++i) {
    NameTotal& x = kernels[busy[i]->name];
    x.type = KernelTypeName(types[i]);
    ++x.count;
    int64_t d = busy[i]->end_ns - busy[i]->start_ns;
    x.total_ns += d;
    x.max_ns = std::max(x.max_ns, d);
  }
  for (const CpuSpan& c : t.cpu) {
    if (c.kind != CpuKind::kOp) continue;
    NameTotal& x = ops[c.name];
    ++x.count;
    int64_t d = c.end_ns - c.start_ns;
    x.total_ns += d;
    x.max_ns = std::max(x.max_ns, d);
  }
  r.top_kernels = TopTotals(kernels, t, o.top_n);
  r.top_cpu_ops = TopTotals(ops, t, o.top_n);

  // Step breakdown (TensorBoard profiler overview).
  std::vector<const CpuSpan*> steps;
  for (const CpuSpan& c : t.cpu) {
    if (c.kind == CpuKind::kStep) steps.push_back(&c);
  }
  if (!steps.empty()) {
    Intervals role[7];  // kernel, memcpy, memset, communication, runtime, dataloader, cpu exec
    for (size_t i = 0; i < busy.size(); ++i) {
      Interval x{busy[i]->start_ns, busy[i]->end_ns};
      if (types[i] == KernelType::kCommunication)
        role[3].push_back(x);
      else if (busy[i]->kind == GpuKind::kMemcpy)
        role[1].push_back(x);
      else if (busy[i]->kind == GpuKind::kMemset)
        role[2].push_back(x);
      else if (busy[i]->kind == GpuKind::kKernel)
        role[0].push_back(x);
    }
    for (const CpuSpan& c : t.cpu) {
      Interval x{c.start_ns, c.end_ns};
      // Collectives timed on the host (recorded runs without a GPU trace) are communication
      // as the GPU's communication kernels are.
      if (c.kind == CpuKind::kCollective) role[3].push_back(x);
      if (c.kind == CpuKind::kRuntime) role[4].push_back(x);
      if (c.kind == CpuKind::kOp && t.Name(c.name).rfind("enumerate(DataLoader)", 0) == 0) {
        role[5].push_back(x);
      }
      if (c.kind == CpuKind::kOp || c.kind == CpuKind::kAnnotation) role[6].push_back(x);
    }
    for (auto& v : role) v = Merge(std::move(v));
    // GPU work launched by a step's runtime calls extends the step (TensorBoard does the same).
    IdMap<int64_t> gpu_end_by_corr(busy.size());
    for (const GpuActivity* a : busy) {
      if (a->correlation >= 0) gpu_end_by_corr.Put(a->correlation, a->end_ns);
    }
    int64_t prev_end = INT64_MIN;
    StepBreakdown sum;
    for (const CpuSpan* s : steps) {
      int64_t start = std::max(s->start_ns, prev_end);
      int64_t end = s->end_ns;
      auto first = std::lower_bound(t.cpu.begin(), t.cpu.end(), s->start_ns,
                                    [](const CpuSpan& c, int64_t ts) { return c.start_ns < ts; });
      for (auto c_it = first; c_it != t.cpu.end(); ++c_it) {
        const CpuSpan& c = *c_it;
        if (c.start_ns >= s->end_ns) break;
        if (c.kind != CpuKind::kRuntime) continue;
        if (const int64_t* gpu_end = gpu_end_by_corr.Get(c.correlation)) {
          end = std::max(end, *gpu_end);
        }
      }
      if (end <= start) continue;
      prev_end = end;
      StepBreakdown b;
      b.step = s->step;
      b.start_ns = start;
      b.step_ns = end - start;
      Intervals taken;
      int64_t* out[7] = {&b.kernel_ns,  &b.memcpy_ns,     &b.memset_ns,  &b.communication_ns,
                         &b.runtime_ns, &b.dataloader_ns, &b.cpu_exec_ns};
      int64_t assigned = 0;
      for (int k = 0; k < 7; ++k) {
        Intervals part = Clip(role[k], start, end);
        Intervals own = Subtract(part, taken);
        *out[k] = Length(own);
        assigned += *out[k];
        taken = Union(taken, part);
      }
      b.other_ns = b.step_ns - assigned;
      r.steps.push_back(b);
      sum.step_ns += b.step_ns;
      for (int k = 0; k < 7; ++k) {
        int64_t* dst[7] = {&sum.kernel_ns,        &sum.memcpy_ns,  &sum.memset_ns,
                           &sum.communication_ns, &sum.runtime_ns, &sum.dataloader_ns,
                           &sum.cpu_exec_ns};
        *dst[k] += *out[k];
      }
      sum.other_ns += b.other_ns;
    }
    if (!r.steps.empty()) {
      int64_t n = static_cast<int64_t>(r.steps.size());
      StepBreakdown avg;
      avg.step = -1;
      avg.step_ns = sum.step_ns / n;
      avg.kernel_ns = sum.kernel_ns / n;
      avg.memcpy_ns = sum.memcpy_ns / n;
      avg.memset_ns = sum.memset_ns / n;
      avg.communication_ns = sum.communication_ns / n;
      avg.runtime_ns = sum.runtime_ns / n;
      avg.dataloader_ns = sum.dataloader_ns / n;
      avg.cpu_exec_ns = sum.cpu_exec_ns / n;
      avg.other_ns = avg.step_ns - avg.kernel_ns - avg.memcpy_ns - avg.memset_ns -
                     avg.communication_ns - avg.runtime_ns - avg.dataloader_ns - avg.cpu_exec_ns;
      r.step_average = avg;
    }
  }

  // Recommendations, from the step averages and the analyses above.
  if (r.step_average && r.step_average->step_ns > 0) {
    const StepBreakdown& a = *r.step_average;
    double step = static_cast<double>(a.step_ns);
    double loader = 100.0 * static_cast<double>(a.dataloader_ns) / step;
    double runtime = 100.0 * static_cast<double>(a.runtime_ns) / step;
    double mem = 100.0 * static_cast<double>(a.memcpy_ns + a.memset_ns) / step;
    double comm = 100.0 * static_cast<double>(a.communication_ns) / step;
    double gpu_idle = 100.0 * static_cast<double>(a.cpu_exec_ns + a.other_ns) / step;
    if (loader > 5.0) {
      r.recommendations.push_back(
          "This run has high time cost on input data loading. " + Format("%.1f", loader) +
          "% of the step time is in DataLoader. You could try to set num_workers on "
          "DataLoader's construction and enable multi-process data loading.");
    }
    if (runtime > 10.0) {
      r.recommendations.push_back(
          Format("%.1f", runtime) +
          "% of the step time is in CUDA runtime calls with no GPU "
          "work running: many small kernel launches. Fuse operations (torch.compile) or capture "
          "the step in CUDA graphs.");
    }
    if (mem > 10.0) {
      r.recommendations.push_back(
          Format("%.1f", mem) +
          "% of the step time is memory copies/sets. Use pinned memory "
          "(pin_memory=True) with non_blocking copies, and keep tensors on the device.");
    }
    if (comm > 30.0) {
      r.recommendations.push_back(
          Format("%.1f", comm) +
          "% of the step time is communication not hidden behind "
          "kernels. Overlap it with computation (bucketed DDP, FSDP prefetch) or reduce its "
          "volume (gradient compression, larger batches per step).");
    }
    if (gpu_idle > 30.0 && loader <= 5.0) {
      r.recommendations.push_back(
          "The GPU is idle for " + Format("%.1f", gpu_idle) +
          "% of the step while the CPU "
          "runs operators or nothing is traced: the job is CPU-bound. Move work to the GPU, "
          "increase the batch size, or reduce Python overhead.");
    }
  }
  if (r.launch.kernels >= 100 && r.launch.correlated > 0 &&
      2 * r.launch.short_kernels > r.launch.correlated) {
    r.recommendations.push_back(
        std::to_string(r.launch.short_kernels) + " of " + std::to_string(r.launch.correlated) +
        " kernels run shorter than their launch call: the GPU waits on the CPU. Use CUDA graphs "
        "or torch.compile to cut launch overhead.");
  }
  return r;
}

std::vector<Straggler> FindStragglers(const std::vector<RankAnalysis>& ranks,
                                      double threshold_pct) {
  std::vector<Straggler> out;
  // Entries with neither steps nor GPU activity take no part: a recorded run also holds
  // per-node timelines without a rank (the recorder's phase spans), which must not switch the
  // comparison off. The others are compared by own time per step when all have steps, else by
  // GPU busy time when all have GPU activity.
  std::vector<const RankAnalysis*> compared;
  for (const RankAnalysis& r : ranks) {
    if (r.step_average.has_value() || r.temporal.has_value()) compared.push_back(&r);
  }
  if (compared.size() < 2) return out;
  const bool all_steps = std::all_of(compared.begin(), compared.end(), [](const RankAnalysis* r) {
    return r->step_average.has_value();
  });
  const bool all_gpu = std::all_of(compared.begin(), compared.end(),
                                   [](const RankAnalysis* r) { return r->temporal.has_value(); });
  if (!all_steps && !all_gpu) return out;
  // With steps: each rank's own time per step, the step less its communication. In synchronous
  // training the ranks' steps take about as long (the others wait in the collectives for the
  // slow one), so the step time blames no one or the waiting ranks; the time a rank spends
  // outside communication is what the others wait for.
  std::vector<double> values;
  for (const RankAnalysis* r : compared) {
    values.push_back(
        all_steps
            ? static_cast<double>(r->step_average->step_ns - r->step_average->communication_ns)
            : static_cast<double>(r->temporal->kernel_ns - r->temporal->idle_ns));
  }
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  if (median <= 0) return out;
  for (size_t i = 0; i < compared.size(); ++i) {
    double excess = 100.0 * (values[i] - median) / median;
    if (excess > threshold_pct) {
      out.push_back({compared[i]->label, all_steps ? "own_step_ns" : "busy_ns", values[i], median,
                     Round(excess, 2)});
    }
  }
  return out;
}

std::vector<DiffEntry> DiffTraces(const std::vector<RankTrace>& base,
                                  const std::vector<RankTrace>& test, size_t top_n) {
  struct Acc {
    int64_t ns = 0, count = 0;
  };
  auto collect = [](const std::vector<RankTrace>& traces,
                    std::map<std::pair<std::string, std::string>, Acc>* acc) {
    int64_t steps = 0;
    for (const RankTrace& t : traces) {
      for (const GpuActivity& a : t.gpu) {
        if (a.kind == GpuKind::kSync) continue;
        Acc& x = (*acc)[{"kernel", t.Name(a.name)}];
        x.ns += a.end_ns - a.start_ns;
        ++x.count;
      }
      for (const CpuSpan& c : t.cpu) {
        if (c.kind == CpuKind::kStep) ++steps;
        if (c.kind != CpuKind::kOp) continue;
        Acc& x = (*acc)[{"cpu_op", t.Name(c.name)}];
        x.ns += c.end_ns - c.start_ns;
        ++x.count;
      }
    }
    return steps;
  };
  std::map<std::pair<std::string, std::string>, Acc> a, b;
  int64_t steps_a = collect(base, &a);
  int64_t steps_b = collect(test, &b);
  // Per step when both runs have steps, so runs of different lengths compare.
  bool per_step = steps_a > 0 && steps_b > 0;
  std::map<std::pair<std::string, std::string>, DiffEntry> all;
  for (const auto& [k, v] : a) {
    DiffEntry& e = all[k];
    e.kind = k.first;
    e.name = k.second;
    e.base_ns = per_step ? v.ns / steps_a : v.ns;
    e.base_count = v.count;
  }
  for (const auto& [k, v] : b) {
    DiffEntry& e = all[k];
    e.kind = k.first;
    e.name = k.second;
    e.test_ns = per_step ? v.ns / steps_b : v.ns;
    e.test_count = v.count;
  }
  std::vector<DiffEntry> out;
  for (auto& [k, e] : all) {
    e.delta_ns = e.test_ns - e.base_ns;
    out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const DiffEntry& x, const DiffEntry& y) {
    return std::llabs(x.delta_ns) != std::llabs(y.delta_ns)
               ? std::llabs(x.delta_ns) > std::llabs(y.delta_ns)
               : x.name < y.name;
  });
  if (out.size() > top_n) out.resize(top_n);
  return out;
}

}  // namespace trainprof::analyze::trace
