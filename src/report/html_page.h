#pragma once
// What the HTML renderers share (report_html.cc: the run's detail; report_html_verdicts.cc:
// rules, cost, scaling, data quality): the page being written, its charts, value formatting.
// Internal to src/report.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/strings.h"
#include "report/report_html.h"
#include "report/report_model.h"

namespace trainprof::report::html {

using nlohmann::json;

// A value in its unit ("ratio" as a percentage, bytes in KiB/MiB/..., "ms"); "n/a" when absent.
std::string FormatValue(std::optional<double> v, const std::string& unit);
std::string Duration(std::optional<int64_t> ns);
std::string Time(std::optional<int64_t> ns);
// The display title of a metric, the metric's name when it has none.
std::string MetricTitle(const std::string& metric);
// The metrics the page leads with (those with a title); the others go under "More".
bool IsKeyMetric(const std::string& metric);
// Every sample of the series has the same value.
bool Constant(const Stats& s);
// Every sample of the series is 0 (a series without samples is missing, not zero).
bool ZeroThroughout(const Stats& s);
// Four significant digits are all a chart can show; fewer digits keep large reports small.
double Round4(double v);
json Rounded(const std::vector<double>& values);
json BandSeries(const std::string& label, const Band& band);

// Collects the page's charts: each gets a placeholder div and one entry in the data block.
class Charts {
 public:
  std::string Add(json spec) {
    std::string id = "chart-" + std::to_string(specs_.size());
    specs_.push_back(std::move(spec));
    return "<div class=\"chart\" id=\"" + id + "\" data-chart=\"" +
           std::to_string(specs_.size() - 1) + "\"></div>";
  }
  const json& specs() const { return specs_; }

 private:
  json specs_ = json::array();
};

struct Page {
  std::string html;
  Charts charts;
  void Add(std::string_view s) { html.append(s); }
  void Text(std::string_view s) { html.append(HtmlEscape(s)); }
  void Row(const std::vector<std::string>& escaped_cells, bool header = false) {
    html += "<tr>";
    for (const auto& c : escaped_cells)
      html += (header ? "<th>" : "<td>") + c + (header ? "</th>" : "</td>");
    html += "</tr>";
  }
  void Note(std::string_view s) {
    html += "<p class=\"note\">";
    Text(s);
    html += "</p>";
  }
};

inline std::string E(std::string_view s) { return HtmlEscape(s); }

void StatsCells(std::vector<std::string>& row, const Stats& s, const std::string& unit);

// The sections of report_html_verdicts.cc.
void RenderRules(const Report& r, Page& p);
void RenderCost(const Report& r, Page& p);
void RenderScaling(const Report& r, Page& p);
void RenderDataQuality(const Report& r, Page& p);

}  // namespace trainprof::report::html
