// Renderers of a CostReport: the `trainprof cost --json` contract and text for people.

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analyze/cost/cost_model.h"
#include "base/json_dump.h"
#include "base/time.h"

namespace trainprof::cost {
namespace {

using nlohmann::json;

json Opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::string Money(double usd) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), usd != 0 && std::abs(usd) < 0.01 ? "$%.4f" : "$%.2f", usd);
  return buf;
}
std::string Money(const std::optional<double>& usd) { return usd ? Money(*usd) : "n/a"; }

std::string Hours(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f h", seconds / 3600);
  return buf;
}

json PriceJson(const PriceUsed& p) {
  return {{"instance_type", p.instance_type},
          {"provider", p.provider},
          {"service", p.service},
          {"region", p.region},
          {"price_usd_per_hour", p.price_usd_per_hour},
          {"list_price_usd_per_hour", Opt(p.list_price_usd_per_hour)},
          {"basis", p.basis},
          {"source", p.source},
          {"as_of", p.as_of},
          {"spot_discount_pct", Opt(p.spot_discount_pct)},
          {"spot_source", p.spot_source.empty() ? json(nullptr) : json(p.spot_source)},
          {"spot_as_of", p.spot_as_of.empty() ? json(nullptr) : json(p.spot_as_of)},
          {"discount_pct", Opt(p.discount_pct)}};
}

json PhasesJson(const std::vector<PhaseCost>& phases) {
  json a = json::array();
  for (const PhaseCost& p : phases) {
    a.push_back(
        {{"phase", p.phase}, {"billed_seconds", p.billed_seconds}, {"cost_usd", p.cost_usd}});
  }
  return a;
}

}  // namespace

std::string CostReportToJson(const CostReport& r) {
  json j;
  j["run"] = r.run_dir;
  j["run_id"] = r.run_id;
  j["catalog"] = r.catalog_origin;
  const NodeCost* first = r.nodes.empty() ? nullptr : &r.nodes.front();
  j["instance_type"] = first ? first->instance_type : "";
  j["instance_count"] = r.instance_count;
  j["price"] = first ? PriceJson(first->price) : json(nullptr);
  json billed = json::object();
  for (const PhaseCost& p : r.phases) billed[p.phase] = p.billed_seconds;
  j["billed_seconds"] = billed;
  j["billed_instance_seconds"] = r.billed_instance_seconds;
  j["phases"] = PhasesJson(r.phases);
  j["phases_from_spans"] = r.phases_from_spans;
  j["compute_cost_usd"] = r.compute_cost_usd;
  j["storage_cost_usd"] = r.storage_cost_usd;
  j["total_cost_usd"] = r.total_cost_usd;
  j["idle_accelerator_cost_usd"] = Opt(r.idle_accelerator_cost_usd);
  json by_phase = json::object();
  for (const NodeCost& n : r.nodes) {
    for (const auto& [phase, usd] : n.idle_threshold_cost_by_phase) {
      by_phase[phase] = by_phase.value(phase, 0.0) + usd;
    }
  }
  j["idle_accelerator"] = {
      {"method",
       "utilisation-weighted: sum over GPUs and samples of (1 - utilisation) x "
       "seconds x price per accelerator-second"},
      {"cost_usd", Opt(r.idle_accelerator_cost_usd)},
      {"threshold_ratio", r.idle_threshold_ratio},
      {"below_threshold_cost_usd", Opt(r.idle_threshold_cost_usd)},
      {"below_threshold_accelerator_hours", Opt(r.idle_threshold_accelerator_hours)},
      {"below_threshold_held_memory_cost_usd", Opt(r.idle_held_cost_usd)},
      {"below_threshold_cost_usd_by_phase", by_phase}};
  j["initialization"] = {{"seconds", Opt(r.initialization_seconds)},
                         {"cost_usd", Opt(r.initialization_cost_usd)},
                         {"basis", r.initialization_basis}};
  const StepCosts& s = r.steps;
  j["cost_per_step_usd"] = Opt(s.cost_per_step_usd);
  j["steps"] = {{"count", s.steps},
                {"mode", s.mode},
                {"median_step_seconds", Opt(s.median_step_seconds)},
                {"p90_step_seconds", Opt(s.p90_step_seconds)},
                {"cost_per_step_usd", Opt(s.cost_per_step_usd)},
                {"cost_per_step_p90_usd", Opt(s.cost_per_step_p90_usd)},
                {"amortised_cost_per_step_usd", Opt(s.amortised_cost_per_step_usd)},
                {"samples_per_step", Opt(s.samples_per_step)},
                {"steps_per_epoch", Opt(s.steps_per_epoch)},
                {"epochs", Opt(s.epochs)},
                {"cost_per_epoch_usd", Opt(s.cost_per_epoch_usd)},
                {"amortised_cost_per_epoch_usd", Opt(s.amortised_cost_per_epoch_usd)},
                {"cost_per_1000_samples_usd", Opt(s.cost_per_1000_samples_usd)},
                {"amortised_cost_per_1000_samples_usd", Opt(s.amortised_cost_per_1000_samples_usd)},
                {"between_steps_instance_seconds", Opt(s.between_steps_seconds)},
                {"between_steps_cost_usd", Opt(s.between_steps_cost_usd)},
                {"data_wait_fraction", Opt(s.data_wait_fraction)}};
  json nodes = json::array();
  for (const NodeCost& n : r.nodes) {
    json gpus = json::array();
    for (const GpuUsage& g : n.usage.gpus) {
      gpus.push_back({{"device", g.device},
                      {"samples", g.samples},
                      {"mean_ratio", g.mean_ratio},
                      {"p5_ratio", g.p5_ratio},
                      {"p95_ratio", g.p95_ratio},
                      {"memory_peak_bytes", Opt(g.memory_peak_bytes)},
                      {"measured_seconds", g.measured_seconds},
                      {"idle_seconds", g.idle_seconds},
                      {"idle_held_seconds", g.idle_held_seconds}});
    }
    json node = {
        {"node", n.node},
        {"instance_type", n.instance_type},
        {"instance_source", n.instance_source},
        {"assumed", n.assumed},
        {"price", PriceJson(n.price)},
        {"window_start_ns", n.window_start_ns},
        {"window_end_ns", n.window_end_ns},
        {"billed_seconds", n.billed_seconds},
        {"phases", PhasesJson(n.phases)},
        {"compute_cost_usd", n.compute_cost_usd},
        {"storage_volume_gb", Opt(n.storage_volume_gb)},
        {"storage_basis", n.storage_basis},
        {"storage_cost_usd", n.storage_cost_usd},
        {"total_cost_usd", n.total_cost_usd},
        {"accelerators", n.instance.AcceleratorCount()},
        {"accelerator_usd_per_hour",
         n.accelerator_usd_per_second ? json(*n.accelerator_usd_per_second * 3600) : json(nullptr)},
        {"idle_accelerator_cost_usd", Opt(n.idle_weighted_cost_usd)},
        {"below_threshold_cost_usd", Opt(n.idle_threshold_cost_usd)},
        {"cpu_p95_ratio", Opt(n.usage.cpu_p95_ratio)},
        {"host_memory_peak_bytes", Opt(n.usage.host_memory_peak_bytes)},
        {"cpu_bound_fraction", Opt(n.usage.cpu_bound_fraction)},
        {"gpus", gpus}};
    if (n.detection) {
      node["detection"] = {{"instance_type", n.detection->instance_type},
                           {"confidence", n.detection->confidence},
                           {"reasons", n.detection->reasons},
                           {"alternatives", n.detection->alternatives}};
    }
    nodes.push_back(node);
  }
  j["nodes"] = nodes;
  json what_ifs = json::array();
  for (const WhatIf& w : r.what_ifs) {
    what_ifs.push_back({{"id", w.id},
                        {"title", w.title},
                        {"instance_type", w.instance_type},
                        {"new_cost_usd", w.new_cost_usd},
                        {"saving_usd", w.saving_usd},
                        {"saving_pct", w.saving_pct},
                        {"evidence", w.evidence},
                        {"assumptions", w.assumptions},
                        {"action", w.action}});
  }
  j["what_ifs"] = what_ifs;
  j["not_proposed"] = r.not_proposed;
  j["rules_fired"] = r.rules_fired;
  j["notes"] = r.notes;
  j["warnings"] = r.warnings;
  return DumpJson(j, 2);
}

std::string CostReportToText(const CostReport& r) {
  std::ostringstream out;
  out << "run " << r.run_dir << "\n";
  for (const NodeCost& n : r.nodes) {
    if (n.assumed) continue;
    out << "  node " << n.node << ": " << n.instance_type << " (" << n.instance_source << ") at "
        << Money(n.price.price_usd_per_hour) << "/h";
    if (!n.price.as_of.empty()) out << ", price of " << n.price.as_of;
    if (!n.price.spot_as_of.empty()) out << ", spot figure of " << n.price.spot_as_of;
    out << "\n    price: " << n.price.basis << "\n    source: " << n.price.source << "\n";
    if (!n.storage_basis.empty()) out << "    storage: " << n.storage_basis << "\n";
  }
  out << "  instances: " << r.instance_count << "    catalog: " << r.catalog_origin << "\n\n";
  out << "billed time by phase (instance-hours, as SageMaker bills: per second, no minimum)\n";
  for (const PhaseCost& p : r.phases) {
    char line[160];
    std::snprintf(line, sizeof(line), "  %-16s %10s %12s\n", p.phase.c_str(),
                  Hours(p.billed_seconds).c_str(), Money(p.cost_usd).c_str());
    out << line;
  }
  char line[200];
  std::snprintf(line, sizeof(line), "  %-16s %10s %12s   (compute %s, storage %s)\n", "total",
                Hours(r.billed_instance_seconds).c_str(), Money(r.total_cost_usd).c_str(),
                Money(r.compute_cost_usd).c_str(), Money(r.storage_cost_usd).c_str());
  out << line << "\n";
  out << "waste\n";
  out << "  idle accelerators (utilisation-weighted): " << Money(r.idle_accelerator_cost_usd)
      << "\n";
  if (r.idle_threshold_cost_usd) {
    std::snprintf(line, sizeof(line),
                  "  accelerators under %.0f %%: %.2f accelerator-hours, %s (%s with memory "
                  "held)\n",
                  r.idle_threshold_ratio * 100, r.idle_threshold_accelerator_hours.value_or(0),
                  Money(r.idle_threshold_cost_usd).c_str(), Money(r.idle_held_cost_usd).c_str());
    out << line;
  }
  if (r.initialization_seconds) {
    out << "  initialisation: "
        << FormatDuration(static_cast<int64_t>(*r.initialization_seconds * 1e9))
        << " instance-time, " << Money(r.initialization_cost_usd) << " (" << r.initialization_basis
        << ")\n";
  }
  const StepCosts& s = r.steps;
  if (s.between_steps_seconds) {
    out << "  between steps: "
        << FormatDuration(static_cast<int64_t>(*s.between_steps_seconds * 1e9))
        << " instance-time, " << Money(s.between_steps_cost_usd) << "\n";
  }
  out << "\nunit costs\n";
  if (s.steps > 0) {
    out << "  steps: " << s.steps << (s.mode.empty() ? "" : " (" + s.mode + ")") << "; per step "
        << Money(s.cost_per_step_usd) << " at the median step time (p90 "
        << Money(s.cost_per_step_p90_usd) << "), " << Money(s.amortised_cost_per_step_usd)
        << " amortised over the whole bill\n";
    out << "  per epoch: " << Money(s.cost_per_epoch_usd) << " measured, "
        << Money(s.amortised_cost_per_epoch_usd)
        << " amortised; per 1000 samples: " << Money(s.cost_per_1000_samples_usd) << " measured, "
        << Money(s.amortised_cost_per_1000_samples_usd) << " amortised\n";
    if (!s.samples_per_step) out << "  (annotate samples_per_step / steps_per_epoch for these)\n";
  } else {
    out << "  no steps recorded: cost per step n/a\n";
  }
  out << "\nwhat-ifs, ranked by saving\n";
  if (r.what_ifs.empty()) out << "  none with evidence\n";
  int i = 0;
  for (const WhatIf& w : r.what_ifs) {
    std::snprintf(line, sizeof(line), "  %d. %s\n     %s -> %s, saves %s (%.0f %%)\n", ++i,
                  w.title.c_str(), Money(r.total_cost_usd).c_str(), Money(w.new_cost_usd).c_str(),
                  Money(w.saving_usd).c_str(), w.saving_pct);
    out << line;
    for (const auto& e : w.evidence) out << "     evidence: " << e << "\n";
    for (const auto& a : w.assumptions) out << "     assumes: " << a << "\n";
    if (!w.action.empty()) out << "     change: " << w.action << "\n";
  }
  if (!r.not_proposed.empty()) {
    out << "\nnot proposed\n";
    for (const auto& n : r.not_proposed) out << "  - " << n << "\n";
  }
  if (!r.notes.empty()) {
    out << "\nnotes\n";
    for (const auto& n : r.notes) out << "  - " << n << "\n";
  }
  if (!r.warnings.empty()) {
    out << "\nwarnings\n";
    for (const auto& w : r.warnings) out << "  ! " << w << "\n";
  }
  return out.str();
}

std::string CostSummaryLines(const CostReport& r) {
  std::ostringstream out;
  const NodeCost* first = r.nodes.empty() ? nullptr : &r.nodes.front();
  out << "cost: " << Money(r.total_cost_usd) << " for " << Hours(r.billed_instance_seconds)
      << " of " << (first ? first->instance_type : "?") << " x" << r.instance_count;
  if (r.idle_accelerator_cost_usd)
    out << "; idle accelerators " << Money(r.idle_accelerator_cost_usd);
  out << "\n";
  if (first != nullptr) {
    // The price behind the figure, with its date and source.
    out << "  at " << Money(first->price.price_usd_per_hour) << "/h";
    if (!first->price.as_of.empty()) out << ", price of " << first->price.as_of;
    if (!first->price.spot_as_of.empty()) out << ", spot figure of " << first->price.spot_as_of;
    out << " (" << first->price.source << ")\n";
  }
  if (!r.what_ifs.empty()) {
    const WhatIf& w = r.what_ifs.front();
    out << "  best what-if: " << w.title << " (saves " << Money(w.saving_usd) << ")\n";
  }
  for (const auto& w : r.warnings) out << "  ! " << w << "\n";
  return out.str();
}

}  // namespace trainprof::cost
