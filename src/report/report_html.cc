#include "report/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/time.h"
#include "report/html_page.h"
#include "report/report_assets.h"
#include "report/report_json.h"

namespace trainprof::report {

namespace {

using namespace html;  // NOLINT(google-build-using-namespace): the renderers' shared kit

void RenderSummary(const Report& r, Page& p) {
  const Summary& s = r.summary;
  p.Add("<section id=\"summary\"><h2>Summary</h2><p class=\"verdict\">");
  p.Text(s.verdict);
  p.Add("</p>");
  if (!s.top_changes.empty()) {
    p.Add("<h3>Top things to change</h3><ol class=\"changes\">");
    for (const auto& c : s.top_changes) {
      p.Add("<li><strong>" + E(c.title) + "</strong> — " + E(c.detail) + " <span class=\"src\">(" +
            E(c.source) + ")</span></li>");
    }
    p.Add("</ol>");
  } else {
    p.Note("Nothing stands out to change.");
  }
  std::string command;
  for (const auto& a : s.command) command += (command.empty() ? "" : " ") + a;
  std::string tags;
  for (const auto& [k, v] : s.tags) tags += (tags.empty() ? "" : ", ") + k + "=" + v;
  p.Add("<table class=\"facts\">");
  auto fact = [&](const char* k, const std::string& v) { p.Row({k, E(v)}); };
  fact("Job", s.name.empty() ? "n/a" : s.name);
  fact("Run", s.run_id);
  fact("Command", command.empty() ? "n/a" : command);
  fact("Start", Time(s.start_ns));
  fact("End", Time(s.end_ns));
  fact("Duration", Duration(s.duration_ns));
  fact("Exit status", s.exit_status ? std::to_string(*s.exit_status) : "n/a");
  fact("Nodes", std::to_string(s.node_count));
  fact("GPUs", std::to_string(s.gpu_count));
  fact("CPU cores", s.cpu_cores ? std::to_string(*s.cpu_cores) : "n/a");
  fact("Instance type", s.instance_type.empty() ? "n/a" : s.instance_type);
  fact("Mean GPU utilisation", FormatValue(s.gpu_utilization_mean, "ratio"));
  fact("GPU idle (below 10 %)", FormatValue(s.gpu_idle_share, "ratio"));
  fact("Source", s.source);
  if (!tags.empty()) fact("Tags", tags);
  p.Add("</table></section>");
}

void RenderPhases(const Report& r, Page& p) {
  p.Add("<section id=\"phases\"><h2>Phases</h2>");
  if (r.phases.empty()) {
    p.Note("n/a: the run holds no phase spans (category \"phase\").");
    p.Add("</section>");
    return;
  }
  int64_t start = r.summary.start_ns;
  int64_t end = r.summary.end_ns.value_or(start);
  for (const auto& ph : r.phases) {
    start = std::min(start, ph.start_ns);
    end = std::max(end, ph.start_ns + ph.duration_ns);
  }
  double span = static_cast<double>(std::max<int64_t>(1, end - start));
  p.Add("<div class=\"timeline\">");
  for (const auto& ph : r.phases) {
    double left = static_cast<double>(ph.start_ns - start) / span * 100;
    double width = std::max(0.3, static_cast<double>(ph.duration_ns) / span * 100);
    p.Add("<div class=\"tl-row\"><span class=\"tl-label\">" + E(ph.name) +
          "</span><span class=\"tl-track\"><span class=\"tl-bar phase-" + E(ph.name) +
          "\" style=\"left:" + StrFormat("%.3f", left) + "%;width:" + StrFormat("%.3f", width) +
          "%\" title=\"" + E(ph.name + ": " + FormatDuration(ph.duration_ns)) +
          "\"></span></span></div>");
  }
  p.Add("</div><table><thead>");
  p.Row({"Phase", "Node", "Start", "Duration", "Share of run"}, true);
  p.Add("</thead><tbody>");
  for (const auto& ph : r.phases) {
    p.Row({E(ph.name), E(ph.node), FormatIso8601(ph.start_ns), FormatDuration(ph.duration_ns),
           FormatValue(ph.share_of_run, "ratio")});
  }
  p.Add("</tbody></table></section>");
}

void RenderSystem(const Report& r, Page& p) {
  p.Add("<section id=\"system\"><h2>System usage</h2>");
  if (r.nodes.empty()) p.Note("n/a: no node stores in this run.");
  for (const auto& n : r.nodes) {
    p.Add("<h3>Node " + E(n.node) + "</h3><p class=\"note\">");
    std::string facts =
        (n.hostname.empty() ? "" : n.hostname + " · ") +
        (n.cpu_model.empty() ? "CPU n/a" : n.cpu_model) + " · " +
        (n.cpu_cores ? std::to_string(*n.cpu_cores) + " cores" : "cores n/a") + " · memory " +
        FormatValue(n.memory_total_bytes
                        ? std::optional<double>(static_cast<double>(*n.memory_total_bytes))
                        : std::nullopt,
                    "bytes") +
        " · " + std::to_string(n.gpu_names.size()) + " GPU(s)" +
        (n.gpu_names.empty() ? "" : " (" + n.gpu_names.front() + ")");
    p.Text(facts);
    p.Add("</p>");
    if (n.metrics.empty()) p.Note("n/a: no system metrics were stored for this node.");
    // The series that say something come first: the key metrics (those with a title) in a
    // table and charts; the others behind "More metrics"; a series zero throughout the run is
    // not given a row or a chart, only its name on one line.
    std::vector<const MetricUsage*> key, more;
    for (const auto& m : n.metrics) (IsKeyMetric(m.metric) ? key : more).push_back(&m);
    auto zero_line = [&p](const std::vector<const MetricUsage*>& metrics) {
      std::string line;
      for (const MetricUsage* m : metrics) {
        std::vector<std::string> devices;
        for (const auto& d : m->devices) {
          if (ZeroThroughout(d.stats)) devices.push_back(d.device.empty() ? "—" : d.device);
        }
        if (devices.empty()) continue;
        std::string item = MetricTitle(m->metric);
        if (devices.size() == m->devices.size() && m->devices.size() > 1) {
          item += " (every device: ";
        } else {
          item += " (";
        }
        for (size_t i = 0; i < devices.size(); ++i) item += (i ? ", " : "") + devices[i];
        line += (line.empty() ? "" : " · ") + item + ")";
      }
      if (!line.empty()) {
        p.Add("<p class=\"note zero\">Zero throughout the run (no rows, no charts): ");
        p.Text(line);
        p.Add("</p>");
      }
    };
    auto stats_table = [&p](const std::vector<const MetricUsage*>& metrics) {
      int rows = 0;
      for (const MetricUsage* m : metrics) {
        for (const auto& d : m->devices) rows += ZeroThroughout(d.stats) ? 0 : 1;
      }
      if (rows == 0) return;
      p.Add("<table class=\"stats\"><thead>");
      p.Row({"Metric", "Device", "p50", "p95", "p99", "max", "min", "mean", "samples"}, true);
      p.Add("</thead><tbody>");
      for (const MetricUsage* m : metrics) {
        for (const auto& d : m->devices) {
          if (ZeroThroughout(d.stats)) continue;
          std::vector<std::string> row = {E(MetricTitle(m->metric)),
                                          E(d.device.empty() ? "—" : d.device)};
          StatsCells(row, d.stats, m->unit);
          row.push_back(std::to_string(d.stats.count));
          p.Row(row);
        }
      }
      p.Add("</tbody></table>");
    };
    auto chart_grid = [&p](const std::vector<const MetricUsage*>& metrics) {
      p.Add("<div class=\"grid\">");
      for (const MetricUsage* m : metrics) {
        std::vector<const DeviceUsage*> drawn;
        for (const auto& d : m->devices) {
          // Zero or constant throughout: the table says all there is (a flat line says less).
          if (d.band.size() == 0 || ZeroThroughout(d.stats) || Constant(d.stats)) continue;
          drawn.push_back(&d);
        }
        if (drawn.empty()) continue;
        // A chart of dozens of lines (one per process of a big job) says nothing: the busiest
        // kMaxChartLines by mean are drawn, the caption says how many the table holds.
        constexpr size_t kMaxChartLines = 8;
        const size_t all = drawn.size();
        if (all > kMaxChartLines) {
          std::stable_sort(drawn.begin(), drawn.end(),
                           [](const DeviceUsage* a, const DeviceUsage* b) {
                             return a->stats.mean.value_or(0) > b->stats.mean.value_or(0);
                           });
          drawn.resize(kMaxChartLines);
        }
        json series = json::array();
        for (const DeviceUsage* d : drawn) {
          series.push_back(BandSeries(d->device.empty() ? m->metric : d->device, d->band));
        }
        std::string caption = E(MetricTitle(m->metric));
        if (all > kMaxChartLines) {
          caption += " <span class=\"note\">(the " + std::to_string(kMaxChartLines) +
                     " highest by mean of " + std::to_string(all) +
                     "; every one in the table)</span>";
        }
        p.Add("<figure><figcaption>" + caption + "</figcaption>");
        p.Add(p.charts.Add({{"kind", "band"}, {"unit", m->unit}, {"series", series}}));
        p.Add("</figure>");
      }
      p.Add("</div>");
    };
    stats_table(key);
    zero_line(key);
    if (!n.heatmap.rows.empty()) {
      json cells = json::array();
      for (const auto& row : n.heatmap.cells) {
        json jr = json::array();
        for (const auto& c : row)
          jr.push_back(c ? json(std::round(*c * 1000) / 1000) : json(nullptr));
        cells.push_back(jr);
      }
      p.Add("<h4>Utilisation heatmap (cores and GPUs × time)</h4>");
      p.Add(p.charts.Add({{"kind", "heatmap"},
                          {"rows", n.heatmap.rows},
                          {"start_s", static_cast<double>(n.heatmap.start_ns) / 1e9},
                          {"bucket_s", static_cast<double>(n.heatmap.bucket_ns) / 1e9},
                          {"cells", cells}}));
    }
    chart_grid(key);
    if (!more.empty()) {
      size_t series = 0, zero = 0;
      for (const MetricUsage* m : more) {
        for (const auto& d : m->devices) {
          ++series;
          zero += ZeroThroughout(d.stats) ? 1 : 0;
        }
      }
      p.Add("<details class=\"more\"><summary>More metrics: " + std::to_string(more.size()) +
            " metrics, " + std::to_string(series) + " series (" + std::to_string(zero) +
            " zero throughout)</summary>");
      stats_table(more);
      zero_line(more);
      chart_grid(more);
      p.Add("</details>");
    }
  }
  p.Add("</section>");
}

json HistSpec(const Histogram& h, const std::string& unit) {
  return {{"kind", "hist"}, {"unit", unit}, {"edges", h.edges}, {"counts", h.counts}};
}

void RenderTraining(const Report& r, Page& p) {
  const TrainingLoop& t = r.training;
  p.Add("<section id=\"training\"><h2>Training loop</h2>");
  if (t.modes.empty()) {
    p.Note(
        "n/a: the run holds no step spans (category \"step\"); instrument the training loop "
        "to see step times.");
    p.Add("</section>");
    return;
  }
  p.Add("<table class=\"stats\"><thead>");
  p.Row({"Mode", "Steps", "Total", "p50", "p95", "p99", "max", "min", "mean", "Outliers"}, true);
  p.Add("</thead><tbody>");
  for (const auto& m : t.modes) {
    std::vector<std::string> row = {E(m.mode), std::to_string(m.count), FormatDuration(m.total_ns)};
    StatsCells(row, m.duration_ms, "ms");
    row.push_back(std::to_string(m.outlier_count) + " (typically above " +
                  FormatValue(m.outlier_above_ms, "ms") + ")");
    p.Row(row);
  }
  p.Add("</tbody></table><p>Train/eval time ratio: <strong>" +
        (t.train_eval_ratio ? StrFormat("%.2f", *t.train_eval_ratio) : std::string("n/a")) +
        "</strong></p>");
  if (!t.parts.empty()) {
    p.Add("<h3>Where step time goes</h3><div class=\"stack\">");
    for (const auto& part : t.parts) {
      double w = part.share.value_or(0) * 100;
      if (w <= 0) continue;
      p.Add("<span class=\"part part-" + E(part.part) + "\" style=\"width:" + StrFormat("%.3f", w) +
            "%\" title=\"" + E(part.part + " " + FormatValue(part.share, "ratio")) + "\">" +
            (w > 6 ? E(part.part) : std::string()) + "</span>");
    }
    p.Add("</div><table><thead>");
    p.Row({"Part", "Total", "Share of step time"}, true);
    p.Add("</thead><tbody>");
    for (const auto& part : t.parts) {
      p.Row({E(part.part), FormatDuration(part.total_ns), FormatValue(part.share, "ratio")});
    }
    p.Add("</tbody></table>");
  } else {
    p.Note("n/a: no data_wait / forward / backward / optimizer spans were recorded.");
  }
  p.Add("<div class=\"grid\">");
  for (const auto& m : t.modes) {
    json markers = json::array();
    for (const auto& o : m.outliers) {
      markers.push_back({{"x", static_cast<double>(o.start_ns) / 1e9},
                         {"y", static_cast<double>(o.duration_ns) / 1e6}});
    }
    p.Add("<figure><figcaption>Step time over time: " + E(m.mode) + "</figcaption>");
    p.Add(p.charts.Add({{"kind", "band"},
                        {"unit", "ms"},
                        {"series", json::array({BandSeries(m.mode + " step", m.series_ms)})},
                        {"markers", markers}}));
    p.Add("</figure><figure><figcaption>Step time histogram: " + E(m.mode) + "</figcaption>");
    p.Add(p.charts.Add(HistSpec(m.histogram_ms, "ms")));
    p.Add("</figure>");
  }
  p.Add("</div>");
  if (t.ranks.size() > 1) {
    p.Add("<h3>Per rank</h3><table class=\"stats\"><thead>");
    p.Row({"Node", "Rank", "Mode", "p50", "p95", "p99", "max", "min", "mean", "steps"}, true);
    p.Add("</thead><tbody>");
    for (const auto& rk : t.ranks) {
      std::vector<std::string> row = {E(rk.node), rk.rank ? std::to_string(*rk.rank) : "n/a",
                                      E(rk.mode)};
      StatsCells(row, rk.duration_ms, "ms");
      row.push_back(std::to_string(rk.duration_ms.count));
      p.Row(row);
    }
    p.Add("</tbody></table>");
  }
  p.Add("</section>");
}

void OperatorTable(const std::vector<OperatorRow>& rows, Page& p) {
  p.Add("<table class=\"ops\"><thead>");
  p.Row({"Operator", "Category", "Calls", "Total", "Mean", "Share"}, true);
  p.Add("</thead><tbody>");
  for (const auto& o : rows) {
    p.Row({"<code>" + E(o.name) + "</code>", E(o.category), std::to_string(o.count),
           FormatDuration(o.total_ns), FormatDuration(static_cast<int64_t>(o.mean_ns)),
           FormatValue(o.share, "ratio")});
  }
  p.Add("</tbody></table>");
}

void RenderOperators(const Report& r, Page& p) {
  const Operators& o = r.operators;
  p.Add("<section id=\"operators\"><h2>Operators</h2>");
  if (o.event_count == 0) {
    p.Note(
        "n/a: no detailed-profiling events (cpu_op, kernel, gpu_memcpy...) in this run. "
        "Ask for detailed profiling or import a Kineto trace to see operators.");
    p.Add("</section>");
    return;
  }
  if (!o.gpu_breakdown.empty()) {
    p.Add("<h3>GPU time</h3><table><thead>");
    p.Row({"Kind", "Total", "Share of GPU time"}, true);
    p.Add("</thead><tbody>");
    for (const auto& b : o.gpu_breakdown) {
      p.Row({E(b.part), FormatDuration(b.total_ns), FormatValue(b.share, "ratio")});
    }
    p.Add("</tbody></table><h3>Top GPU operators</h3>");
    OperatorTable(o.gpu, p);
  }
  if (!o.cpu.empty()) {
    p.Add("<h3>Top CPU operators</h3>");
    OperatorTable(o.cpu, p);
  }
  p.Add("</section>");
}

std::string PerCall(std::optional<double> ns) {
  return ns ? FormatDuration(static_cast<int64_t>(*ns)) : std::string("n/a");
}

std::string Where(const std::string& file, int64_t line) {
  return "<span class=\"src\">" + E(file) + ":" + std::to_string(line) + "</span>";
}

// pstats writes calls as "calls/primitive" when a function recursed.
std::string Calls(int64_t calls, int64_t primitive) {
  return primitive != calls ? std::to_string(calls) + "/" + std::to_string(primitive)
                            : std::to_string(calls);
}

void PythonTable(const std::vector<PythonFunctionRow>& rows, Page& p) {
  p.Add("<table class=\"ops pyfuncs\"><thead>");
  p.Row({"Function", "Calls", "Own time", "Own / call", "Cumulative", "Cumulative / call",
         "Called by (calls, cumulative time from there)"},
        true);
  p.Add("</thead><tbody>");
  constexpr size_t kShownCallers = 3;
  for (const auto& f : rows) {
    std::string callers;
    for (size_t i = 0; i < f.callers.size() && i < kShownCallers; ++i) {
      const auto& c = f.callers[i];
      callers += (i ? "<br>" : "") + std::string("<code>") + E(c.function) + "</code> " +
                 Where(c.file, c.line) + " ×" + Calls(c.calls, c.primitive_calls) + ", " +
                 FormatDuration(c.cumulative_ns);
    }
    const int64_t all = f.caller_count.value_or(static_cast<int64_t>(f.callers.size()));
    const int64_t shown = static_cast<int64_t>(std::min(f.callers.size(), kShownCallers));
    if (all > shown) {
      callers += (shown ? "<br>" : "") + std::string("<span class=\"src\">") +
                 (shown ? "+" + std::to_string(all - shown) + " more"
                        : std::to_string(all) + " caller(s), not stored") +
                 "</span>";
    }
    if (callers.empty()) callers = "—";
    p.Row({"<code>" + E(f.function) + "</code> " + Where(f.file, f.line),
           Calls(f.calls, f.primitive_calls), FormatDuration(f.total_ns),
           PerCall(f.total_per_call_ns), FormatDuration(f.cumulative_ns),
           PerCall(f.cumulative_per_call_ns), callers});
  }
  p.Add("</tbody></table>");
}

void RenderPython(const Report& r, Page& p) {
  const PythonFunctions& py = r.python;
  p.Add("<section id=\"python\"><h2>Python functions</h2>");
  if (py.profiles.empty()) {
    p.Note(py.note);
    if (py.unreadable > 0) {
      p.Note(std::to_string(py.unreadable) +
             " python_function instants were not cProfile rows (args without cumulative_ns).");
    }
    p.Add("</section>");
    return;
  }
  p.Note(
      "cProfile statistics: own time excludes the functions called, cumulative time includes "
      "them; per call is own time / calls and cumulative time / primitive (non-recursive) calls, "
      "as pstats prints them. Calls a/b: a calls, b of them primitive.");
  if (py.profile_count > static_cast<int64_t>(py.profiles.size())) {
    p.Note("The first " + std::to_string(py.profiles.size()) + " of " +
           std::to_string(py.profile_count) + " profiles are shown (report.json has the same).");
  }
  for (const auto& pr : py.profiles) {
    std::string title = pr.steps.empty() ? "Time window" : "Steps " + pr.steps;
    title += " · node " + pr.node;
    if (pr.rank) title += " · rank " + std::to_string(*pr.rank);
    if (pr.pid) title += " · pid " + std::to_string(*pr.pid);
    p.Add("<div class=\"pyprofile\"><h3>");
    p.Text(title);
    p.Add("</h3>");
    p.Note("Stored " + FormatIso8601(pr.end_ns) + " · " + std::to_string(pr.functions) +
           " functions stored (those with the most cumulative time)");
    p.Add("<h4>Top functions by own time</h4>");
    PythonTable(pr.by_total, p);
    p.Add("<h4>Top functions by cumulative time</h4>");
    PythonTable(pr.by_cumulative, p);
    p.Add("</div>");
  }
  p.Add("</section>");
}

void RenderDataLoader(const Report& r, Page& p) {
  const DataLoader& d = r.data_loader;
  p.Add("<section id=\"data-loader\"><h2>Data loader</h2><p>");
  p.Text(d.assessment);
  p.Add("</p><table class=\"facts\">");
  p.Row({"Workers", d.workers ? std::to_string(*d.workers) : "n/a"});
  p.Row({"CPU cores", d.cpu_cores ? std::to_string(*d.cpu_cores) : "n/a"});
  p.Row({"Wait share of train step time", FormatValue(d.wait_share, "ratio")});
  p.Row({"Steps with a data_wait span", std::to_string(d.steps_with_wait)});
  p.Row({"Wait p50 / p95 / max", FormatValue(d.wait_ms.p50, "ms") + " / " +
                                     FormatValue(d.wait_ms.p95, "ms") + " / " +
                                     FormatValue(d.wait_ms.max, "ms")});
  p.Add("</table>");
  if (!d.config.empty()) {
    p.Add("<h3>Configuration</h3><table><thead>");
    p.Row({"Setting", "Value"}, true);
    p.Add("</thead><tbody>");
    for (const auto& [k, v] : d.config) p.Row({E(k), E(v)});
    p.Add("</tbody></table>");
  } else {
    p.Note("Configuration n/a: no data loader annotations were stored.");
  }
  if (d.steps_with_wait > 0) {
    p.Add("<figure><figcaption>Data wait per step</figcaption>");
    p.Add(p.charts.Add(HistSpec(d.wait_histogram_ms, "ms")));
    p.Add("</figure>");
  }
  p.Add("</section>");
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string JsonForScript(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size() + 64);
  for (size_t i = 0; i < json_text.size(); ++i) {
    char c = json_text[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xe2' && i + 2 < json_text.size() && json_text[i + 1] == '\x80' &&
               (json_text[i + 2] == '\xa8' || json_text[i + 2] == '\xa9')) {
      out += json_text[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string RenderHtml(const Report& r) {
  Page p;
  p.html.reserve(1 << 20);
  std::string title =
      "trainprof report: " + (r.summary.name.empty() ? r.summary.run_id : r.summary.name);
  p.Add(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      // No network: everything is inline, and the policy forbids fetching anything else.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">"
      "<meta name=\"generator\" content=\"" +
      E(r.generator) + "\"><title>");
  p.Text(title);
  p.Add("</title><style>");
  p.Add(assets::kDygraphsCss);
  p.Add("\n");
  p.Add(assets::kReportCss);
  p.Add("</style></head><body><header><h1>");
  p.Text(title);
  p.Add("</h1><p class=\"note\">");
  p.Text(r.run_dir + " · generated " + FormatIso8601(r.generated_ns) + " by " + r.generator +
         " · schema " + std::to_string(r.schema_version));
  p.Add("</p><nav>");
  for (const auto& [id, name] :
       std::vector<std::pair<const char*, const char*>>{{"summary", "Summary"},
                                                        {"rules", "Rules"},
                                                        {"cost", "Cost"},
                                                        {"scaling", "Scaling"},
                                                        {"phases", "Phases"},
                                                        {"system", "System"},
                                                        {"training", "Training loop"},
                                                        {"operators", "Operators"},
                                                        {"python", "Python functions"},
                                                        {"data-loader", "Data loader"},
                                                        {"data-quality", "Data quality"}}) {
    if (std::string_view(id) == "scaling" && !r.scaling.available) continue;
    p.Add(std::string("<a href=\"#") + id + "\">" + name + "</a>");
  }
  p.Add("</nav></header><main>");
  // What to do first (verdict, findings with their evidence, what it cost), then the detail.
  RenderSummary(r, p);
  RenderRules(r, p);
  RenderCost(r, p);
  RenderScaling(r, p);
  RenderPhases(r, p);
  RenderSystem(r, p);
  RenderTraining(r, p);
  RenderOperators(r, p);
  RenderPython(r, p);
  RenderDataLoader(r, p);
  RenderDataQuality(r, p);
  p.Add(
      "</main><footer><details><summary>Third-party notices</summary><p>Charts drawn with "
      "dygraphs (MIT licence), embedded from Debian's libjs-dygraphs:</p><pre>");
  p.Text(assets::kDygraphsNotice);
  p.Add("</pre></details></footer>");
  p.Add("<script type=\"application/json\" id=\"tp-charts\">");
  p.Add(JsonForScript(p.charts.specs().dump(-1, ' ', /*ensure_ascii=*/true,
                                            nlohmann::json::error_handler_t::replace)));
  p.Add("</script><script>");
  p.Add(assets::kDygraphsJs);
  p.Add("</script><script>");
  p.Add(assets::kChartsJs);
  p.Add("</script><script>");
  p.Add(assets::kReportJs);
  p.Add("</script></body></html>\n");
  return std::move(p.html);
}

}  // namespace trainprof::report
