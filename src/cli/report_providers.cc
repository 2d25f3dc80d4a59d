#include "cli/report_providers.h"

#include <algorithm>
#include <map>

#include "analyze/cost/catalog.h"
#include "analyze/cost/cost_model.h"
#include "analyze/cost/finding_cost.h"
#include "analyze/rules/evaluate.h"
#include "base/json_dump.h"
#include "cli/run_summary.h"
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
    out.parameters_json = DumpJson(r.parameters);
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

// The pricer for `reader`'s run: the shared one when it was made for this run, else a new one
// (kept in `shared` when given).
const FindingPricer& PricerFor(store::RunReader& reader,
                               const std::shared_ptr<FindingPricer>& shared, FindingPricer* local) {
  if (shared && (shared->report || !shared->why_not.empty()) && shared->run_dir == reader.dir()) {
    return *shared;
  }
  FindingPricer made = MakeFindingPricer(reader);
  if (shared) {
    *shared = std::move(made);
    return *shared;
  }
  *local = std::move(made);
  return *local;
}

}  // namespace

void FindingPricer::Price(model::Finding* f) const {
  if (report) {
    cost::PriceFinding(*report, catalog ? &*catalog : nullptr, f);
  } else {
    cost::MarkUnpriced("no price: " + why_not, f);
  }
}

void FindingPricer::Price(std::vector<analyze::rules::RuleResult>* results) const {
  for (auto& r : *results) {
    for (auto& f : r.findings) Price(&f);
  }
}

FindingPricer MakeFindingPricer(store::RunReader& reader, const PricingOptions& pricing) {
  FindingPricer p;
  p.run_dir = reader.dir();
  auto catalog = LoadCatalogForCli(pricing.catalog);
  if (!catalog.ok()) {
    p.why_not = "catalog: " + catalog.status().message();
    return p;
  }
  p.catalog = std::move(catalog).value();
  cost::CostOptions o;
  ApplyPricing(pricing, &o);
  auto c = cost::ComputeCost(reader, *p.catalog, o);
  if (c.ok()) {
    p.report = std::move(c).value();
  } else {
    p.why_not = c.status().message();
  }
  return p;
}

report::RulesProvider RulesEngineProvider(std::shared_ptr<FindingPricer> shared) {
  return [shared](store::RunReader& reader) -> StatusOr<report::RulesSection> {
    TP_ASSIGN_OR_RETURN(auto engine, analyze::rules::EvaluateRun(reader, {}));
    FindingPricer local;
    const FindingPricer& pricer = PricerFor(reader, shared, &local);
    std::vector<analyze::rules::RuleResult> results = engine->Results();
    pricer.Price(&results);
    report::RulesSection section = FromEngine(results);
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
      pricer.Price(&view.finding);
      r.findings.push_back(std::move(view));
    }
    return section;
  };
}

report::CostProvider CostAdvisorProvider(std::shared_ptr<FindingPricer> shared) {
  return
      [shared](store::RunReader& reader, const report::Report&) -> StatusOr<report::CostSection> {
        FindingPricer local;
        const FindingPricer& pricer = PricerFor(reader, shared, &local);
        if (!pricer.report) {
          report::CostSection s;
          s.note = "cost not computed: " + pricer.why_not;
          return s;
        }
        return FromCostReport(*pricer.report);
      };
}

void UseAnalyses(report::BuildOptions* build) {
  auto shared = std::make_shared<FindingPricer>();
  build->rules = RulesEngineProvider(shared);
  build->cost = CostAdvisorProvider(shared);
}

void FinishRecordedRun(const std::string& run_dir, std::ostream& out, LiveEvaluation* live,
                       const CustomRulesOptions& custom) {
  auto reader = store::RunReader::Open(run_dir);
  if (!reader.ok()) {
    out << "trainprof: warning: cannot analyse the run: " << reader.status().message() << "\n";
    return;
  }
  // Rules: findings go into the run so that the report, `show` and the dashboard see them.
  // Evaluated live while the job ran when `live` did; otherwise here, over the whole run.
  const analyze::rules::RuleEngine* evaluated = live ? live->Finish(out) : nullptr;
  StatusOr<std::unique_ptr<analyze::rules::RuleEngine>> engine =
      std::unique_ptr<analyze::rules::RuleEngine>();
  if (evaluated == nullptr) {
    engine =
        analyze::rules::EvaluateRun(**reader, live ? live->config() : analyze::rules::RuleConfig{});
    if (engine.ok()) evaluated = engine->get();
  }
  std::vector<analyze::rules::RuleResult> results;
  if (evaluated != nullptr) {
    results = evaluated->Results();
    std::vector<model::Finding> findings;
    std::optional<StatusOr<CustomRulesOutcome>> custom_outcome;
    if (live != nullptr) {
      custom_outcome = live->FinishCustom(run_dir, out);
    } else if (!custom.files.empty()) {
      custom_outcome = RunCustomRules(run_dir, custom);
    }
    if (custom_outcome) {
      auto& outcome = *custom_outcome;
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
    for (const auto& r : results)
      findings.insert(findings.end(), r.findings.begin(), r.findings.end());
    auto stored = analyze::rules::StoreFindings(**reader, findings);
    if (!stored.ok()) {
      out << "trainprof: warning: storing findings: " << stored.status().message() << "\n";
    }
  } else {
    out << "trainprof: warning: rules not evaluated: " << engine.status().message() << "\n";
  }
  // Cost (read after the findings are stored: the what-ifs cite them), then the rules that
  // fired with their cost impact. The cost is shown only when the instance is known or
  // recognised; otherwise say how to get it.
  auto fresh = store::RunReader::Open(run_dir);
  std::optional<FindingPricer> pricer;
  if (fresh.ok()) pricer = MakeFindingPricer(**fresh);
  if (evaluated != nullptr) {
    if (pricer) pricer->Price(&results);
    int fired = 0;
    for (const auto& r : results) {
      if (!r.triggered) continue;
      ++fired;
      out << "trainprof: rule " << r.name << " fired (" << r.violations << " violation"
          << (r.violations == 1 ? "" : "s") << ")";
      if (!r.findings.empty()) out << ": " << r.findings.front().message;
      out << "\n";
      if (!r.findings.empty() && !r.findings.front().recommendation.empty()) {
        out << "           -> " << r.findings.front().recommendation << "\n";
      }
      // The cost impact: the first priced finding with its basis, and the sum over the rule's
      // priced findings when it has several.
      double usd = 0;
      int priced = 0;
      const model::Finding* first_priced = nullptr;
      for (const auto& f : r.findings) {
        if (f.cost_usd) {
          usd += *f.cost_usd;
          ++priced;
          if (first_priced == nullptr) first_priced = &f;
        }
      }
      if (first_priced != nullptr) {
        out << "           cost impact " << model::FormatCostImpact(*first_priced);
        if (r.findings.size() > 1) {
          out << "; all " << priced << " priced finding(s) of the rule: ≈ "
              << model::FormatUsd(usd);
        }
        out << "\n";
      } else if (pricer && pricer->report && !r.findings.empty() &&
                 !r.findings.front().cost_basis.empty()) {
        // Why this rule has no figure; when the run has no price at all, the cost line below
        // says why once.
        out << "           " << model::FormatCostImpact(r.findings.front()) << "\n";
      }
    }
    if (fired == 0) out << "trainprof: rules: nothing fired\n";
  }
  if (fresh.ok()) {
    // The run's summary for `trainprof fleet` (run_summary.h).
    if (pricer) {
      Status summary =
          WriteRunSummary(run_dir, pricer->report ? &*pricer->report : nullptr, pricer->why_not);
      if (!summary.ok()) {
        out << "trainprof: warning: summary.json not written: " << summary.message() << "\n";
      }
    }
    if (pricer && pricer->report) {
      out << cost::CostSummaryLines(*pricer->report);
    } else if (pricer) {
      out << "trainprof: cost: " << pricer->why_not << "\n";
    }
    report::WriteOptions options;
    if (pricer) {
      // The report reuses the cost computed here (matched by run directory).
      auto shared = std::make_shared<FindingPricer>(std::move(*pricer));
      options.build.rules = RulesEngineProvider(shared);
      options.build.cost = CostAdvisorProvider(shared);
    } else {
      UseAnalyses(&options.build);
    }
    auto written = report::WriteReports(run_dir, options);
    if (written.ok()) {
      out << "trainprof: report " << run_dir << "/report.html (and report.json)\n";
    } else {
      out << "trainprof: warning: report not written: " << written.status().message() << "\n";
    }
  }
}

}  // namespace trainprof::cli
