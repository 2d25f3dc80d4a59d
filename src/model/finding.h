#pragma once
// A rule's finding: what fired, where, when, why (evidence) and what to change.

#include <cstdint>
#include <string>

namespace trainprof::model {

enum class Severity : uint8_t { kInfo = 0, kWarning = 1, kCritical = 2 };
const char* SeverityName(Severity s);
bool ParseSeverity(const std::string& text, Severity* out);

struct Finding {
  std::string rule;
  Severity severity = Severity::kWarning;
  std::string node;
  std::string device;  // "" when the finding is not about one device
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::string message;
  std::string recommendation;
  std::string evidence_json = "{}";  // the values that made it fire, as a JSON object
};

}  // namespace trainprof::model
