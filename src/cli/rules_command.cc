// `trainprof rules RUN`: evaluate the profiler rules on a stored run (offline), print the
// results (JSON contract or text), optionally store the findings in the run and run the
// configured actions. `trainprof rules --list` prints every rule with its parameters.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "analyze/rules/actions.h"
#include "analyze/rules/config.h"
#include "analyze/rules/evaluate.h"
#include "analyze/rules/registry.h"
#include "base/json_dump.h"
#include "base/parallel.h"
#include "base/time.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/cost_command.h"
#include "cli/custom_rules.h"
#include "cli/output.h"
#include "cli/report_providers.h"
#include "store/run_reader.h"

namespace trainprof::cli {

namespace rules = analyze::rules;

namespace {

Status ListRules(const RulesOptions& options, std::ostream& out) {
  const auto specs = rules::RuleRegistry::Global().Specs();
  if (options.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& s : specs) {
      nlohmann::json params = nlohmann::json::array();
      for (const auto& p : s.params) {
        params.push_back(
            {{"name", p.name}, {"default", p.default_value}, {"description", p.description}});
      }
      list.push_back({{"name", s.name},
                      {"sagemaker", s.sagemaker},
                      {"description", s.description},
                      {"parameters", params}});
    }
    out << DumpJson(nlohmann::json{{"rules", list}}, 2) << "\n";
    return OkStatus();
  }
  for (const auto& s : specs) {
    out << s.name << (s.sagemaker ? "  (SageMaker)" : "") << "\n  " << s.description << "\n";
    for (const auto& p : s.params) {
      out << "    " << p.name << " = " << DumpJson(p.default_value) << "  " << p.description
          << "\n";
    }
  }
  return OkStatus();
}

void PrintText(const std::vector<rules::RuleResult>& results, std::ostream& out) {
  std::vector<std::vector<std::string>> rows = {
      {"RULE", "TRIGGERED", "VIOLATIONS", "DATAPOINTS", "FINDINGS"}};
  for (const auto& r : results) {
    rows.push_back({r.name, r.triggered ? "yes" : "no", std::to_string(r.violations),
                    std::to_string(r.datapoints), std::to_string(r.findings.size())});
  }
  PrintTable(out, rows);
  bool any = false;
  for (const auto& r : results) {
    for (const auto& f : r.findings) {
      if (!any) out << "\nFindings:\n";
      any = true;
      out << "\n[" << model::SeverityName(f.severity) << "] " << r.name << " — " << f.node
          << (f.device.empty() ? "" : "/" + f.device) << ", " << FormatIso8601(f.start_ns) << " ("
          << FormatDuration(f.end_ns - f.start_ns) << ")\n  " << f.message
          << "\n  what to do: " << f.recommendation << "\n";
      const std::string cost = model::FormatCostImpact(f);
      if (!cost.empty()) out << "  cost impact: " << cost << "\n";
    }
  }
  if (!any) out << "\nNo rule fired.\n";
}

// Custom rules go after the built-in ones; one named like a built-in rule is an error.
void MergeCustomResults(std::vector<rules::RuleResult> custom, std::vector<rules::RuleResult>* all,
                        std::vector<std::string>* errors) {
  for (auto& r : custom) {
    bool taken = false;
    for (const auto& b : *all) taken |= b.name == r.name;
    if (taken) {
      errors->push_back("custom rule " + r.name + ": a built-in rule has that name; rename it");
      continue;
    }
    all->push_back(std::move(r));
  }
}

// Findings stored in the run by rules not evaluated here (custom rules run by `record
// --custom-rule`, findings written live or imported) are listed too, one entry per rule, so
// that what `record` printed can be seen again. Their details say they come from the store.
void AddStoredOnlyRules(store::RunReader& reader, std::vector<rules::RuleResult>* results) {
  auto stored = reader.Findings();
  if (!stored.ok()) return;
  const size_t evaluated = results->size();
  for (const model::Finding& f : *stored) {
    auto it = std::find_if(results->begin(), results->end(),
                           [&](const rules::RuleResult& r) { return r.name == f.rule; });
    if (it != results->end() && static_cast<size_t>(it - results->begin()) < evaluated) continue;
    if (rules::RuleRegistry::Global().Find(f.rule).ok()) continue;  // a built-in not selected
    if (it == results->end()) {
      rules::RuleResult r;
      r.name = f.rule;
      r.triggered = true;
      r.details = {{"source", "findings stored in the run"}};
      results->push_back(std::move(r));
      it = results->end() - 1;
    }
    it->violations += 1;
    it->findings.push_back(f);
  }
}

Status CustomErrorsStatus(const std::vector<std::string>& errors) {
  if (errors.empty()) return OkStatus();
  std::string text;
  for (const std::string& e : errors) text += (text.empty() ? "" : "\n") + e;
  return Internal(std::to_string(errors.size()) + " custom rule problem(s):\n" + text);
}

}  // namespace

Status RunRules(const RulesOptions& options, std::ostream& out) {
  if (options.list) return ListRules(options, out);
  if (options.run.empty()) return InvalidArgument("rules: a run directory is required (or --list)");
  rules::RuleConfig config;
  if (!options.config_file.empty()) {
    TP_ASSIGN_OR_RETURN(config, rules::LoadRuleConfig(options.config_file));
  }
  // With custom rules, configuration entries and overrides naming no built-in rule are for
  // the custom ones.
  CustomRulesOptions custom;
  custom.files = options.custom;
  custom.python = options.python;
  rules::CustomRuleEntries custom_entries;
  if (!custom.files.empty()) {
    custom_entries = rules::TakeCustomRules(&config);
    custom.overrides = custom_entries.overrides;
    custom.required = custom_entries.names;
  }
  for (const std::string& o : options.overrides) {
    const std::string name = o.substr(0, o.find('.'));
    if (!custom.files.empty() && !rules::RuleRegistry::Global().Find(name).ok()) {
      custom.overrides.push_back(o);
      continue;
    }
    TP_RETURN_IF_ERROR(rules::ApplyParamOverride(o, &config));
  }
  TP_RETURN_IF_ERROR(ValidatePricing(options.pricing));
  if (!options.pricing.catalog.empty()) {
    // A catalog the user names must load; a run without a price is not an error (below).
    TP_RETURN_IF_ERROR(LoadCatalogForCli(options.pricing.catalog).status());
  }
  auto reader = store::RunReader::Open(options.run);
  if (!reader.ok()) return reader.status();
  // The cost model behind each finding's cost impact does not depend on the findings: with a
  // second core it runs on a second thread, with its own reader (a RunReader is used by one
  // thread), while the rules evaluate. What its reader meets is reported with the rest (below).
  FindingPricer pricer;
  std::vector<std::string> pricer_problems;
  std::jthread pricing;
  if (WorkerThreads() > 1) {
    pricing = std::jthread([&] {
      auto own = store::RunReader::Open(options.run);
      if (!own.ok()) {
        pricer.run_dir = options.run;
        pricer.why_not = own.status().message();
        return;
      }
      pricer = MakeFindingPricer(**own, options.pricing);
      pricer_problems = (*own)->problems();
    });
  }
  auto evaluated = rules::EvaluateRun(**reader, config);
  if (pricing.joinable()) {
    pricing.join();
  } else if (evaluated.ok()) {
    pricer = MakeFindingPricer(**reader, options.pricing);
  }
  if (!evaluated.ok()) return evaluated.status();
  auto engine = std::move(evaluated).value();
  auto results = engine->Results();
  std::vector<std::string> custom_errors;
  if (!custom.files.empty()) {
    TP_ASSIGN_OR_RETURN(CustomRulesOutcome outcome, RunCustomRules(options.run, custom));
    custom_errors = std::move(outcome.errors);
    MergeCustomResults(std::move(outcome.results), &results, &custom_errors);
  }
  // Each finding's cost impact, from the cost advisor (absent, with the reason, when the run
  // cannot be priced).
  pricer.Price(&results);
  std::vector<model::Finding> findings;
  for (const auto& r : results)
    findings.insert(findings.end(), r.findings.begin(), r.findings.end());
  // After collecting what this evaluation found: stored findings are not stored or acted on
  // again.
  AddStoredOnlyRules(**reader, &results);

  int64_t stored = -1;
  if (options.store) {
    TP_ASSIGN_OR_RETURN(stored, rules::StoreFindings(**reader, findings));
  }
  std::vector<rules::ActionOutcome> outcomes;
  if (options.run_actions) {
    rules::RuleConfig action_config = engine->config();
    for (auto& [rule, list] : custom_entries.actions) action_config.actions[rule] = list;
    rules::ActionRunner runner(action_config, nullptr);
    for (const auto& f : findings) runner.Submit(f);
    runner.Drain();
    outcomes = runner.TakeOutcomes();
  }

  if (options.json) {
    nlohmann::json j = rules::ResultsToJson(results);
    if (stored >= 0) j["stored_findings"] = stored;
    if (options.run_actions) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& o : outcomes) {
        list.push_back(
            {{"rule", o.rule}, {"action", o.action}, {"ok", o.ok}, {"detail", o.detail}});
      }
      j["actions"] = list;
    }
    if (!custom_errors.empty()) j["custom_rule_errors"] = custom_errors;
    out << DumpJson(j, 2) << "\n";
    return CustomErrorsStatus(custom_errors);
  }
  std::vector<std::string> problems = (*reader)->problems();
  for (const std::string& p : pricer_problems) {
    if (std::find(problems.begin(), problems.end(), p) == problems.end()) problems.push_back(p);
  }
  for (const std::string& p : problems) out << "warning: " << p << "\n";
  PrintText(results, out);
  if (stored >= 0) out << "\n" << stored << " new finding(s) stored in " << options.run << "\n";
  for (const auto& o : outcomes) {
    out << "action " << o.action << " for " << o.rule << ": " << (o.ok ? "" : "FAILED: ")
        << o.detail << "\n";
  }
  return CustomErrorsStatus(custom_errors);
}

void AddRulesCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<RulesOptions>();
  auto* cmd = app.add_subcommand("rules", "Evaluate the profiler rules on a run");
  cmd->add_option("run", opts->run, "Run directory");
  cmd->add_flag("--json", opts->json, "Print the results as JSON");
  cmd->add_option("--config", opts->config_file,
                  "Rule configuration (JSON): which rules, their parameters and actions");
  cmd->add_option("--rule", opts->overrides,
                  "Override a parameter of a built-in or custom rule: NAME.param=value "
                  "(repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--store", opts->store, "Store the findings in the run");
  cmd->add_flag("--run-actions", opts->run_actions,
                "Run the configured actions (command, webhook) for the findings");
  cmd->add_option("--custom", opts->custom,
                  "Python file with custom rules (trainprof.rules.Rule subclasses; repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--python", opts->python,
                  "Python interpreter for --custom (default: $TRAINPROF_PYTHON, the package's "
                  "environment, python3)");
  cmd->add_flag("--list", opts->list, "List the rules with their parameters and defaults");
  AddPricingOptions(cmd, &opts->pricing);
  cmd->callback([opts, action] { action->run = [opts] { return RunRules(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
