// The report's verdict sections as HTML: rules with their findings and evidence, cost, scaling
// efficiency across runs, data quality (the page's other sections: report_html.cc).

#include "base/time.h"
#include "model/finding.h"
#include "report/html_page.h"

namespace trainprof::report::html {

void RenderRules(const Report& r, Page& p) {
  const RulesSection& rs = r.rules;
  p.Add("<section id=\"rules\"><h2>Rules</h2>");
  if (!rs.note.empty()) p.Note(rs.note);
  if (rs.rules.empty()) {
    p.Note(rs.available ? "No rule fired." : "n/a: rules were not evaluated.");
    p.Add("</section>");
    return;
  }
  p.Add("<table><thead>");
  p.Row(
      {"Rule", "Triggered", "Severity", "Violations", "Datapoints", "Parameters", "Recommendation"},
      true);
  p.Add("</thead><tbody>");
  for (const auto& rule : rs.rules) {
    p.Row({E(rule.name), rule.triggered ? "<strong class=\"bad\">yes</strong>" : "no",
           E(rule.severity.empty() ? "—" : rule.severity),
           rule.violations ? std::to_string(*rule.violations) : "n/a",
           rule.datapoints ? std::to_string(*rule.datapoints) : "n/a",
           "<code>" + E(rule.parameters_json.empty() ? "n/a" : rule.parameters_json) + "</code>",
           E(rule.recommendation)});
  }
  p.Add("</tbody></table>");
  for (const auto& rule : rs.rules) {
    if (!rule.triggered) continue;
    p.Add("<div class=\"rule\"><h3>" + E(rule.name) + "</h3>");
    for (const auto& f : rule.findings) {
      const auto& fd = f.finding;
      p.Add("<div class=\"finding\"><p><span class=\"sev sev-" +
            E(model::SeverityName(fd.severity)) + "\">" + E(model::SeverityName(fd.severity)) +
            "</span> ");
      p.Text(fd.message);
      p.Add("</p><p class=\"note\">");
      p.Text((fd.node.empty() ? "" : "node " + fd.node + " · ") +
             (fd.device.empty() ? "" : "device " + fd.device + " · ") + FormatIso8601(fd.start_ns) +
             " → " + FormatIso8601(fd.end_ns));
      const std::string cost = model::FormatCostImpact(fd);
      if (!cost.empty()) {
        p.Add("</p><p class=\"note\">Cost impact: ");
        p.Text(cost);
      }
      p.Add("</p><details><summary>Evidence</summary><pre>");
      p.Text(fd.evidence_json);
      p.Add("</pre></details>");
      if (f.evidence.size() > 0) {
        std::string unit = f.evidence_metric == "step_duration_ms" ? "ms" : "ratio";
        p.Add(p.charts.Add(
            {{"kind", "band"},
             {"unit", unit},
             {"series",
              json::array({BandSeries(
                  f.evidence_metric + (f.evidence_device.empty() ? "" : " " + f.evidence_device),
                  f.evidence)})},
             {"highlight",
              {static_cast<double>(fd.start_ns) / 1e9, static_cast<double>(fd.end_ns) / 1e9}}}));
      }
      p.Add("</div>");
    }
    p.Add("</div>");
  }
  p.Add("</section>");
}

void RenderCost(const Report& r, Page& p) {
  const CostSection& c = r.cost;
  p.Add("<section id=\"cost\"><h2>Cost</h2>");
  if (!c.available) {
    p.Note(c.note.empty() ? "Cost not available." : c.note);
    p.Add("</section>");
    return;
  }
  auto usd = [](std::optional<double> v) {
    return v ? StrFormat("$%.2f", *v) : std::string("n/a");
  };
  p.Add("<table class=\"facts\">");
  p.Row({"Instance type", E(c.instance_type.empty() ? "n/a" : c.instance_type)});
  p.Row({"Price per hour", usd(c.price_usd_per_hour) + " <span class=\"src\">(" +
                               E(c.price_source) + ", " + E(c.price_date) + ")</span>"});
  p.Row({"Total", usd(c.total_usd)});
  p.Row({"Idle accelerators", usd(c.idle_accelerator_usd)});
  p.Row({"Per step", c.cost_per_step_usd ? StrFormat("$%.5f", *c.cost_per_step_usd) : "n/a"});
  p.Add("</table>");
  if (!c.cost_by_phase_usd.empty()) {
    p.Add("<h3>By phase</h3><table><thead>");
    p.Row({"Phase", "Cost"}, true);
    p.Add("</thead><tbody>");
    for (const auto& [phase, v] : c.cost_by_phase_usd) p.Row({E(phase), usd(v)});
    p.Add("</tbody></table>");
  }
  if (!c.what_ifs.empty()) {
    p.Add("<h3>What if</h3><table><thead>");
    p.Row({"Change", "Cost", "Saving"}, true);
    p.Add("</thead><tbody>");
    for (const auto& w : c.what_ifs) p.Row({E(w.description), usd(w.cost_usd), usd(w.saving_usd)});
    p.Add("</tbody></table>");
  }
  if (!c.note.empty()) p.Note(c.note);
  p.Add("</section>");
}

void RenderScaling(const Report& r, Page& p) {
  const ScalingSection& sc = r.scaling;
  if (!sc.available) return;  // not asked for: no section, no link
  p.Add("<section id=\"scaling\"><h2>Scaling efficiency</h2><table><thead>");
  p.Row({"Run", "Devices", "Steps/s", "Steps/s per device", "Speedup", "Ideal", "Efficiency"},
        true);
  p.Add("</thead><tbody>");
  for (const ScalingRow& row : sc.rows) {
    std::string run = E(row.name.empty() ? row.run : row.name);
    if (row.this_run) run = "<strong>" + run + "</strong> (this run)";
    if (row.baseline) run += " (baseline)";
    const bool poor = !row.baseline && row.efficiency < 0.8;
    p.Row({run, std::to_string(row.devices), StrFormat("%.3f", row.steps_per_s),
           StrFormat("%.3f", row.steps_per_s_per_device), StrFormat("%.2f×", row.speedup),
           StrFormat("%.2f×", row.ideal_speedup),
           (poor ? "<strong class=\"bad\">" : "<strong>") +
               StrFormat("%.1f %%", 100 * row.efficiency) + "</strong>"});
  }
  p.Add("</tbody></table>");
  p.Note(
      "Efficiency: training steps per second per device against the run with the fewest "
      "devices (100 % is linear scaling), the first " +
      std::to_string(sc.warmup_steps) +
      " training steps of each device left out. Steps compare samples only when each "
      "device's batch is the same in every run (weak scaling).");
  if (!sc.note.empty()) p.Note(sc.note);
  p.Add("</section>");
}

void RenderDataQuality(const Report& r, Page& p) {
  const DataQuality& dq = r.data_quality;
  p.Add("<section id=\"data-quality\"><h2>Data quality</h2><table><thead>");
  p.Row({"Counter", "Value"}, true);
  p.Add("</thead><tbody>");
  for (const auto& [name, v] : dq.counters) {
    p.Row({E(name), v ? std::to_string(*v) : "n/a"});
  }
  p.Add("</tbody></table>");
  if (!dq.absent_metrics.empty()) {
    p.Add("<h3>Not measured</h3><ul>");
    for (const auto& a : dq.absent_metrics) p.Add("<li>" + E(a) + "</li>");
    p.Add("</ul>");
  }
  if (!dq.problems.empty()) {
    p.Add("<h3>Read problems</h3><ul>");
    for (const auto& a : dq.problems) p.Add("<li>" + E(a) + "</li>");
    p.Add("</ul>");
  }
  p.Add("</section>");
}

}  // namespace trainprof::report::html
