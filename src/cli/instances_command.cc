// `trainprof instances`: lists the instance catalog, with each price's date and source.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/json_dump.h"
#include "base/time.h"
#include "cli/command.h"
#include "cli/cost_command.h"
#include "cli/output.h"

namespace trainprof::cli {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// `digits` significant digits; 0: a whole number.
std::string Num(const std::optional<double>& v, int digits = 6) {
  if (!v) return "n/a";
  char buf[64];
  if (digits == 0) {
    std::snprintf(buf, sizeof(buf), "%.0f", *v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, *v);
  }
  return buf;
}

nlohmann::json Opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

Status RunInstances(const InstancesOptions& options, std::ostream& out) {
  TP_ASSIGN_OR_RETURN(cost::Catalog catalog, LoadCatalogForCli(options.catalog));
  const int64_t now = options.now_ns ? options.now_ns : WallNowNs();
  std::vector<const cost::InstanceType*> rows;
  for (const cost::InstanceType& t : catalog.instances) {
    if (!options.gpu.empty() &&
        Lower(t.accel_model).find(Lower(options.gpu)) == std::string::npos) {
      continue;
    }
    if (!options.provider.empty() && Lower(t.provider) != Lower(options.provider)) continue;
    if (!options.service.empty() && Lower(t.service) != Lower(options.service)) continue;
    if (options.max_price &&
        (!t.price_usd_per_hour || *t.price_usd_per_hour > *options.max_price)) {
      continue;
    }
    rows.push_back(&t);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    if (!a->price_usd_per_hour || !b->price_usd_per_hour) {
      return a->price_usd_per_hour.has_value() > b->price_usd_per_hour.has_value();
    }
    return *a->price_usd_per_hour < *b->price_usd_per_hour;
  });
  if (options.json) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto* t : rows) {
      auto age = cost::AgeDays(t->price_as_of, now);
      a.push_back({{"instance_type", t->instance_type},
                   {"provider", t->provider},
                   {"service", t->service},
                   {"region", t->region},
                   {"family", t->family},
                   {"vcpus", Opt(t->vcpus)},
                   {"memory_gib", Opt(t->memory_gib)},
                   {"accel_count",
                    t->accel_count ? nlohmann::json(*t->accel_count) : nlohmann::json(nullptr)},
                   {"accel_model", t->accel_model},
                   {"accel_mem_gib_each", Opt(t->accel_mem_gib_each)},
                   {"local_nvme_gb", Opt(t->local_nvme_gb)},
                   {"price_usd_per_hour", Opt(t->price_usd_per_hour)},
                   {"price_basis", t->price_basis},
                   {"price_source", t->price_source},
                   {"price_as_of", t->price_as_of},
                   {"price_age_days", age ? nlohmann::json(*age) : nlohmann::json(nullptr)},
                   {"price_stale", age && *age > options.max_price_age_days},
                   {"spot_discount_pct", Opt(t->spot_discount_pct)},
                   {"spot_interrupt_bucket", t->spot_interrupt_bucket},
                   {"spot_source", t->spot_source},
                   {"spot_as_of", t->spot_as_of},
                   {"confidence", t->confidence},
                   {"notes", t->notes},
                   {"origin", t->origin}});
    }
    out << DumpJson(nlohmann::json{{"catalog", catalog.origin}, {"instances", a}}, 2) << "\n";
    return OkStatus();
  }
  if (rows.empty()) {
    out << "no instance types match\n";
    return OkStatus();
  }
  std::vector<std::vector<std::string>> table = {{"TYPE", "SERVICE", "REGION", "VCPU", "MEM GIB",
                                                  "ACCELERATORS", "$/H", "$/ACCEL-H", "SPOT %",
                                                  "PRICE AS OF"}};
  int stale = 0;
  for (const auto* t : rows) {
    std::string accel = t->AcceleratorCount() > 0
                            ? std::to_string(t->AcceleratorCount()) + " x " + t->accel_model
                            : "-";
    std::optional<double> per_accel;
    if (t->price_usd_per_hour && t->AcceleratorCount() > 0) {
      per_accel = *t->price_usd_per_hour / t->AcceleratorCount();
    }
    auto age = cost::AgeDays(t->price_as_of, now);
    std::string as_of = t->price_as_of.empty() ? "n/a" : t->price_as_of;
    if (age && *age > options.max_price_age_days) {
      as_of += " (old)";
      ++stale;
    }
    table.push_back({t->instance_type, t->service, t->region, Num(t->vcpus), Num(t->memory_gib),
                     accel, Num(t->price_usd_per_hour, 5), Num(per_accel, 4),
                     Num(t->spot_discount_pct, 0), as_of});
  }
  PrintTable(out, table);
  out << "\n"
      << rows.size() << " types; catalog: " << catalog.origin
      << "\nprices are on-demand list prices; sources: trainprof instances --json\n";
  if (stale > 0) {
    out << "warning: " << stale << " price(s) are older than " << options.max_price_age_days
        << " days (marked 'old'): refresh the catalog or use --catalog with your prices\n";
  }
  return OkStatus();
}

void AddInstancesCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<InstancesOptions>();
  auto* cmd = app.add_subcommand("instances",
                                 "List the instance catalog (specs, dated prices and sources)");
  cmd->add_option("--gpu", opts->gpu, "Accelerator model contains this (A100, H100, L4...)");
  cmd->add_option("--max-price", opts->max_price, "At most this many $ per instance-hour");
  cmd->add_option("--provider", opts->provider, "aws, gcp or azure");
  cmd->add_option("--service", opts->service, "sagemaker-training, ec2, compute-engine...");
  cmd->add_option("--catalog", opts->catalog,
                  "Your instance file (merged over the shipped catalog) or catalog directory");
  cmd->add_option("--max-price-age-days", opts->max_price_age_days, "Mark prices older than this")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->callback(
      [opts, action] { action->run = [opts] { return RunInstances(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
