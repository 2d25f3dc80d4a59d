#include "model/finding.h"

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

}  // namespace trainprof::model
