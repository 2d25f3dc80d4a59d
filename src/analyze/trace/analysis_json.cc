#include "analyze/trace/analysis_json.h"

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/check.h"
#include "base/json_dump.h"
#include "base/parallel.h"

namespace trainprof::analyze::trace {
namespace {

using nlohmann::json;

double Us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }
double Us(double ns) { return ns / 1000.0; }

json Totals(const std::vector<NameTotal>& v) {
  json a = json::array();
  for (const NameTotal& x : v) {
    json j = {{"name", x.name},
              {"count", x.count},
              {"total_us", Us(x.total_ns)},
              {"mean_us", Us(x.mean_ns)},
              {"max_us", Us(x.max_ns)}};
    if (!x.type.empty()) j["type"] = x.type;
    a.push_back(j);
  }
  return a;
}

json Step(const StepBreakdown& b) {
  json j = {{"step_us", Us(b.step_ns)},
            {"kernel_us", Us(b.kernel_ns)},
            {"memcpy_us", Us(b.memcpy_ns)},
            {"memset_us", Us(b.memset_ns)},
            {"communication_us", Us(b.communication_ns)},
            {"runtime_us", Us(b.runtime_ns)},
            {"dataloader_us", Us(b.dataloader_ns)},
            {"cpu_exec_us", Us(b.cpu_exec_ns)},
            {"other_us", Us(b.other_ns)}};
  if (b.step >= 0) {
    j["step"] = b.step;
    j["start_ns"] = b.start_ns;
  }
  return j;
}

json RankToJson(const RankAnalysis& r) {
  json j;
  j["rank"] = r.rank >= 0 ? json(r.rank) : json(nullptr);
  j["label"] = r.label;
  j["node"] = r.node;
  j["gpu_activities"] = r.gpu_activities;
  j["cpu_spans"] = r.cpu_spans;
  if (r.temporal) {
    const Temporal& t = *r.temporal;
    j["temporal"] = {{"idle_us", Us(t.idle_ns)},
                     {"compute_us", Us(t.compute_ns)},
                     {"non_compute_us", Us(t.non_compute_ns)},
                     {"kernel_us", Us(t.kernel_ns)},
                     {"idle_pct", t.idle_pct},
                     {"compute_pct", t.compute_pct},
                     {"non_compute_pct", t.non_compute_pct}};
  } else {
    j["temporal"] = nullptr;
    if (!r.temporal_note.empty()) j["temporal_note"] = r.temporal_note;
  }
  json kt = json::array();
  for (const auto& k : r.kernel_types) {
    kt.push_back({{"type", k.type}, {"time_us", Us(k.time_ns)}, {"pct", k.pct}});
  }
  j["kernel_types"] = kt;
  json idle = json::array();
  for (const auto& e : r.idle) {
    idle.push_back({{"device", e.device},
                    {"stream", e.stream},
                    {"category", e.category},
                    {"time_us", Us(e.time_ns)},
                    {"ratio", e.ratio},
                    {"gaps", e.gaps}});
  }
  j["idle"] = idle;
  j["comm_comp_overlap_pct"] =
      r.comm_comp_overlap_pct ? json(*r.comm_comp_overlap_pct) : json(nullptr);
  const LaunchStats& l = r.launch;
  j["kernel_launch_stats"] = {{"kernels", l.kernels},
                              {"correlated", l.correlated},
                              {"launch_delay_p50_us", Us(l.launch_delay_p50_ns)},
                              {"launch_delay_p90_us", Us(l.launch_delay_p90_ns)},
                              {"launch_delay_max_us", Us(l.launch_delay_max_ns)},
                              {"short_kernels", l.short_kernels},
                              {"runtime_outliers", l.runtime_outliers},
                              {"launch_delay_outliers", l.launch_delay_outliers}};
  j["top_kernels"] = Totals(r.top_kernels);
  j["top_cpu_ops"] = Totals(r.top_cpu_ops);
  json steps = json::array();
  for (const auto& s : r.steps) steps.push_back(Step(s));
  j["steps"] = steps;
  j["step_average"] = r.step_average ? Step(*r.step_average) : json(nullptr);
  j["recommendations"] = r.recommendations;
  return j;
}

// The ranks array as nlohmann prints it as the value of a top-level key with indent 2: each
// rank dumped on its own (in parallel) and indented by four more spaces. A raw newline never
// occurs inside a printed string (it is escaped), so every newline is the printer's own.
std::string RanksText(const std::vector<RankAnalysis>& ranks, const RankJsonExtra& extra) {
  if (ranks.empty()) return "[]";
  std::vector<std::string> texts(ranks.size());
  ParallelFor(ranks.size(), [&](size_t i) {
    json j = RankToJson(ranks[i]);
    if (extra) extra(i, &j);
    const std::string dumped = DumpJson(j, 2);
    std::string& t = texts[i];
    t.reserve(dumped.size() + dumped.size() / 8);
    for (char c : dumped) {
      t.push_back(c);
      if (c == '\n') t.append(4, ' ');
    }
  });
  size_t size = 8;
  for (const std::string& t : texts) size += t.size() + 6;
  std::string out;
  out.reserve(size);
  out += "[\n";
  for (size_t i = 0; i < texts.size(); ++i) {
    out += "    ";
    out += texts[i];
    out += i + 1 < texts.size() ? ",\n" : "\n";
  }
  out += "  ]";
  return out;
}

}  // namespace

std::string AnalysisToJson(const std::vector<RankAnalysis>& ranks,
                           const std::vector<Straggler>& stragglers,
                           const std::vector<DiffEntry>* diff,
                           const std::vector<KernelTypeTime>* all_kernel_types,
                           const RankJsonExtra& extra) {
  json doc;
  // A placeholder, replaced by the ranks printed in parallel (RanksText).
  doc["ranks"] = nullptr;
  if (all_kernel_types != nullptr) {
    json kt = json::array();
    for (const auto& k : *all_kernel_types) {
      kt.push_back({{"type", k.type}, {"time_us", Us(k.time_ns)}, {"pct", k.pct}});
    }
    doc["kernel_types"] = kt;  // over all ranks (HTA's kernel breakdown)
  }
  json st = json::array();
  for (const auto& s : stragglers) {
    st.push_back({{"rank", s.label},
                  {"metric", s.metric},
                  {"value_us", Us(s.value)},
                  {"median_us", Us(s.median)},
                  {"excess_pct", s.excess_pct}});
  }
  doc["stragglers"] = st;
  if (diff != nullptr) {
    json d = json::array();
    for (const auto& e : *diff) {
      d.push_back({{"name", e.name},
                   {"kind", e.kind},
                   {"base_us", Us(e.base_ns)},
                   {"test_us", Us(e.test_ns)},
                   {"delta_us", Us(e.delta_ns)},
                   {"base_count", e.base_count},
                   {"test_count", e.test_count}});
    }
    doc["diff"] = d;
  }
  std::string text = DumpJson(doc, 2);
  // Keys are printed sorted, each top-level one after a newline and two spaces; inside strings
  // quotes are escaped, so this finds the placeholder and nothing else.
  static constexpr std::string_view kPlaceholder = "\n  \"ranks\": null";
  const size_t at = text.find(kPlaceholder);
  TP_CHECK(at != std::string::npos);
  const size_t value_at = at + kPlaceholder.size() - 4;
  text.replace(value_at, 4, RanksText(ranks, extra));
  return text;
}

}  // namespace trainprof::analyze::trace
