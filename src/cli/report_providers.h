#pragma once
// Joins the analyses into the report and into `record`'s end of run. The report module
// depends on neither the rules engine nor the cost advisor; the CLI, which links all three,
// provides the report's sections from them here.

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analyze/cost/catalog.h"
#include "analyze/cost/cost_model.h"
#include "analyze/rules/config.h"
#include "analyze/rules/rule.h"
#include "cli/cost_command.h"
#include "cli/custom_rules.h"
#include "report/report_model.h"
#include "store/run_reader.h"

namespace trainprof::analyze::rules {
class RuleEngine;
}

namespace trainprof::cli {

// The run's cost, once, for pricing findings (each finding's cost impact, cost/finding_cost.h):
// the cost report, or why there is none (no instance type, no price...).
struct FindingPricer {
  std::optional<cost::Catalog> catalog;
  std::optional<cost::CostReport> report;
  std::string why_not;  // the cost advisor's error when `report` is absent
  std::string run_dir;  // the run it was computed for
  // Sets f->cost_usd / cost_basis; without a report: no figure and why.
  void Price(model::Finding* f) const;
  void Price(std::vector<analyze::rules::RuleResult>* results) const;
};
FindingPricer MakeFindingPricer(store::RunReader& reader, const PricingOptions& pricing = {});

// The rules section from the rules engine (every built-in rule with its default parameters),
// each finding priced. `shared` (optional) hands the cost computed for the prices to
// CostAdvisorProvider, so that a report computes the run's cost once.
report::RulesProvider RulesEngineProvider(std::shared_ptr<FindingPricer> shared = nullptr);
// The cost section from the cost advisor and the shipped catalog; a run whose instance type is
// unknown gets the section's note instead of numbers.
report::CostProvider CostAdvisorProvider(std::shared_ptr<FindingPricer> shared = nullptr);
// Sets both providers (sharing the cost).
void UseAnalyses(report::BuildOptions* build);

// The report's scaling section (`report --scaling`): `run`, open as `reader`, against `others`,
// runs of the same job at other world sizes (src/analyze/scaling; scaling_command.cc).
StatusOr<report::ScalingSection> ScalingSectionFor(const std::string& run, store::RunReader& reader,
                                                   const std::vector<std::string>& others,
                                                   int64_t warmup_steps);

// After `record`: evaluate the rules (storing their findings in the run and printing the ones
// that fired), print the cost summary, and write report.html / report.json into the run.
// Custom Python rules (`record --custom-rule`) run after the built-in ones; their findings are
// stored too and a failing custom rule is a warning.
// Problems are printed as warnings; nothing here can change the recorded command's exit code.
// With `live`, the rules it evaluated while the job ran are finished instead (same findings),
// custom rules included (`live` owns their options then); without, `custom` adds Python
// custom rules, evaluated at the end.
// The rules `record` evaluated while the job ran, as FinishRecordedRun takes them over
// (LiveRules, cli/live_rules.h, on the recording side: this file builds without it).
class LiveEvaluation {
 public:
  virtual ~LiveEvaluation() = default;
  // The finished engine; nullptr when live evaluation never started or failed.
  virtual const analyze::rules::RuleEngine* Finish(std::ostream& out) = 0;
  virtual const analyze::rules::RuleConfig& config() const = 0;
  // The custom rules' results; nullopt without custom rules.
  virtual std::optional<StatusOr<CustomRulesOutcome>> FinishCustom(const std::string& run_dir,
                                                                   std::ostream& out) = 0;
};
void FinishRecordedRun(const std::string& run_dir, std::ostream& out,
                       LiveEvaluation* live = nullptr, const CustomRulesOptions& custom = {});

}  // namespace trainprof::cli
