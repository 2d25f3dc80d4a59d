#include "model/finding.h"

#include <cmath>
#include <cstdio>

namespace trainprof::model {

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kCritical:
      return "critical";
  }
  return "warning";
}

bool ParseSeverity(const std::string& text, Severity* out) {
  if (text == "info")
    *out = Severity::kInfo;
  else if (text == "warning")
    *out = Severity::kWarning;
  else if (text == "critical")
    *out = Severity::kCritical;
  else
    return false;
  return true;
}

std::string FormatUsd(double usd) {
  char buf[64];
  const double a = std::fabs(usd);
  std::snprintf(buf, sizeof buf, a > 0 && a < 0.01 ? "$%.4f" : "$%.2f", usd);
  return buf;
}

std::string FormatCostImpact(const Finding& f) {
  if (f.cost_usd) {
    return "≈ " + FormatUsd(*f.cost_usd) + (f.cost_basis.empty() ? "" : " (" + f.cost_basis + ")");
  }
  if (f.cost_basis.empty()) return "";
  return "cost n/a (" + f.cost_basis + ")";
}

}  // namespace trainprof::model
