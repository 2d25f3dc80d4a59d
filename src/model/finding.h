#pragma once
// A rule's finding: what fired, where, when, why (evidence) and what to change.

#include <cstdint>
#include <optional>
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
  // Estimated cost impact in dollars, filled where findings are shown by joining the cost
  // advisor (cli); not stored. Absent when it cannot be computed (no price, or no cost model
  // for the finding); `cost_basis` then says why, else what was priced at which price (with
  // its date and source). Both empty: not priced at all.
  std::optional<double> cost_usd;
  std::string cost_basis;
};

// "≈ $12.34 (basis)", "cost n/a (basis)", or "" when the finding was not priced at all.
std::string FormatCostImpact(const Finding& f);
// "$12.34"; amounts under a cent keep four decimals ("$0.0042").
std::string FormatUsd(double usd);

}  // namespace trainprof::model
