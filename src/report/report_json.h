#pragma once
// The report model as JSON (docs/report.md documents every key). Keys are stable: new keys may
// be added, existing ones keep their meaning within a schema_version. Absent values are null.

#include <nlohmann/json.hpp>

#include "report/report_model.h"

namespace trainprof::report {

nlohmann::json ReportToJson(const Report& report);
nlohmann::json BandToJson(const Band& band);

}  // namespace trainprof::report
