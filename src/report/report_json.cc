#include "report/report_json.h"

#include "base/json_dump.h"
#include "base/time.h"

namespace trainprof::report {
namespace {

using nlohmann::json;

template <typename T>
json Opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json StatsJson(const Stats& s) {
  return {{"count", s.count},  {"min", Opt(s.min)}, {"p50", Opt(s.p50)},  {"p95", Opt(s.p95)},
          {"p99", Opt(s.p99)}, {"max", Opt(s.max)}, {"mean", Opt(s.mean)}};
}

json HistogramJson(const Histogram& h) { return {{"edges", h.edges}, {"counts", h.counts}}; }

json PartsJson(const std::vector<PartShare>& parts) {
  json a = json::array();
  for (const auto& p : parts)
    a.push_back({{"part", p.part}, {"total_ns", p.total_ns}, {"share", Opt(p.share)}});
  return a;
}

json OperatorsJson(const std::vector<OperatorRow>& rows) {
  json a = json::array();
  for (const auto& r : rows) {
    a.push_back({{"name", r.name},
                 {"category", r.category},
                 {"count", r.count},
                 {"total_ns", r.total_ns},
                 {"mean_ns", r.mean_ns},
                 {"share", Opt(r.share)}});
  }
  return a;
}

json PythonRowsJson(const std::vector<PythonFunctionRow>& rows) {
  json a = json::array();
  for (const auto& r : rows) {
    json callers = json::array();
    for (const auto& c : r.callers) {
      callers.push_back({{"function", c.function},
                         {"file", c.file},
                         {"line", c.line},
                         {"calls", c.calls},
                         {"primitive_calls", c.primitive_calls},
                         {"total_ns", c.total_ns},
                         {"cumulative_ns", c.cumulative_ns}});
    }
    a.push_back({{"function", r.function},
                 {"file", r.file},
                 {"line", r.line},
                 {"calls", r.calls},
                 {"primitive_calls", r.primitive_calls},
                 {"total_ns", r.total_ns},
                 {"cumulative_ns", r.cumulative_ns},
                 {"total_per_call_ns", Opt(r.total_per_call_ns)},
                 {"cumulative_per_call_ns", Opt(r.cumulative_per_call_ns)},
                 {"caller_count", Opt(r.caller_count)},
                 {"callers", callers}});
  }
  return a;
}

json PythonJson(const PythonFunctions& p) {
  json profiles = json::array();
  for (const auto& pr : p.profiles) {
    profiles.push_back({{"node", pr.node},
                        {"pid", Opt(pr.pid)},
                        {"rank", Opt(pr.rank)},
                        {"steps", pr.steps.empty() ? json(nullptr) : json(pr.steps)},
                        {"end_ns", pr.end_ns},
                        {"functions", pr.functions},
                        {"by_total", PythonRowsJson(pr.by_total)},
                        {"by_cumulative", PythonRowsJson(pr.by_cumulative)}});
  }
  return {{"profile_count", p.profile_count},
          {"profiles", profiles},
          {"unreadable", p.unreadable},
          {"note", p.note}};
}

json FindingJson(const FindingView& v) {
  const auto& f = v.finding;
  // Evidence nested beyond kMaxEvidenceDepth (a hostile store) stays text: dump() recurses.
  constexpr int kMaxEvidenceDepth = 256;
  json evidence = JsonNestingExceeds(f.evidence_json, kMaxEvidenceDepth)
                      ? json(json::value_t::discarded)
                      : json::parse(f.evidence_json, nullptr, /*allow_exceptions=*/false);
  if (evidence.is_discarded()) evidence = f.evidence_json;  // keep unparseable text as a string
  return {{"rule", f.rule},
          {"severity", model::SeverityName(f.severity)},
          {"node", f.node},
          {"device", f.device},
          {"start_ns", f.start_ns},
          {"end_ns", f.end_ns},
          {"message", f.message},
          {"recommendation", f.recommendation},
          {"evidence", evidence},
          {"cost_usd", f.cost_usd ? json(*f.cost_usd) : json(nullptr)},
          {"cost_basis", f.cost_basis},
          {"chart",
           {{"metric", v.evidence_metric},
            {"device", v.evidence_device},
            {"series", BandToJson(v.evidence)}}}};
}

}  // namespace

json BandToJson(const Band& band) {
  return {{"ts_ns", band.ts_ns}, {"min", band.min}, {"mean", band.mean}, {"max", band.max}};
}

json ReportToJson(const Report& r) {
  json j;
  j["schema_version"] = r.schema_version;
  j["generator"] = r.generator;
  j["generated"] = FormatIso8601(r.generated_ns);
  j["run_dir"] = r.run_dir;

  const Summary& s = r.summary;
  json changes = json::array();
  for (const auto& c : s.top_changes) {
    changes.push_back({{"title", c.title}, {"detail", c.detail}, {"source", c.source}});
  }
  j["summary"] = {
      {"name", s.name},
      {"run_id", s.run_id},
      {"source", s.source},
      {"command", s.command},
      {"tags", s.tags},
      {"start_ns", s.start_ns},
      {"end_ns", Opt(s.end_ns)},
      {"duration_ns", Opt(s.duration_ns)},
      {"exit_status", Opt(s.exit_status)},
      {"instance_type", s.instance_type.empty() ? json(nullptr) : json(s.instance_type)},
      {"nodes", s.node_count},
      {"gpus", s.gpu_count},
      {"cpu_cores", Opt(s.cpu_cores)},
      {"gpu_utilization_mean", Opt(s.gpu_utilization_mean)},
      {"gpu_idle_share", Opt(s.gpu_idle_share)},
      {"gpu_idle_below", kGpuIdleBelow},
      {"verdict", s.verdict},
      {"top_changes", changes}};

  json phases = json::array();
  for (const auto& p : r.phases) {
    phases.push_back({{"name", p.name},
                      {"node", p.node},
                      {"start_ns", p.start_ns},
                      {"duration_ns", p.duration_ns},
                      {"share_of_run", Opt(p.share_of_run)}});
  }
  j["phases"] = phases;

  json nodes = json::array();
  for (const auto& n : r.nodes) {
    json metrics = json::array();
    for (const auto& m : n.metrics) {
      json devices = json::array();
      for (const auto& d : m.devices) {
        devices.push_back(
            {{"device", d.device}, {"stats", StatsJson(d.stats)}, {"series", BandToJson(d.band)}});
      }
      metrics.push_back({{"metric", m.metric}, {"unit", m.unit}, {"devices", devices}});
    }
    json cells = json::array();
    for (const auto& row : n.heatmap.cells) {
      json jr = json::array();
      for (const auto& c : row) jr.push_back(Opt(c));
      cells.push_back(jr);
    }
    nodes.push_back({{"node", n.node},
                     {"hostname", n.hostname},
                     {"cpu_model", n.cpu_model},
                     {"instance_type", n.instance_type},
                     {"cpu_cores", Opt(n.cpu_cores)},
                     {"memory_total_bytes", Opt(n.memory_total_bytes)},
                     {"gpus", n.gpu_names},
                     {"metrics", metrics},
                     {"heatmap",
                      {{"rows", n.heatmap.rows},
                       {"start_ns", n.heatmap.start_ns},
                       {"bucket_ns", n.heatmap.bucket_ns},
                       {"columns", n.heatmap.columns},
                       {"cells", cells}}}});
  }
  j["system"] = {{"nodes", nodes}};

  const TrainingLoop& t = r.training;
  json modes = json::array();
  for (const auto& m : t.modes) {
    json outliers = json::array();
    for (const auto& o : m.outliers) {
      outliers.push_back({{"node", o.node},
                          {"rank", Opt(o.rank)},
                          {"step", Opt(o.step)},
                          {"start_ns", o.start_ns},
                          {"duration_ns", o.duration_ns}});
    }
    modes.push_back({{"mode", m.mode},
                     {"count", m.count},
                     {"total_ns", m.total_ns},
                     {"duration_ms", StatsJson(m.duration_ms)},
                     {"histogram_ms", HistogramJson(m.histogram_ms)},
                     {"series_ms", BandToJson(m.series_ms)},
                     {"outlier_above_ms", Opt(m.outlier_above_ms)},
                     {"outlier_count", m.outlier_count},
                     {"outliers", outliers}});
  }
  json ranks = json::array();
  for (const auto& rk : t.ranks) {
    ranks.push_back({{"node", rk.node},
                     {"rank", Opt(rk.rank)},
                     {"mode", rk.mode},
                     {"duration_ms", StatsJson(rk.duration_ms)}});
  }
  j["training"] = {{"modes", modes},
                   {"train_eval_ratio", Opt(t.train_eval_ratio)},
                   {"parts", PartsJson(t.parts)},
                   {"ranks", ranks}};

  const Operators& o = r.operators;
  j["operators"] = {
      {"event_count", o.event_count},   {"cpu_total_ns", o.cpu_total_ns},
      {"gpu_total_ns", o.gpu_total_ns}, {"cpu", OperatorsJson(o.cpu)},
      {"gpu", OperatorsJson(o.gpu)},    {"gpu_breakdown", PartsJson(o.gpu_breakdown)}};
  j["python"] = PythonJson(r.python);

  const DataLoader& d = r.data_loader;
  json config = json::array();
  for (const auto& [k, v] : d.config) config.push_back({{"key", k}, {"value", v}});
  j["data_loader"] = {{"config", config},
                      {"steps_with_wait", d.steps_with_wait},
                      {"wait_ms", StatsJson(d.wait_ms)},
                      {"wait_histogram_ms", HistogramJson(d.wait_histogram_ms)},
                      {"wait_share", Opt(d.wait_share)},
                      {"workers", Opt(d.workers)},
                      {"cpu_cores", Opt(d.cpu_cores)},
                      {"assessment", d.assessment}};

  json rules = json::array();
  for (const auto& rule : r.rules.rules) {
    json findings = json::array();
    for (const auto& f : rule.findings) findings.push_back(FindingJson(f));
    json params = nullptr;
    if (!rule.parameters_json.empty()) {
      params = json::parse(rule.parameters_json, nullptr, false);
      if (params.is_discarded()) params = rule.parameters_json;
    }
    rules.push_back({{"name", rule.name},
                     {"triggered", rule.triggered},
                     {"violations", Opt(rule.violations)},
                     {"datapoints", Opt(rule.datapoints)},
                     {"parameters", params},
                     {"severity", rule.severity.empty() ? json(nullptr) : json(rule.severity)},
                     {"recommendation", rule.recommendation},
                     {"findings", findings}});
  }
  j["rules"] = {{"available", r.rules.available},
                {"source", r.rules.source},
                {"note", r.rules.note},
                {"rules", rules}};

  const CostSection& c = r.cost;
  json by_phase = json::array();
  for (const auto& [phase, usd] : c.cost_by_phase_usd)
    by_phase.push_back({{"phase", phase}, {"usd", usd}});
  json what_ifs = json::array();
  for (const auto& w : c.what_ifs) {
    what_ifs.push_back({{"description", w.description},
                        {"cost_usd", Opt(w.cost_usd)},
                        {"saving_usd", Opt(w.saving_usd)}});
  }
  j["cost"] = {{"available", c.available},
               {"note", c.note},
               {"instance_type", c.instance_type.empty() ? json(nullptr) : json(c.instance_type)},
               {"price_usd_per_hour", Opt(c.price_usd_per_hour)},
               {"price_date", c.price_date},
               {"price_source", c.price_source},
               {"by_phase", by_phase},
               {"total_usd", Opt(c.total_usd)},
               {"idle_accelerator_usd", Opt(c.idle_accelerator_usd)},
               {"cost_per_step_usd", Opt(c.cost_per_step_usd)},
               {"what_ifs", what_ifs}};

  json scaling_runs = json::array();
  for (const ScalingRow& row : r.scaling.rows) {
    scaling_runs.push_back({{"run", row.run},
                            {"name", row.name},
                            {"devices", row.devices},
                            {"steps_per_s", row.steps_per_s},
                            {"steps_per_s_per_device", row.steps_per_s_per_device},
                            {"speedup", row.speedup},
                            {"ideal_speedup", row.ideal_speedup},
                            {"efficiency", row.efficiency},
                            {"baseline", row.baseline},
                            {"this_run", row.this_run}});
  }
  j["scaling"] = {{"available", r.scaling.available},
                  {"note", r.scaling.note},
                  {"warmup_steps", r.scaling.warmup_steps},
                  {"runs", scaling_runs}};

  json counters = json::array();
  for (const auto& [name, value] : r.data_quality.counters) {
    counters.push_back({{"name", name}, {"value", Opt(value)}});
  }
  j["data_quality"] = {{"counters", counters},
                       {"problems", r.data_quality.problems},
                       {"absent_metrics", r.data_quality.absent_metrics}};
  return j;
}

}  // namespace trainprof::report
