#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include "base/time.h"

#include "analyze/cost/catalog.h"
#include "analyze/cost/cost_model.h"
#include "base/json_dump.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace trainprof::cli {
namespace {

// A quick cost estimate for the listing: the catalog's price for run.json's instance type (its
// spot price when run.json's tag managed_spot is "true", as `trainprof cost` bills it) x the
// run's duration (whole seconds, rounded up) x its instances. Only runs that name their type get
// one (no store is opened); `trainprof cost` gives the bill by phase.
struct LsCost {
  std::string instance_type;
  std::optional<double> cost_usd;
  std::optional<double> price_usd_per_hour;
  bool spot = false;
  const cost::InstanceType* row = nullptr;  // the catalog row priced, with its date and source
};

class LsCostEstimator {
 public:
  LsCost Estimate(const store::RunSummary& r) {
    LsCost out;
    if (!r.error.empty()) return out;
    auto meta = store::ReadRunMetadata(r.dir);
    if (!meta.ok() || meta->instance_type.empty()) return out;
    out.instance_type = meta->instance_type;
    if (!r.duration_ns) return out;
    if (!catalog_loaded_) {
      catalog_loaded_ = true;
      auto c = cost::LoadDefaultCatalog();
      if (c.ok()) catalog_ = std::move(*c);
    }
    if (!catalog_) return out;
    const cost::InstanceType* t = cost::FindInstance(*catalog_, out.instance_type);
    if (t == nullptr || !t->price_usd_per_hour) return out;
    auto spot = meta->tags.find(cost::kKeySpot);
    out.spot = spot != meta->tags.end() && spot->second == "true";
    out.row = t;
    out.price_usd_per_hour = out.spot ? cost::SpotPriceUsdPerHour(*catalog_, *t, nullptr, nullptr)
                                      : *t->price_usd_per_hour;
    const int64_t secs = (*r.duration_ns + kNanosPerSecond - 1) / kNanosPerSecond;
    const int count = meta->instance_count.value_or(std::max(1, r.node_count));
    out.cost_usd = *out.price_usd_per_hour * static_cast<double>(secs) / 3600.0 * count;
    return out;
  }

 private:
  bool catalog_loaded_ = false;
  std::optional<cost::Catalog> catalog_;
};

std::string FormatUsd(const std::optional<double>& usd) {
  if (!usd) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "$%.2f", *usd);
  return buf;
}

}  // namespace

Status RunLs(const LsOptions& options, std::ostream& out) {
  TP_ASSIGN_OR_RETURN(auto runs, store::ListRuns(options.dir));
  LsCostEstimator estimator;
  std::vector<LsCost> costs;
  bool any_type = false;
  for (const auto& r : runs) {
    costs.push_back(estimator.Estimate(r));
    any_type |= !costs.back().instance_type.empty();
  }
  if (options.json) {
    nlohmann::json j = nlohmann::json::array();
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto& r = runs[i];
      nlohmann::json row;
      row["dir"] = r.dir;
      row["run_id"] = r.run_id;
      row["name"] = r.name;
      row["start_ns"] = r.start_ns ? nlohmann::json(*r.start_ns) : nlohmann::json(nullptr);
      row["duration_ns"] = r.duration_ns ? nlohmann::json(*r.duration_ns) : nlohmann::json(nullptr);
      row["exit_status"] = r.exit_status ? nlohmann::json(*r.exit_status) : nlohmann::json(nullptr);
      row["nodes"] = r.node_count;
      row["source"] = r.source;
      if (!r.error.empty()) row["error"] = r.error;
      row["instance_type"] = costs[i].instance_type;
      row["cost_usd_estimate"] =
          costs[i].cost_usd ? nlohmann::json(*costs[i].cost_usd) : nlohmann::json(nullptr);
      if (const cost::InstanceType* t = costs[i].row) {
        // The estimate's price with its date and source, as every price trainprof shows.
        nlohmann::json price = {{"usd_per_hour", *costs[i].price_usd_per_hour},
                                {"as_of", t->price_as_of},
                                {"source", t->price_source},
                                {"spot", costs[i].spot}};
        if (costs[i].spot) {
          price["spot_as_of"] = t->spot_as_of;
          price["spot_source"] = t->spot_source;
        }
        row["price"] = price;
      }
      j.push_back(row);
    }
    out << DumpJson(nlohmann::json{{"runs", j}}, 2) << "\n";
    return OkStatus();
  }
  if (runs.empty()) {
    out << "no runs in " << options.dir << "\n";
    return OkStatus();
  }
  std::vector<std::vector<std::string>> rows = {
      {"RUN", "NAME", "START (UTC)", "DURATION", "NODES", "EXIT", "SOURCE"}};
  if (any_type) {
    rows[0].push_back("INSTANCE");
    rows[0].push_back("COST (EST.)");
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    std::string exit = r.exit_status ? std::to_string(*r.exit_status) : "n/a";
    if (!r.error.empty()) exit = "unreadable: " + r.error;
    rows.push_back({r.dir, r.name, r.start_ns ? FormatIso8601(*r.start_ns) : "n/a",
                    r.duration_ns ? FormatDuration(*r.duration_ns) : "n/a",
                    std::to_string(r.node_count), exit, r.source});
    if (any_type) {
      rows.back().push_back(costs[i].instance_type.empty() ? "-" : costs[i].instance_type);
      rows.back().push_back(FormatUsd(costs[i].cost_usd));
    }
  }
  PrintTable(out, rows);
  if (any_type) {
    out << "COST (EST.): list price (spot price for runs tagged managed_spot=true) x duration x "
           "instances; 'trainprof cost RUN' for the bill by phase. Prices:\n";
    std::set<std::pair<std::string, bool>> shown;
    for (const LsCost& c : costs) {
      if (c.row == nullptr || !shown.insert({c.instance_type, c.spot}).second) continue;
      char price[64];
      std::snprintf(price, sizeof(price), "$%.4f/h", *c.price_usd_per_hour);
      out << "  " << c.instance_type << (c.spot ? " (spot)" : "") << ": " << price << ", price of "
          << c.row->price_as_of << " (" << c.row->price_source << ")";
      if (c.spot && !c.row->spot_as_of.empty()) {
        out << "; spot figure of " << c.row->spot_as_of << " (" << c.row->spot_source << ")";
      }
      out << "\n";
    }
  }
  return OkStatus();
}

void AddLsCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<LsOptions>();
  auto* cmd = app.add_subcommand("ls", "List runs in a directory (default ./trainprof-runs)");
  cmd->add_option("dir", opts->dir, "Directory holding run directories, or a run");
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->callback([opts, action] { action->run = [opts] { return RunLs(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
