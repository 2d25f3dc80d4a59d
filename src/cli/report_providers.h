#pragma once
// Joins the analyses into the report and into `record`'s end of run. The report module
// depends on neither the rules engine nor the cost advisor; the CLI, which links all three,
// provides the report's sections from them here.

#include <ostream>
#include <string>

#include "cli/custom_rules.h"
#include "report/report_model.h"

namespace trainprof::cli {

// The rules section from the rules engine (every built-in rule with its default parameters).
report::RulesProvider RulesEngineProvider();
// The cost section from the cost advisor and the shipped catalog; a run whose instance type is
// unknown gets the section's note instead of numbers.
report::CostProvider CostAdvisorProvider();
// Sets both providers.
void UseAnalyses(report::BuildOptions* build);

// After `record`: evaluate the rules (storing their findings in the run and printing the ones
// that fired), print the cost summary, and write report.html / report.json into the run.
// Custom Python rules (`record --custom-rule`) run after the built-in ones; their findings are
// stored too and a failing custom rule is a warning.
// Problems are printed as warnings; nothing here can change the recorded command's exit code.
void FinishRecordedRun(const std::string& run_dir, std::ostream& out,
                       const CustomRulesOptions& custom = {});

}  // namespace trainprof::cli
