#include "analyze/trace/hta_compat.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "analyze/trace/intervals.h"
#include "analyze/trace/rank_trace.h"
#include "model/event.h"

namespace trainprof::analyze::trace {
namespace {

constexpr int32_t kMaxCopies = 1024;

// numpy's round(x, digits): rint(x * 10^digits) / 10^digits (ties to even).
double NpRound(double v, int digits) {
  double f = std::pow(10.0, digits);
  return std::nearbyint(v * f) / f;
}

// Python's re.match with `.*` stops at a newline: HTA's patterns see the first line only.
std::string_view FirstLine(const std::string& s) {
  size_t nl = s.find('\n');
  return nl == std::string::npos ? std::string_view(s) : std::string_view(s).substr(0, nl);
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// The double nearest to ns / 1000, as Python's float() of the decimal µs text gives it (the
// long double quotient is exact to 64 bits before the rounding to 53).
double MicrosAsDouble(int64_t ns) {
  return static_cast<double>(static_cast<long double>(ns) / 1000.0L);
}

// HTA's merge_kernel_intervals: sort by start; a row joins the group while its start is not
// after the largest end seen so far; a group is (min start, max end). Returns the groups.
Intervals HtaMerge(std::vector<Interval> v) {
  std::stable_sort(v.begin(), v.end(),
                   [](const Interval& a, const Interval& b) { return a.first < b.first; });
  Intervals out;
  int64_t cummax = INT64_MIN;
  for (const Interval& x : v) {
    if (out.empty() || x.first > cummax) {
      out.push_back(x);
    } else {
      out.back().first = std::min(out.back().first, x.first);
      out.back().second = std::max(out.back().second, x.second);
    }
    cummax = std::max(cummax, x.second);
  }
  return out;
}

int64_t Sum(const Intervals& groups) {
  int64_t total = 0;
  for (const Interval& x : groups) total += x.second - x.first;
  return total;
}

// HTA's _get_gpu_kernel_type_time: a sweep over the merged intervals of each analysed type
// (bit 1 COMPUTATION, 2 COMMUNICATION, 4 MEMORY); µs per running set of types.
std::map<int, int64_t> TypeSweep(const Intervals (&merged)[3]) {
  std::vector<std::pair<int64_t, int>> edges;
  for (int k = 0; k < 3; ++k) {
    for (const Interval& x : merged[k]) {
      edges.emplace_back(x.first, 1 << k);
      edges.emplace_back(x.second, -(1 << k));
    }
  }
  std::stable_sort(edges.begin(), edges.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::map<int, int64_t> by_mask;
  int running = 0;
  for (size_t i = 0; i + 1 < edges.size(); ++i) {
    running += edges[i].second;
    if (running > 0) by_mask[running] += edges[i + 1].first - edges[i].first;
  }
  return by_mask;
}

std::string MaskLabel(int mask) {
  static const char* kNames[3] = {"COMPUTATION", "COMMUNICATION", "MEMORY"};
  std::string label;
  for (int k = 0; k < 3; ++k) {
    if ((mask & (1 << k)) == 0) continue;
    if (!label.empty()) label += " overlapping ";
    label += kNames[k];
  }
  return label;
}

int TypeBit(HtaKernelType t) {
  switch (t) {
    case HtaKernelType::kComputation:
      return 0;
    case HtaKernelType::kCommunication:
      return 1;
    case HtaKernelType::kMemory:
      return 2;
    case HtaKernelType::kOther:
      break;
  }
  return -1;
}

}  // namespace

Interval HtaMicros(int64_t start_ns, int64_t duration_ns, int64_t base_ns) {
  // pandas: ts = ceil(ts); end = floor(ts + dur), both on the float64 values.
  double ts = MicrosAsDouble(start_ns - base_ns);
  double end = ts + MicrosAsDouble(duration_ns);
  int64_t base_us = base_ns / 1000;
  return {static_cast<int64_t>(std::ceil(ts)) + base_us,
          static_cast<int64_t>(std::floor(end)) + base_us};
}

HtaKernelType HtaClassify(const std::string& full) {
  std::string_view name = FirstLine(full);
  // ^nccl.*Kernel
  bool comm = StartsWith(name, "nccl") && name.find("Kernel", 4) != std::string_view::npos;
  if (comm) return HtaKernelType::kCommunication;
  // (^Memcpy)|(^Memset)|(^dma)
  if (StartsWith(name, "Memcpy") || StartsWith(name, "Memset") || StartsWith(name, "dma")) {
    return HtaKernelType::kMemory;
  }
  // not (^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync): the alternation makes the middle
  // part ".*Memcpy" or "^Memset".
  if (name.find("Memcpy") != std::string_view::npos || StartsWith(name, "Memset") ||
      name.find("Sync") != std::string_view::npos) {
    return HtaKernelType::kOther;
  }
  return HtaKernelType::kComputation;
}

std::vector<HtaRankTrace> BuildHtaTraces(const store::EventTable& t, const NodeMetaMap& node_meta) {
  // Codes of the names that HTA treats specially.
  int32_t n_event_sync = -1, n_context_sync = -1;
  for (size_t i = 0; i < t.names.values().size(); ++i) {
    const std::string& n = t.names.at(static_cast<int32_t>(i));
    if (n == "Event Sync") n_event_sync = static_cast<int32_t>(i);
    if (n == "Context Sync") n_context_sync = static_cast<int32_t>(i);
  }
  std::vector<char> step_name(t.names.values().size(), 0);
  for (size_t i = 0; i < t.names.values().size(); ++i) {
    step_name[i] = t.names.values()[i].find("ProfilerStep") != std::string::npos;
  }
  std::vector<char> skip_cat(t.categories.values().size(), 0);
  for (size_t i = 0; i < t.categories.values().size(); ++i) {
    const std::string& c = t.categories.at(static_cast<int32_t>(i));
    skip_cat[i] = c.empty() || c == "Trace" || c == model::kCategoryStep;
  }

  std::map<std::pair<int64_t, std::string>, HtaRankTrace> by_key;
  // (rank, node code) -> its trace: no node string per event.
  std::map<std::pair<int64_t, int32_t>, HtaRankTrace*> by_code;
  std::map<std::pair<int64_t, int32_t>, int64_t> rows_of;  // for one allocation per rank
  for (size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] != static_cast<uint8_t>(model::EventKind::kSpan)) continue;
    int64_t rank = t.rank[i] == model::kMissing ? -1 : t.rank[i];
    ++rows_of[{rank, rank >= 0 ? -1 : t.node[i]}];
  }
  std::unordered_set<int32_t> step_symbols;  // HTA's global symbol table: "ProfilerStep" in name
  for (size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] != static_cast<uint8_t>(model::EventKind::kSpan)) continue;
    if (skip_cat[static_cast<size_t>(t.category[i])]) continue;
    int64_t rank = t.rank[i] == model::kMissing ? -1 : t.rank[i];
    HtaRankTrace*& slot = by_code[{rank, rank >= 0 ? -1 : t.node[i]}];
    if (slot == nullptr) {
      const std::string& node = t.nodes.at(t.node[i]);
      slot = &by_key[std::make_pair(rank, rank >= 0 ? std::string() : node)];
      slot->rows.reserve(static_cast<size_t>(rows_of[{rank, rank >= 0 ? -1 : t.node[i]}]));
    }
    HtaRankTrace& r = *slot;
    const std::string& node = t.nodes.at(t.node[i]);
    if (r.label.empty()) {
      r.rank = rank;
      r.label = rank >= 0 ? std::to_string(rank) : node;
      auto m = node_meta.find(node);
      if (m != node_meta.end()) {
        std::string k = "kineto.";
        if (rank >= 0) k += "rank" + std::to_string(rank) + ".";
        k += "base_time_ns";
        auto b = m->second.find(k);
        if (b != m->second.end()) r.base_ns = std::strtoll(b->second.c_str(), nullptr, 10);
      }
    }
    HtaRow row;
    Interval us = HtaMicros(t.start_ns[i], t.duration_ns[i], r.base_ns);
    row.ts_us = us.first;
    row.end_us = us.second;
    row.stream = ArgInt(t.args[i], "\"stream\"");
    row.correlation = ArgInt(t.args[i], "\"correlation\"");
    row.device = t.pid[i] == model::kMissing ? -1 : t.pid[i];
    row.name = t.name[i];
    row.category = t.category[i];
    row.gpu = (row.stream >= 0 && row.correlation >= 0) || row.name == n_event_sync ||
              row.name == n_context_sync;
    if (step_name[static_cast<size_t>(row.name)]) step_symbols.insert(row.name);
    r.rows.push_back(row);
  }

  std::vector<HtaRankTrace> out;
  for (auto& [key, r] : by_key) {
    // The correlation join (transform_correlation_to_index): a GPU row's launch is the CPU row
    // with its correlation id (the latest one when several share it).
    std::unordered_map<int64_t, int64_t> cpu_ts_by_corr;
    for (const HtaRow& row : r.rows) {
      if (row.gpu || row.correlation == -1) continue;
      auto [it, fresh] = cpu_ts_by_corr.emplace(row.correlation, row.ts_us);
      if (!fresh) it->second = std::max(it->second, row.ts_us);
    }
    for (HtaRow& row : r.rows) {
      if (!row.gpu || row.correlation == -1) continue;
      auto it = cpu_ts_by_corr.find(row.correlation);
      if (it != cpu_ts_by_corr.end()) row.runtime_ts_us = it->second;
    }
    // _filter_irrelevant_gpu_kernels: with more than one ProfilerStep symbol, keep the CPU rows
    // that start before the last step starts and the GPU rows whose correlation id one of them
    // carries (once per such CPU row, as pandas' inner merge does).
    if (step_symbols.size() > 1) {
      int64_t last_start = INT64_MIN;
      bool any = false;
      for (const HtaRow& row : r.rows) {
        if (!row.gpu && step_symbols.count(row.name) != 0) {
          last_start = any ? std::max(last_start, row.ts_us) : row.ts_us;
          any = true;
        }
      }
      std::vector<HtaRow> kept;
      std::unordered_map<int64_t, int32_t> cpu_per_corr;
      for (const HtaRow& row : r.rows) {
        if (row.gpu || !any || row.ts_us >= last_start) continue;
        kept.push_back(row);
        ++cpu_per_corr[row.correlation];
      }
      for (const HtaRow& row : r.rows) {
        if (!row.gpu) continue;
        auto it = cpu_per_corr.find(row.correlation);
        if (it == cpu_per_corr.end()) continue;
        HtaRow g = row;
        // Bounded: only a pathological trace has one id on more CPU rows.
        g.copies = std::min(it->second, kMaxCopies);
        // The launch joins only when it was kept (HTA joins on the filtered frame).
        if (row.correlation == -1) g.runtime_ts_us = INT64_MIN;
        kept.push_back(g);
      }
      r.rows = std::move(kept);
    }
    out.push_back(std::move(r));
  }
  return out;
}

HtaResult AnalyzeHta(const std::vector<HtaRankTrace>& traces, const store::EventTable& t,
                     int64_t threshold_us) {
  HtaResult res;
  std::map<int, int64_t> all_masks;
  std::vector<char> kernel_cat(t.categories.values().size());
  for (size_t i = 0; i < kernel_cat.size(); ++i) {
    const std::string& c = t.categories.values()[i];
    kernel_cat[i] = c == "kernel" || c == "gpu_memcpy" || c == "gpu_memset" ||
                    c == "mtia_ccp_events" || c == "Kernel" || c == "Memcpy" || c == "Memset";
  }
  std::vector<int> type_bit(t.names.values().size());
  for (size_t i = 0; i < type_bit.size(); ++i) {
    type_bit[i] = TypeBit(HtaClassify(t.names.values()[i]));
  }
  for (const HtaRankTrace& r : traces) {
    RankAnalysis a;
    a.rank = r.rank;
    a.label = r.label;
    // Rows with a stream (stream != -1) are HTA's "GPU kernels" of the temporal and kernel
    // breakdowns and of the overlap.
    std::vector<Interval> all;
    std::vector<Interval> by_type[3];
    for (const HtaRow& row : r.rows) {
      if (row.stream == -1) continue;
      Interval x{row.ts_us, row.end_us};
      all.push_back(x);
      int bit = type_bit[static_cast<size_t>(row.name)];
      if (bit >= 0) by_type[bit].push_back(x);
    }
    a.gpu_activities = static_cast<int64_t>(all.size());
    Intervals merged[3];
    for (int k = 0; k < 3; ++k) merged[k] = HtaMerge(by_type[k]);
    if (!all.empty()) {
      Intervals groups = HtaMerge(std::move(all));
      Temporal tb;
      int64_t kernel_us = groups.back().second - groups.front().first;
      int64_t idle_us = kernel_us - Sum(groups);
      int64_t compute_us = Sum(merged[0]);
      int64_t non_compute_us = kernel_us - compute_us - idle_us;
      if (kernel_us <= 0 || idle_us < 0 || non_compute_us < 0) {
        // HTA's whole-microsecond intervals can end before they start (a kernel of under a
        // microsecond whose end rounds down past its start): its breakdown has negative parts
        // then, and HTA 0.5.0 stops on an assertion. No figures rather than impossible ones.
        a.temporal_note =
            "HTA's temporal breakdown is undefined for this trace: in whole "
            "microseconds its GPU activity spans " +
            std::to_string(kernel_us) + " us (HTA 0.5.0 fails on it); without " +
            "--hta-compat the breakdown is computed in nanoseconds";
        compute_us = idle_us = non_compute_us = kernel_us = -1;
      }
      tb.kernel_ns = kernel_us * 1000;
      tb.idle_ns = idle_us * 1000;
      tb.compute_ns = compute_us * 1000;
      tb.non_compute_ns = non_compute_us * 1000;
      auto pct = [&](int64_t part) {
        double ratio = static_cast<double>(part) / static_cast<double>(kernel_us);
        return NpRound(100.0 * ratio, 2);
      };
      tb.idle_pct = pct(idle_us);
      tb.compute_pct = pct(compute_us);
      tb.non_compute_pct = pct(non_compute_us);
      if (a.temporal_note.empty()) a.temporal = tb;

      std::map<int, int64_t> masks = TypeSweep(merged);
      int64_t total = 0;
      for (const auto& [m, us] : masks) total += us;
      for (const auto& [m, us] : masks) {
        a.kernel_types.push_back(
            {MaskLabel(m), us * 1000,
             total > 0 ? NpRound(static_cast<double>(us) / static_cast<double>(total) * 100.0, 1)
                       : 0.0});
        all_masks[m] += us;
      }
      std::stable_sort(
          a.kernel_types.begin(), a.kernel_types.end(),
          [](const KernelTypeTime& x, const KernelTypeTime& y) { return x.time_ns > y.time_ns; });

      // get_comm_comp_overlap: time both run / communication time.
      if (!merged[1].empty()) {
        Intervals two[3] = {merged[0], merged[1], {}};
        std::map<int, int64_t> m2 = TypeSweep(two);
        int64_t comm_us = Sum(merged[1]);
        if (comm_us != 0) {
          a.comm_comp_overlap_pct =
              NpRound(100.0 * (static_cast<double>(m2[3]) / static_cast<double>(comm_us)), 2);
        }
      }
    }

    // get_idle_time_breakdown: kernels, memcpy and memset (not syncs) per stream, in start
    // order; the gap to the previous row's end is host_wait when the row's launch started after
    // that end, else kernel_wait below the threshold, else other.
    std::vector<int64_t> stream_order;
    std::map<int64_t, std::vector<const HtaRow*>> streams;
    std::map<int64_t, std::unordered_set<int64_t>> devices;
    for (const HtaRow& row : r.rows) {
      if (row.stream == -1 || !kernel_cat[static_cast<size_t>(row.category)]) continue;
      auto [it, fresh] = streams.try_emplace(row.stream);
      if (fresh) stream_order.push_back(row.stream);
      for (int32_t c = 0; c < row.copies; ++c) it->second.push_back(&row);
      devices[row.stream].insert(row.device);
    }
    for (int64_t s : stream_order) {
      std::vector<const HtaRow*>& rows = streams[s];
      std::stable_sort(rows.begin(), rows.end(),
                       [](const HtaRow* x, const HtaRow* y) { return x->ts_us < y->ts_us; });
      int64_t cat_us[3] = {0, 0, 0};  // host_wait, kernel_wait, other
      int64_t cat_rows[3] = {0, 0, 1};
      int64_t cat_gaps[3] = {0, 0, 0};
      for (size_t i = 1; i < rows.size(); ++i) {
        int64_t prev_end = rows[i - 1]->end_us;
        int64_t gap = rows[i]->ts_us - prev_end;
        int c = 2;
        if (rows[i]->runtime_ts_us != INT64_MIN && rows[i]->runtime_ts_us > prev_end) {
          c = 0;
        } else if (gap < threshold_us) {
          c = 1;
        }
        cat_us[c] += gap;
        ++cat_rows[c];
        if (gap > 0) ++cat_gaps[c];
      }
      int64_t total = cat_us[0] + cat_us[1] + cat_us[2];
      static const char* kNames[3] = {"host_wait", "kernel_wait", "other"};
      for (int c = 0; c < 3; ++c) {
        if (cat_rows[c] == 0) continue;  // HTA lists the categories that occur
        IdleEntry e;
        e.device = devices[s].size() == 1 ? *devices[s].begin() : -1;
        e.stream = s;
        e.category = kNames[c];
        e.time_ns = cat_us[c] * 1000;
        e.gaps = cat_gaps[c];
        e.ratio = total != 0
                      ? NpRound(static_cast<double>(cat_us[c]) / static_cast<double>(total), 2)
                      : 0.0;
        a.idle.push_back(e);
      }
    }
    res.ranks.push_back(std::move(a));
  }
  int64_t total = 0;
  for (const auto& [m, us] : all_masks) total += us;
  for (const auto& [m, us] : all_masks) {
    res.kernel_types.push_back(
        {MaskLabel(m), us * 1000,
         total > 0 ? NpRound(static_cast<double>(us) / static_cast<double>(total) * 100.0, 1)
                   : 0.0});
  }
  std::stable_sort(
      res.kernel_types.begin(), res.kernel_types.end(),
      [](const KernelTypeTime& x, const KernelTypeTime& y) { return x.time_ns > y.time_ns; });
  return res;
}

void ApplyHta(const HtaResult& hta, std::vector<RankAnalysis>* ranks) {
  for (RankAnalysis& r : *ranks) {
    for (const RankAnalysis& h : hta.ranks) {
      if (h.label != r.label) continue;
      r.temporal = h.temporal;
      r.temporal_note = h.temporal_note;
      r.kernel_types = h.kernel_types;
      r.idle = h.idle;
      r.comm_comp_overlap_pct = h.comm_comp_overlap_pct;
      r.gpu_activities = h.gpu_activities;
    }
  }
}

}  // namespace trainprof::analyze::trace
