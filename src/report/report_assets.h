#pragma once
// The report's embedded assets (src/report/CMakeLists.txt embeds them at build time): dygraphs
// (MIT, from Debian's libjs-dygraphs, with its notice), the shared chart layer (charts.js:
// window.tpCharts, also served by the dashboard) and the report's own script and style.

#include <string_view>

namespace trainprof::report::assets {
extern const std::string_view kDygraphsJs;
extern const std::string_view kDygraphsCss;
extern const std::string_view kDygraphsNotice;
extern const std::string_view kChartsJs;
extern const std::string_view kReportJs;
extern const std::string_view kReportCss;
}  // namespace trainprof::report::assets
