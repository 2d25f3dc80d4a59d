// `trainprof instances`: lists the instance catalog, with each price's date and source.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
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

// What an hour of the type buys: per GiB of accelerator memory and per peak dense TFLOP (fp32 on
// CUDA cores, bf16 on tensor cores; accelerators.csv), each from the on-demand hourly price.
struct Value {
  std::optional<double> per_accel_hour, per_gib_hour, per_fp32_tflop_hour, per_bf16_tflop_hour;
};

Value ValueOf(const cost::Catalog& catalog, const cost::InstanceType& t) {
  Value v;
  const int n = t.AcceleratorCount();
  if (!t.price_usd_per_hour || n <= 0) return v;
  const double p = *t.price_usd_per_hour;
  v.per_accel_hour = p / n;
  const cost::Accelerator* a = cost::FindAccelerator(catalog, t.accel_model);
  std::optional<double> gib = t.accel_mem_gib_each;
  if (!gib && a) gib = a->memory_gib;
  if (gib && *gib > 0) v.per_gib_hour = p / (n * *gib);
  if (a && a->fp32_tflops && *a->fp32_tflops > 0) v.per_fp32_tflop_hour = p / (n * *a->fp32_tflops);
  if (a && a->bf16_tensor_tflops && *a->bf16_tensor_tflops > 0) {
    v.per_bf16_tflop_hour = p / (n * *a->bf16_tensor_tflops);
  }
  return v;
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
  std::map<const cost::InstanceType*, Value> values;
  for (const auto* t : rows) values[t] = ValueOf(catalog, *t);
  auto key = [&](const cost::InstanceType* t) -> std::optional<double> {
    const Value& v = values[t];
    if (options.sort == "gb") return v.per_gib_hour;
    if (options.sort == "fp32") return v.per_fp32_tflop_hour;
    if (options.sort == "bf16") return v.per_bf16_tflop_hour;
    return t->price_usd_per_hour;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const auto* a, const auto* b) {
    auto ka = key(a), kb = key(b);
    if (!ka || !kb) return ka.has_value() > kb.has_value();
    return *ka < *kb;
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
                   {"usd_per_accelerator_hour", Opt(values[t].per_accel_hour)},
                   {"usd_per_accelerator_gib_hour", Opt(values[t].per_gib_hour)},
                   {"usd_per_fp32_tflop_hour", Opt(values[t].per_fp32_tflop_hour)},
                   {"usd_per_bf16_tflop_hour", Opt(values[t].per_bf16_tflop_hour)},
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
    out << DumpJson(
               nlohmann::json{
                   {"catalog", catalog.origin}, {"sort", options.sort}, {"instances", a}},
               2)
        << "\n";
    return OkStatus();
  }
  if (rows.empty()) {
    out << "no instance types match\n";
    return OkStatus();
  }
  std::vector<std::vector<std::string>> table = {
      {"TYPE", "SERVICE", "REGION", "VCPU", "MEM GIB", "ACCELERATORS", "$/H", "$/ACCEL-H",
       "$/GIB-H", "$/FP32-TF-H", "$/BF16-TF-H", "SPOT %", "PRICE AS OF"}};
  int stale = 0;
  for (const auto* t : rows) {
    std::string accel = t->AcceleratorCount() > 0
                            ? std::to_string(t->AcceleratorCount()) + " x " + t->accel_model
                            : "-";
    const Value& v = values[t];
    auto age = cost::AgeDays(t->price_as_of, now);
    std::string as_of = t->price_as_of.empty() ? "n/a" : t->price_as_of;
    if (age && *age > options.max_price_age_days) {
      as_of += " (old)";
      ++stale;
    }
    table.push_back({t->instance_type, t->service, t->region, Num(t->vcpus), Num(t->memory_gib),
                     accel, Num(t->price_usd_per_hour, 5), Num(v.per_accel_hour, 4),
                     Num(v.per_gib_hour, 3), Num(v.per_fp32_tflop_hour, 3),
                     Num(v.per_bf16_tflop_hour, 3), Num(t->spot_discount_pct, 0), as_of});
  }
  PrintTable(out, table);
  out << "\n"
      << rows.size() << " types; catalog: " << catalog.origin
      << "\nprices are on-demand list prices; $/GIB-H and $/...-TF-H: the hourly price per GiB of "
         "accelerator memory and per peak dense TFLOP (accelerators.csv); sorted by "
      << options.sort << "; sources: trainprof instances --json\n";
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
  cmd->add_option("--sort", opts->sort,
                  "price ($ per hour, the default), gb ($ per GiB of accelerator memory), fp32 or "
                  "bf16 ($ per peak dense TFLOP)")
      ->check(CLI::IsMember({"price", "gb", "fp32", "bf16"}));
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->callback(
      [opts, action] { action->run = [opts] { return RunInstances(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
