// `trainprof cost RUN`: what the run cost by phase as SageMaker bills it, what was wasted, and
// the ranked what-ifs. The work is in analyze/cost; this file parses options and prints.

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "analyze/cost/cost_model.h"
#include "base/files.h"
#include "cli/command.h"
#include "cli/cost_command.h"
#include "store/run_reader.h"

namespace trainprof::cli {

StatusOr<cost::Catalog> LoadCatalogForCli(const std::string& catalog) {
  if (!catalog.empty() && IsDirectory(catalog)) return cost::LoadCatalogDir(catalog);
  TP_ASSIGN_OR_RETURN(cost::Catalog c, cost::LoadDefaultCatalog());
  if (!catalog.empty()) TP_RETURN_IF_ERROR(cost::MergeInstancesFile(&c, catalog));
  return c;
}

Status ValidatePricing(const PricingOptions& options) {
  if (options.instances && *options.instances < 1) {
    return InvalidArgument("--instances must be at least 1");
  }
  if (options.discount_pct && (*options.discount_pct < 0 || *options.discount_pct >= 100)) {
    return InvalidArgument("--discount-pct must be in [0, 100)");
  }
  if (options.price_usd_per_hour && *options.price_usd_per_hour < 0) {
    return InvalidArgument("--price-usd-per-hour must not be negative");
  }
  return OkStatus();
}

void ApplyPricing(const PricingOptions& pricing, cost::CostOptions* o) {
  o->instance_type = pricing.instance_type;
  o->instance_count = pricing.instances;
  o->spot = pricing.spot;
  o->price_usd_per_hour = pricing.price_usd_per_hour;
  o->discount_pct = pricing.discount_pct;
  o->now_ns = pricing.now_ns;
}

void AddPricingOptions(CLI::App* cmd, PricingOptions* opts) {
  cmd->add_option("--instance-type", opts->instance_type,
                  "Instance type of every node (default: run.json, else detected)");
  cmd->add_option("--instances", opts->instances,
                  "Instance count (default: run.json, else the recorded nodes)");
  cmd->add_flag("--spot", opts->spot, "The job ran on managed spot (typical discount applied)");
  cmd->add_option("--price-usd-per-hour", opts->price_usd_per_hour,
                  "Price actually paid per instance-hour (overrides the catalog)");
  cmd->add_option("--discount-pct", opts->discount_pct,
                  "Negotiated / savings-plan discount off the catalog price, in percent");
  cmd->add_option("--catalog", opts->catalog,
                  "Your instance file (merged over the shipped catalog) or catalog directory");
}

Status RunCost(const CostCommandOptions& options, std::ostream& out) {
  TP_RETURN_IF_ERROR(ValidatePricing(options));
  TP_ASSIGN_OR_RETURN(cost::Catalog catalog, LoadCatalogForCli(options.catalog));
  TP_ASSIGN_OR_RETURN(auto run, store::RunReader::Open(options.run));
  cost::CostOptions o;
  ApplyPricing(options, &o);
  o.volume_gb = options.volume_gb;
  o.idle_threshold_ratio = options.idle_threshold;
  o.max_price_age_days = options.max_price_age_days;
  TP_ASSIGN_OR_RETURN(cost::CostReport report, cost::ComputeCost(*run, catalog, o));
  for (const auto& p : run->problems()) report.warnings.push_back("store: " + p);
  if (options.json) {
    out << cost::CostReportToJson(report) << "\n";
  } else {
    out << cost::CostReportToText(report);
    // Old prices are also said on stderr, where scripts piping the output still see them.
    for (const auto& w : report.warnings) {
      if (w.find("days old") != std::string::npos) std::cerr << "warning: " << w << "\n";
    }
  }
  return OkStatus();
}

void AddCostCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<CostCommandOptions>();
  auto* cmd = app.add_subcommand(
      "cost", "What a run cost by phase (as SageMaker bills it), what was wasted, and what-ifs");
  cmd->add_option("run", opts->run, "Run directory")->required();
  AddPricingOptions(cmd, opts.get());
  cmd->add_option("--volume-gb", opts->volume_gb,
                  "ML storage volume per instance (EBS-only types; default: the run's, else 30)");
  cmd->add_option("--idle-threshold", opts->idle_threshold,
                  "GPU utilisation ratio under which an accelerator counts as idle")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--max-price-age-days", opts->max_price_age_days,
                  "Warn when a price is older than this")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->callback([opts, action] { action->run = [opts] { return RunCost(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
