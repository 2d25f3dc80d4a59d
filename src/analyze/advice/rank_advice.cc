#include "analyze/advice/rank_advice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "analyze/trace/intervals.h"
#include "base/json_dump.h"
#include "base/parallel.h"
#include "model/event.h"

namespace trainprof::analyze::advice {
namespace {

using nlohmann::json;
namespace tr = trace;

// Thresholds of the advice, as shares of step time (documented in docs/trace-analysis.md).
constexpr double kLoaderShare = 0.10;       // data_wait / step: the loader holds the step back
constexpr double kTraceLoaderShare = 0.05;  // DataLoader operators in a traced step
constexpr double kRuntimeShare = 0.10;
constexpr double kMemcpyShare = 0.10;
constexpr double kCommShare = 0.30;
constexpr double kGpuIdleShare = 0.30;
constexpr double kCpuBoundShare = 0.50;    // CPU operators / traced step on a CPU-only node
constexpr double kConvShare = 0.30;        // channels_last
constexpr double kMatmulConvShare = 0.50;  // bf16 autocast
constexpr double kPythonShare = 0.20;      // traced step time outside any operator
constexpr double kThreadsLow = 0.75;       // torch threads below this share of the cores
constexpr double kCpuUtilLow = 0.60;       // and the CPU less busy than this

double Round(double v, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}
double Ms(int64_t ns) { return Round(static_cast<double>(ns) / 1e6, 3); }
double Share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}
std::string Pct(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", share * 100);
  return buf;
}
std::string Fixed(double v, int digits = 1) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool IsConv(const std::string& lower) { return lower.find("conv") != std::string::npos; }
bool IsMatmul(const std::string& lower) {
  for (const char* n : {"aten::linear", "aten::addmm", "aten::mm", "aten::bmm", "aten::matmul",
                        "aten::baddbmm", "aten::addbmm", "aten::_mkldnn_linear"}) {
    if (lower == n) return true;
  }
  return false;
}
bool IsCollective(const std::string& lower) {
  for (const char* p : {"gloo:", "nccl:", "c10d::", "record_param_comms"}) {
    if (lower.rfind(p, 0) == 0) return true;
  }
  for (const char* n : {"all_reduce", "allreduce", "all_gather", "reduce_scatter", "broadcast",
                        "all_to_all", "barrier"}) {
    if (lower.find(n) != std::string::npos) return true;
  }
  return false;
}
std::optional<int64_t> ParseInt(const std::string& text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

json Opt(const std::optional<int>& v) { return v ? json(*v) : json(nullptr); }
json Opt(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }
json Opt(const std::optional<double>& v) { return v ? json(Round(*v, 4)) : json(nullptr); }

}  // namespace

std::vector<size_t> RankStepRows(const store::StepTable& steps, const tr::RankTrace& t) {
  std::vector<size_t> rows;
  bool train = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool mine =
        t.rank >= 0 ? steps.rank[i] == t.rank
                    : steps.rank[i] == model::kMissing && steps.nodes.at(steps.node[i]) == t.node;
    if (!mine || steps.duration_ns[i] <= 0) continue;
    rows.push_back(i);
    train |= steps.modes.at(steps.mode[i]) == "train";
  }
  if (train) {
    std::erase_if(rows, [&](size_t i) { return steps.modes.at(steps.mode[i]) != "train"; });
  }
  return rows;
}

PhaseAverage AveragePhases(const store::StepTable& steps, const std::vector<size_t>& rows) {
  PhaseAverage sum;
  auto part = [](int64_t v) { return v == model::kMissing ? 0 : v; };
  for (size_t i : rows) {
    const int64_t parts[4] = {steps.data_wait_ns[i], steps.forward_ns[i], steps.backward_ns[i],
                              steps.optimizer_ns[i]};
    if (std::all_of(std::begin(parts), std::end(parts),
                    [](int64_t v) { return v == model::kMissing; })) {
      continue;
    }
    ++sum.steps;
    sum.step_ns += steps.duration_ns[i];
    sum.data_wait_ns += part(parts[0]);
    sum.forward_ns += part(parts[1]);
    sum.backward_ns += part(parts[2]);
    sum.optimizer_ns += part(parts[3]);
  }
  if (sum.steps == 0) return sum;
  PhaseAverage a;
  a.steps = sum.steps;
  a.step_ns = sum.step_ns / sum.steps;
  a.data_wait_ns = sum.data_wait_ns / sum.steps;
  a.forward_ns = sum.forward_ns / sum.steps;
  a.backward_ns = sum.backward_ns / sum.steps;
  a.optimizer_ns = sum.optimizer_ns / sum.steps;
  a.other_ns = std::max<int64_t>(
      0, a.step_ns - a.data_wait_ns - a.forward_ns - a.backward_ns - a.optimizer_ns);
  return a;
}

std::optional<tr::StepBreakdown> AverageTracedSteps(const tr::RankAnalysis& a, int64_t* traced) {
  tr::StepBreakdown sum;
  int64_t n = 0;
  for (const tr::StepBreakdown& b : a.steps) {
    if (b.step_ns - b.other_ns <= 0) continue;  // nothing of the step was traced
    ++n;
    sum.step_ns += b.step_ns;
    sum.kernel_ns += b.kernel_ns;
    sum.memcpy_ns += b.memcpy_ns;
    sum.memset_ns += b.memset_ns;
    sum.communication_ns += b.communication_ns;
    sum.runtime_ns += b.runtime_ns;
    sum.dataloader_ns += b.dataloader_ns;
    sum.cpu_exec_ns += b.cpu_exec_ns;
  }
  *traced = n;
  if (n == 0) return std::nullopt;
  tr::StepBreakdown avg;
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
  return avg;
}

OperatorMix MeasureOperators(const tr::RankTrace& t, const tr::RankAnalysis& a) {
  OperatorMix mix;
  tr::Intervals traced;
  for (const tr::StepBreakdown& b : a.steps) {
    if (b.step_ns - b.other_ns <= 0) continue;
    traced.push_back({b.start_ns, b.start_ns + b.step_ns});
    mix.traced_step_ns += b.step_ns;
  }
  if (traced.empty()) return mix;
  traced = tr::Merge(std::move(traced));
  auto inside = [&](int64_t ts) {
    auto it = std::upper_bound(traced.begin(), traced.end(), tr::Interval{ts, INT64_MAX});
    return it != traced.begin() && ts < std::prev(it)->second;
  };
  tr::Intervals conv, matmul, coll;
  std::unordered_map<int64_t, int64_t> top_end_by_tid;  // end of the current top-level op
  std::unordered_map<int32_t, uint8_t> family;  // name code -> 1 conv, 2 matmul, 3 collective
  for (const tr::CpuSpan& c : t.cpu) {
    const bool op = c.kind == tr::CpuKind::kOp;
    if ((!op && c.kind != tr::CpuKind::kAnnotation) || !inside(c.start_ns)) continue;
    auto [it, inserted] = family.emplace(c.name, 0);
    if (inserted) {
      const std::string lower = Lower(t.Name(c.name));
      it->second = IsCollective(lower) ? 3 : IsConv(lower) ? 1 : IsMatmul(lower) ? 2 : 0;
    }
    if (it->second == 3) coll.push_back({c.start_ns, c.end_ns});
    if (!op) continue;
    int64_t& top_end = top_end_by_tid[c.tid];
    if (c.start_ns >= top_end) {
      ++mix.top_level_ops;
      top_end = c.end_ns;
    }
    if (it->second == 1) conv.push_back({c.start_ns, c.end_ns});
    if (it->second == 2) matmul.push_back({c.start_ns, c.end_ns});
  }
  mix.conv_ns = tr::IntersectLength(tr::Merge(std::move(conv)), traced);
  mix.matmul_ns = tr::IntersectLength(tr::Merge(std::move(matmul)), traced);
  mix.collective_ns = tr::IntersectLength(tr::Merge(std::move(coll)), traced);
  return mix;
}

std::vector<Advice> Advise(const RankSummary& s, const tr::RankAnalysis& a) {
  std::vector<Advice> out;
  const MachineFacts& m = s.machine;
  const json cores = Opt(m.cpu_cores);

  // Input pipeline, from the parts every step records (any machine).
  if (s.phase_average && s.phase_average->step_ns > 0) {
    const PhaseAverage& p = *s.phase_average;
    const double wait = Share(p.data_wait_ns, p.step_ns);
    if (wait > kLoaderShare) {
      std::string text = "Waiting for the next batch takes " + Pct(wait) + " of the step (" +
                         Fixed(Ms(p.data_wait_ns)) + " of " + Fixed(Ms(p.step_ns)) +
                         " ms, mean of " + std::to_string(p.steps) + " steps)";
      if (m.loader_workers)
        text += " with DataLoader(num_workers=" + std::to_string(*m.loader_workers) + ")";
      if (m.cpu_cores) text += " on " + std::to_string(*m.cpu_cores) + " cores";
      text += ". Raise num_workers";
      if (!m.HasGpu() && m.torch_threads) {
        text += " (on a CPU-only machine workers and torch's " + std::to_string(*m.torch_threads) +
                " operator threads share the cores: keep workers + threads <= cores)";
      }
      text +=
          ", use persistent_workers=True and a larger prefetch_factor, or pre-process the "
          "data offline.";
      out.push_back({"data_loader_workers",
                     text,
                     {{"data_wait_share", Round(wait, 4)},
                      {"data_wait_ms", Ms(p.data_wait_ns)},
                      {"step_ms", Ms(p.step_ns)},
                      {"steps", p.steps},
                      {"num_workers", Opt(m.loader_workers)},
                      {"torch_threads", Opt(m.torch_threads)},
                      {"cpu_cores", cores}}});
    }
  }

  const std::optional<tr::StepBreakdown>& avg = s.operator_average;
  const bool traced = avg && avg->step_ns > 0;
  const double step = traced ? static_cast<double>(avg->step_ns) : 0;
  auto share = [&](int64_t ns) { return traced ? static_cast<double>(ns) / step : 0.0; };
  json traced_ev = {{"steps_with_operators", s.steps_with_operators},
                    {"steps_total", s.steps_total}};
  if (traced) traced_ev["traced_step_ms"] = Ms(avg->step_ns);

  if (traced && (!s.phase_average ||
                 Share(s.phase_average->data_wait_ns, s.phase_average->step_ns) <= kLoaderShare)) {
    const double loader = share(avg->dataloader_ns);
    if (loader > kTraceLoaderShare) {
      json ev = traced_ev;
      ev["dataloader_share"] = Round(loader, 4);
      out.push_back({"data_loader_workers",
                     Pct(loader) + " of the traced step time is in DataLoader operators. Set "
                                   "num_workers on the DataLoader for multi-process loading.",
                     ev});
    }
  }

  if (m.HasGpu()) {
    if (traced) {
      const double runtime = share(avg->runtime_ns);
      const double mem = share(avg->memcpy_ns + avg->memset_ns);
      const double comm = share(avg->communication_ns);
      const double idle = share(avg->cpu_exec_ns + avg->other_ns);
      auto add = [&](const char* id, double v, const char* key, std::string text) {
        json ev = traced_ev;
        ev[key] = Round(v, 4);
        out.push_back({id, std::move(text), ev});
      };
      if (runtime > kRuntimeShare) {
        add("launch_overhead", runtime, "runtime_share",
            Pct(runtime) +
                " of the traced step time is in CUDA runtime calls with no GPU work "
                "running: many small kernel launches. Fuse operations "
                "(torch.compile) or capture the step in CUDA graphs.");
      }
      if (mem > kMemcpyShare) {
        add("memory_copies", mem, "memcpy_memset_share",
            Pct(mem) +
                " of the traced step time is memory copies/sets. Use pinned memory "
                "(pin_memory=True) with non_blocking copies, and keep tensors on the "
                "device.");
      }
      if (comm > kCommShare) {
        add("exposed_communication", comm, "communication_share",
            Pct(comm) +
                " of the traced step time is communication not hidden behind kernels. "
                "Overlap it with computation (bucketed DDP, FSDP prefetch) or reduce its "
                "volume (gradient compression, larger batches per step).");
      }
      if (idle > kGpuIdleShare && share(avg->dataloader_ns) <= kTraceLoaderShare) {
        add("gpu_idle_cpu_bound", idle, "gpu_idle_share",
            "The GPU is idle for " + Pct(idle) +
                " of the traced step while the CPU runs operators or nothing is traced: the job "
                "is CPU-bound. Move work to the GPU, increase the batch size, or reduce Python "
                "overhead.");
      }
    }
    if (a.launch.kernels >= 100 && a.launch.correlated > 0 &&
        2 * a.launch.short_kernels > a.launch.correlated) {
      out.push_back({"short_kernels",
                     std::to_string(a.launch.short_kernels) + " of " +
                         std::to_string(a.launch.correlated) +
                         " kernels run shorter than their launch call: the GPU waits on the CPU. "
                         "Use CUDA graphs or torch.compile to cut launch overhead.",
                     {{"short_kernels", a.launch.short_kernels},
                      {"correlated_kernels", a.launch.correlated}}});
    }
    return out;
  }

  // CPU only: what runs on the CPU, and how many cores it gets. Collective calls on the CPU
  // (gloo) are waiting, not computing: they do not make a step CPU-bound.
  const double collective = Share(s.mix.collective_ns, s.mix.traced_step_ns);
  const double cpu_exec = traced ? std::max(0.0, share(avg->cpu_exec_ns) - collective) : 0;
  if (traced && collective > kCommShare) {
    json ev = traced_ev;
    ev["collective_share"] = Round(collective, 4);
    out.push_back({"exposed_communication",
                   Pct(collective) +
                       " of the traced step time is spent in collective calls (all_reduce, "
                       "...): this rank waits for the others or for the network. Look for a "
                       "straggler (trainprof rules: StragglerRank), overlap communication with "
                       "compute (DDP buckets) or communicate less (gradient accumulation).",
                   ev});
  }
  const bool cpu_bound = traced && cpu_exec > kCpuBoundShare;
  if (m.torch_threads && m.cpu_cores) {
    const double ratio = static_cast<double>(*m.torch_threads) / *m.cpu_cores;
    json ev = {{"torch_threads", *m.torch_threads},
               {"cpu_cores", *m.cpu_cores},
               {"cpu_utilization_mean", Opt(m.cpu_utilization_mean)},
               {"num_workers", Opt(m.loader_workers)}};
    if (traced) ev["cpu_exec_share"] = Round(cpu_exec, 4);
    const int64_t workers = m.loader_workers.value_or(0);
    if (*m.torch_threads > *m.cpu_cores) {
      out.push_back({"torch_threads",
                     "torch runs operators on " + std::to_string(*m.torch_threads) +
                         " threads but the machine has " + std::to_string(*m.cpu_cores) +
                         " cores: the threads compete. Call torch.set_num_threads(" +
                         std::to_string(std::max<int64_t>(1, *m.cpu_cores - workers)) + ").",
                     ev});
    } else if (ratio < kThreadsLow &&
               (!m.cpu_utilization_mean || *m.cpu_utilization_mean < kCpuUtilLow)) {
      out.push_back(
          {"torch_threads",
           "torch runs operators on " + std::to_string(*m.torch_threads) + " of " +
               std::to_string(*m.cpu_cores) + " cores" +
               (m.cpu_utilization_mean ? " and the CPU is " + Pct(*m.cpu_utilization_mean) + " busy"
                                       : std::string()) +
               ". Give it the free cores: torch.set_num_threads(" +
               std::to_string(std::max<int64_t>(1, *m.cpu_cores - workers)) +
               ") (cores less DataLoader workers), or OMP_NUM_THREADS.",
           ev});
    }
  }
  if (!traced) return out;
  const int64_t per_step_conv = s.mix.conv_ns / std::max<int64_t>(1, s.steps_with_operators);
  const double conv = Share(s.mix.conv_ns, s.mix.traced_step_ns);
  const double matmul = Share(s.mix.matmul_ns, s.mix.traced_step_ns);
  if (conv > kConvShare) {
    json ev = traced_ev;
    ev["convolution_share"] = Round(conv, 4);
    ev["convolution_ms_per_step"] = Ms(per_step_conv);
    out.push_back({"channels_last",
                   "Convolutions take " + Pct(conv) + " of the traced step time (" +
                       Fixed(Ms(per_step_conv)) +
                       " ms per step). On CPU oneDNN runs them fastest in channels_last: "
                       "model = model.to(memory_format=torch.channels_last) and the same for "
                       "each input batch.",
                   ev});
  }
  if (conv + matmul > kMatmulConvShare) {
    json ev = traced_ev;
    ev["convolution_share"] = Round(conv, 4);
    ev["matmul_share"] = Round(matmul, 4);
    ev["cpu_model"] = m.cpu_model;
    out.push_back(
        {"bf16_autocast_cpu",
         "Convolutions and matrix multiplies take " + Pct(conv + matmul) +
             " of the traced step time. If the CPU" +
             (m.cpu_model.empty() ? std::string() : " (" + m.cpu_model + ")") +
             " has AVX512-BF16 or AMX (lscpu flags avx512_bf16 / amx_bf16), run them in bf16: "
             "with torch.autocast(\"cpu\", dtype=torch.bfloat16): ... around forward and loss.",
         ev});
  }
  const double python = share(avg->other_ns);
  const double ops_per_step = static_cast<double>(s.mix.top_level_ops) /
                              static_cast<double>(std::max<int64_t>(1, s.steps_with_operators));
  if (python > kPythonShare) {
    json ev = traced_ev;
    ev["outside_operators_share"] = Round(python, 4);
    ev["top_level_ops_per_step"] = Round(ops_per_step, 1);
    out.push_back({"torch_compile",
                   Pct(python) +
                       " of the traced step time runs outside any operator (Python "
                       "and framework overhead between " +
                       Fixed(ops_per_step, 0) +
                       " operators per step). torch.compile(model) fuses operators and removes "
                       "most of it.",
                   ev});
  }
  if (cpu_bound) {
    json ev = traced_ev;
    ev["cpu_exec_share"] = Round(cpu_exec, 4);
    ev["collective_share"] = Round(collective, 4);
    ev["cpu_cores"] = cores;
    ev["gpus"] = 0;
    out.push_back({"cpu_bound",
                   "The step is CPU-bound: " + Pct(cpu_exec) +
                       " of the traced step time runs in CPU operators (collective calls not "
                       "counted) on a machine without a GPU: CPU operators set the pace.",
                   ev});
  }
  return out;
}

StatusOr<std::vector<RankSummary>> SummarizeRun(store::RunReader& reader,
                                                const store::StepTable& steps,
                                                const std::vector<tr::RankTrace>& traces,
                                                const std::vector<tr::RankAnalysis>& analyses) {
  TP_ASSIGN_OR_RETURN(std::vector<store::NodeSeries> series, reader.ListSeries());
  TP_ASSIGN_OR_RETURN(auto annotations, reader.Annotations());
  std::map<std::string, const model::NodeInfo*> infos;
  for (const model::NodeInfo* n : reader.node_infos()) infos[n->node] = n;
  std::map<std::string, std::set<std::string>> gpu_devices;
  for (const store::NodeSeries& s : series) {
    if (s.series.metric.rfind("gpu_", 0) == 0) gpu_devices[s.node].insert(s.series.device);
  }
  // Settings the instrumentation annotates, per node (the latest value wins).
  std::map<std::string, int64_t> threads, workers;
  for (const auto& [node, a] : annotations) {
    if (a.key == "torch.num_threads") {
      if (auto v = ParseInt(a.value)) threads[node] = *v;
    } else if (a.key.rfind("dataloader.", 0) == 0) {
      auto j = json::parse(a.value, nullptr, false);
      if (j.is_object() && j.contains("num_workers") && j["num_workers"].is_number_integer()) {
        workers[node] = std::max(workers[node], j["num_workers"].get<int64_t>());
      }
    }
  }
  // Each rank's operator mix reads its whole trace: on the worker threads, kept in rank order.
  std::vector<OperatorMix> mixes(std::min(traces.size(), analyses.size()));
  ParallelFor(mixes.size(), [&](size_t r) { mixes[r] = MeasureOperators(traces[r], analyses[r]); });
  std::vector<RankSummary> out;
  for (size_t r = 0; r < traces.size() && r < analyses.size(); ++r) {
    const tr::RankTrace& t = traces[r];
    const tr::RankAnalysis& a = analyses[r];
    RankSummary s;
    s.label = a.label;
    MachineFacts& m = s.machine;
    m.node = t.node;
    if (auto it = infos.find(t.node); it != infos.end()) {
      m.cpu_cores = it->second->cpu_cores;
      m.cpu_model = it->second->cpu_model;
      m.gpus_listed = static_cast<int>(it->second->gpus.size());
    }
    m.gpu_devices_sampled = static_cast<int>(gpu_devices[t.node].size());
    m.gpu_activity = a.gpu_activities > 0;
    if (auto it = threads.find(t.node); it != threads.end()) m.torch_threads = it->second;
    if (auto it = workers.find(t.node); it != workers.end()) m.loader_workers = it->second;

    const std::vector<size_t> rows = RankStepRows(steps, t);
    s.steps_total =
        rows.empty() ? static_cast<int64_t>(a.steps.size()) : static_cast<int64_t>(rows.size());
    PhaseAverage p = AveragePhases(steps, rows);
    if (p.steps > 0) s.phase_average = p;
    s.operator_average = AverageTracedSteps(a, &s.steps_with_operators);
    s.mix = std::move(mixes[r]);
    if (!rows.empty()) {
      // CPU utilisation of the node while this rank trained.
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (size_t i : rows) {
        lo = std::min(lo, steps.start_ns[i]);
        hi = std::max(hi, steps.start_ns[i] + steps.duration_ns[i]);
      }
      store::MetricQuery q;
      q.start_ns = lo;
      q.end_ns = hi + 1;
      q.metrics = {"cpu_utilization_ratio"};
      q.devices = {"total"};
      q.nodes = {t.node};
      TP_ASSIGN_OR_RETURN(store::MetricTable cpu, reader.SystemMetrics(q));
      if (cpu.size() > 0) {
        double sum = 0;
        for (double v : cpu.value) sum += v;
        m.cpu_utilization_mean = sum / static_cast<double>(cpu.size());
      }
    }
    s.advice = Advise(s, a);
    out.push_back(std::move(s));
  }
  return out;
}

void ApplyToAnalyses(const std::vector<RankSummary>& summaries,
                     std::vector<tr::RankAnalysis>* analyses) {
  for (size_t i = 0; i < summaries.size() && i < analyses->size(); ++i) {
    tr::RankAnalysis& a = (*analyses)[i];
    a.step_average = summaries[i].operator_average;
    a.recommendations.clear();
    for (const Advice& x : summaries[i].advice) a.recommendations.push_back(x.text);
  }
}

void AddSummaryJson(const RankSummary& s, json* rank) {
  json& r = *rank;
  {
    r["steps_total"] = s.steps_total;
    r["steps_with_operators"] = s.steps_with_operators;
    if (s.phase_average) {
      const PhaseAverage& p = *s.phase_average;
      auto us = [](int64_t ns) { return static_cast<double>(ns) / 1000.0; };
      r["phase_average"] = {{"steps", p.steps},
                            {"step_us", us(p.step_ns)},
                            {"data_wait_us", us(p.data_wait_ns)},
                            {"forward_us", us(p.forward_ns)},
                            {"backward_us", us(p.backward_ns)},
                            {"optimizer_us", us(p.optimizer_ns)},
                            {"other_us", us(p.other_ns)}};
    } else {
      r["phase_average"] = nullptr;
    }
    const MachineFacts& m = s.machine;
    r["machine"] = {{"node", m.node},
                    {"cpu_cores", Opt(m.cpu_cores)},
                    {"gpus_listed", m.gpus_listed},
                    {"gpu_devices_sampled", m.gpu_devices_sampled},
                    {"gpu_activity", m.gpu_activity},
                    {"has_gpu", m.HasGpu()},
                    {"cpu_utilization_mean", Opt(m.cpu_utilization_mean)},
                    {"torch_threads", Opt(m.torch_threads)},
                    {"num_workers", Opt(m.loader_workers)}};
    json adv = json::array();
    for (const Advice& x : s.advice) {
      adv.push_back({{"id", x.id}, {"text", x.text}, {"evidence", x.evidence}});
    }
    r["advice"] = adv;
  }
}

std::string MergeIntoJson(const std::string& analysis_json,
                          const std::vector<RankSummary>& summaries) {
  json doc = json::parse(analysis_json, nullptr, false);
  if (!doc.is_object() || !doc.contains("ranks") || !doc["ranks"].is_array()) {
    return analysis_json;
  }
  json& ranks = doc["ranks"];
  for (size_t i = 0; i < summaries.size() && i < ranks.size(); ++i) {
    AddSummaryJson(summaries[i], &ranks[i]);
  }
  return DumpJson(doc, 2);
}

std::string SummaryText(const RankSummary& s) {
  std::string out = "steps: " + std::to_string(s.steps_total) + " recorded, " +
                    std::to_string(s.steps_with_operators) +
                    " with an operator trace (the avg step above is over those)\n";
  if (s.phase_average) {
    const PhaseAverage& p = *s.phase_average;
    out += "instrumented parts, mean of " + std::to_string(p.steps) + " steps (ms): step " +
           Fixed(Ms(p.step_ns), 3) + ", data_wait " + Fixed(Ms(p.data_wait_ns), 3) + ", forward " +
           Fixed(Ms(p.forward_ns), 3) + ", backward " + Fixed(Ms(p.backward_ns), 3) +
           ", optimizer " + Fixed(Ms(p.optimizer_ns), 3) + ", other " + Fixed(Ms(p.other_ns), 3) +
           "\n";
  }
  const MachineFacts& m = s.machine;
  out += "machine: " +
         (m.cpu_cores ? std::to_string(*m.cpu_cores) + " CPU cores" : std::string("cores n/a")) +
         ", " + (m.HasGpu() ? "GPU present" : std::string("no GPU")) + "\n";
  return out;
}

}  // namespace trainprof::analyze::advice
