// The list of built-in rules, in the order they are evaluated and reported.
#include "analyze/rules/registry.h"
#include "analyze/rules/rule_util.h"

namespace trainprof::analyze::rules {

void RegisterBuiltinRules(RuleRegistry& registry) {
  std::vector<BuiltinRule> rules;
  AddSageMakerSystemRules(&rules);
  AddSageMakerFrameworkRules(&rules);
  AddOwnRules(&rules);
  AddRecompilationRule(&rules);
  AddHealthRules(&rules);
  for (auto& r : rules) {
    TP_CHECK(registry.Register(std::move(r.spec), std::move(r.factory), /*builtin=*/true).ok());
  }
  RuleSpec report;
  report.name = kProfilerReport;
  report.sagemaker = true;
  report.description =
      "Runs every built-in rule (SageMaker's and trainprof's) and summarises which fired.";
  TP_CHECK(registry.Register(std::move(report), nullptr, /*builtin=*/true).ok());
}

}  // namespace trainprof::analyze::rules
