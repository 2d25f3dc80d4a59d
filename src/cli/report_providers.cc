#include "cli/report_providers.h"

#include <algorithm>
#include <map>

#include "analyze/cost/catalog.h"
#include "analyze/cost/cost_model.h"
#include "analyze/rules/evaluate.h"
#include "report/write_reports.h"
#include "store/run_reader.h"

namespace trainprof::cli {
namespace {

int SeverityRank(model::Severity s) { return static_cast<int>(s); }

report::RulesSection FromEngine(const std::vector<analyze::rules::RuleResult>& results) {
  report::RulesSection section;
  section.available = true;
  section.source = "rules engine";
  for (const auto& r : results) {
    report::RuleResult out;
    out.name = r.name;
    out.triggered = r.triggered;
    out.violations = r.violations;
    out.datapoints = r.datapoints;
    out.parameters_json = r.parameters.dump();
    int worst = -1;
    for (const model::Finding& f : r.findings) {
      if (SeverityRank(f.severity) > worst) {
        worst = SeverityRank(f.severity);
        out.severity = model::SeverityName(f.severity);
        out.recommendation = f.recommendation;
      }
      report::FindingView view;
      view.finding = f;
      out.findings.push_back(std::move(view));
    }
    section.rules.push_back(std::move(out));
  }
  return section;
}

report::CostSection FromCostReport(const cost::CostReport& c) {
  report::CostSection s;
  s.available = true;
  if (!c.nodes.empty()) {
    const cost::NodeCost& n = c.nodes.front();
    s.instance_type = n.instance_type;
    s.price_usd_per_hour = n.price.price_usd_per_hour;
    s.price_date = n.price.as_of;
    s.price_source = n.price.source;
  }
  for (const cost::PhaseCost& p : c.phases) s.cost_by_phase_usd.emplace_back(p.phase, p.cost_usd);
  s.total_usd = c.total_cost_usd;
  s.idle_accelerator_usd = c.idle_accelerator_cost_usd;
  s.cost_per_step_usd = c.steps.cost_per_step_usd;
  for (const cost::WhatIf& w : c.what_ifs) {
    report::WhatIf out;
    out.description = w.title + (w.action.empty() ? "" : " — " + w.action);
    out.cost_usd = w.new_cost_usd;
    out.saving_usd = w.saving_usd;
    s.what_ifs.push_back(std::move(out));
  }
  std::string note;
  for (const std::string& w : c.warnings) note += (note.empty() ? "" : " ") + w;
  s.note = note;
  return s;
}

StatusOr<cost::CostReport> ComputeRunCost(store::RunReader& reader) {
  TP_ASSIGN_OR_RETURN(cost::Catalog catalog, cost::LoadDefaultCatalog());
  return cost::ComputeCost(reader, catalog, cost::CostOptions{});
}

}  // namespace

report::RulesProvider RulesEngineProvider() {
  return [](store::RunReader& reader) -> StatusOr<report::RulesSection> {
    TP_ASSIGN_OR_RETURN(auto engine, analyze::rules::EvaluateRun(reader, {}));
    report::RulesSection section = FromEngine(engine->Results());
    // Findings stored in the run by rules the engine does not evaluate (custom rules, findings
    // written live or imported) are shown too, grouped by rule.
    TP_ASSIGN_OR_RETURN(auto stored, reader.Findings());
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < section.rules.size(); ++i) index[section.rules[i].name] = i;
    for (const model::Finding& f : stored) {
      auto it = index.find(f.rule);
      if (it != index.end() && it->second < engine->Results().size()) continue;
      if (it == index.end()) {
        report::RuleResult r;
        r.name = f.rule;
        r.triggered = true;
        r.violations = 0;
        r.severity = model::SeverityName(f.severity);
        r.recommendation = f.recommendation;
        index[f.rule] = section.rules.size() + 1000000;  // marks "stored only"
        section.rules.push_back(std::move(r));
        it = index.find(f.rule);
      }
      report::RuleResult& r = section.rules.back().name == f.rule
                                  ? section.rules.back()
                                  : *std::find_if(section.rules.begin(), section.rules.end(),
                                                  [&](const auto& x) { return x.name == f.rule; });
      r.violations = r.violations.value_or(0) + 1;
      report::FindingView view;
      view.finding = f;
      r.findings.push_back(std::move(view));
    }
    return section;
  };
}

report::CostProvider CostAdvisorProvider() {
  return [](store::RunReader& reader, const report::Report&) -> StatusOr<report::CostSection> {
    auto c = ComputeRunCost(reader);
    if (!c.ok()) {
      report::CostSection s;
      s.note = "cost not computed: " + c.status().message();
      return s;
    }
    return FromCostReport(*c);
  };
}

void UseAnalyses(report::BuildOptions* build) {
  build->rules = RulesEngineProvider();
  build->cost = CostAdvisorProvider();
}

void FinishRecordedRun(const std::string& run_dir, std::ostream& out,
                       const CustomRulesOptions& custom) {
  auto reader = store::RunReader::Open(run_dir);
  if (!reader.ok()) {
    out << "trainprof: warning: cannot analyse the run: " << reader.status().message() << "\n";
    return;
  }
  // Rules: findings go into the run so that the report, `show` and the dashboard see them.
  auto engine = analyze::rules::EvaluateRun(**reader, {});
  if (engine.ok()) {
    std::vector<model::Finding> findings;
    int fired = 0;
    std::vector<analyze::rules::RuleResult> results = (*engine)->Results();
    if (!custom.files.empty()) {
      auto outcome = RunCustomRules(run_dir, custom);
      if (outcome.ok()) {
        for (const std::string& e : outcome->errors) out << "trainprof: warning: " << e << "\n";
        for (auto& r : outcome->results) {
          bool builtin = false;
          for (const auto& b : results) builtin |= b.name == r.name;
          if (builtin) {
            out << "trainprof: warning: custom rule " << r.name
                << " has the name of a built-in rule; not used\n";
            continue;
          }
          results.push_back(std::move(r));
        }
      } else {
        out << "trainprof: warning: custom rules not evaluated: " << outcome.status().message()
            << "\n";
      }
    }
    for (const auto& r : results) {
      findings.insert(findings.end(), r.findings.begin(), r.findings.end());
      if (!r.triggered) continue;
      ++fired;
      out << "trainprof: rule " << r.name << " fired (" << r.violations << " violation"
          << (r.violations == 1 ? "" : "s") << ")";
      if (!r.findings.empty()) out << ": " << r.findings.front().message;
      out << "\n";
      if (!r.findings.empty() && !r.findings.front().recommendation.empty()) {
        out << "           -> " << r.findings.front().recommendation << "\n";
      }
    }
    if (fired == 0) out << "trainprof: rules: nothing fired\n";
    auto stored = analyze::rules::StoreFindings(**reader, findings);
    if (!stored.ok()) {
      out << "trainprof: warning: storing findings: " << stored.status().message() << "\n";
    }
  } else {
    out << "trainprof: warning: rules not evaluated: " << engine.status().message() << "\n";
  }
  // Cost: only when the instance is known or recognised; otherwise say how to get it.
  auto fresh = store::RunReader::Open(run_dir);
  if (fresh.ok()) {
    auto c = ComputeRunCost(**fresh);
    if (c.ok()) {
      out << cost::CostSummaryLines(*c);
    } else {
      out << "trainprof: cost: " << c.status().message() << "\n";
    }
    report::WriteOptions options;
    UseAnalyses(&options.build);
    auto written = report::WriteReports(run_dir, options);
    if (written.ok()) {
      out << "trainprof: report " << run_dir << "/report.html (and report.json)\n";
    } else {
      out << "trainprof: warning: report not written: " << written.status().message() << "\n";
    }
  }
}

}  // namespace trainprof::cli
