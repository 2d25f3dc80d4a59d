#pragma once
// Options and entry points of `trainprof cost` and `trainprof instances` (testable without
// argv), plus the catalog loading both share.

#include <optional>
#include <ostream>
#include <string>

#include "analyze/cost/catalog.h"
#include "analyze/cost/cost_model.h"
#include "base/status.h"

namespace CLI {
class App;
}

namespace trainprof::cli {

// How a run is priced: shared by `cost`, `rules` (findings' cost impact) and the report.
struct PricingOptions {
  std::string instance_type;
  std::optional<int> instances;
  bool spot = false;
  std::optional<double> price_usd_per_hour;
  std::optional<double> discount_pct;
  std::string catalog;  // a user file (merged) or a catalog directory (replaces)
  int64_t now_ns = 0;   // tests fix "today"
};
// Registers --instance-type, --instances, --spot, --price-usd-per-hour, --discount-pct and
// --catalog on `cmd`.
void AddPricingOptions(CLI::App* cmd, PricingOptions* pricing);
// Checks the values (clear errors naming the option).
Status ValidatePricing(const PricingOptions& pricing);
// Copies them into the cost advisor's options.
void ApplyPricing(const PricingOptions& pricing, cost::CostOptions* options);

struct CostCommandOptions : PricingOptions {
  std::string run;
  std::optional<double> volume_gb;
  double idle_threshold = 0.10;
  int max_price_age_days = 180;
  bool json = false;
};
Status RunCost(const CostCommandOptions& options, std::ostream& out);

struct InstancesOptions {
  std::string gpu;                  // substring of the accelerator model, case-insensitive ("A100")
  std::optional<double> max_price;  // $/h; rows without a price are left out
  std::string provider;             // aws, gcp, azure
  std::string service;              // sagemaker-training, ec2...
  std::string catalog;
  int max_price_age_days = 180;
  int64_t now_ns = 0;
  bool json = false;
  // price (default), gb ($ per GiB of accelerator memory per hour), fp32 / bf16 ($ per peak
  // dense TFLOP per hour); types without the figure come last.
  std::string sort = "price";
};
Status RunInstances(const InstancesOptions& options, std::ostream& out);

// The default catalog, then `catalog`: a directory replaces it, a file is merged into it.
StatusOr<cost::Catalog> LoadCatalogForCli(const std::string& catalog);

}  // namespace trainprof::cli
