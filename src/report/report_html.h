#pragma once
// Lays the report model out as one self-contained HTML page: tables are written here, charts
// are drawn in the browser by the embedded dygraphs library from series computed in C++.
// Everything that came from a trace or a user is escaped (HtmlEscape for markup, JsonForScript
// for data embedded in <script>).

#include <string>
#include <string_view>

#include "report/report_model.h"

namespace trainprof::report {

std::string RenderHtml(const Report& report);

// & < > " ' as entities.
std::string HtmlEscape(std::string_view text);
// JSON text made safe inside <script>: < > & and U+2028/2029 become \u escapes.
std::string JsonForScript(const std::string& json_text);

}  // namespace trainprof::report
