#include "analyze/cost/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <utility>

#include "analyze/cost/cost_usage.h"
#include "analyze/cost/what_if.h"
#include "base/time.h"
#include "model/event.h"

namespace trainprof::cost {
namespace {

using namespace cost_detail;  // NOLINT(google-build-using-namespace): this module's own helpers

constexpr double kSecondsPerMonth = 730.0 * 3600.0;  // NOTES.md 5.1: 730 h per month

bool IsSageMakerShaped(const model::RunMetadata& run, const model::NodeInfo* node) {
  static const std::regex kAlgo("algo-[0-9]+");
  if (node != nullptr &&
      (std::regex_match(node->node, kAlgo) || std::regex_match(node->hostname, kAlgo))) {
    return true;
  }
  std::string src = run.source;
  std::transform(src.begin(), src.end(), src.begin(), ::tolower);
  return src.find("smdebug") != std::string::npos || src.find("sagemaker") != std::string::npos ||
         run.instance_type.rfind("ml.", 0) == 0;
}

std::string TodayDate(int64_t now_ns) { return FormatIso8601(now_ns).substr(0, 10); }

std::optional<double> ParseNumber(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < 0) {
    return std::nullopt;
  }
  return v;
}

std::string Money(double usd) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "$%.2f", usd);
  return buf;
}

StatusOr<PriceUsed> PriceFor(const Catalog& catalog, const InstanceType* row,
                             const std::string& type, const CostOptions& options, bool spot,
                             int64_t now_ns) {
  PriceUsed p;
  p.instance_type = row ? row->instance_type : type;
  if (row) {
    p.provider = row->provider;
    p.service = row->service;
    p.region = row->region;
    p.list_price_usd_per_hour = row->price_usd_per_hour;
  }
  if (options.price_usd_per_hour) {
    p.price_usd_per_hour = *options.price_usd_per_hour;
    p.basis = "price given with --price-usd-per-hour (taken as the price actually paid)";
    p.source = "user (--price-usd-per-hour)";
    p.as_of = TodayDate(now_ns);
    return p;
  }
  if (row == nullptr) {
    return NotFound("instance type '" + type + "' is not in the catalog (" + catalog.origin +
                    "); pass --price-usd-per-hour, or --catalog FILE with its row");
  }
  if (!row->price_usd_per_hour) {
    return NotFound("the catalog has no price for " + row->instance_type + " (" + row->origin +
                    (row->notes.empty() ? "" : "; " + row->notes) + "); pass --price-usd-per-hour");
  }
  p.price_usd_per_hour = *row->price_usd_per_hour;
  p.basis = row->price_basis.empty() ? "catalog on-demand price" : row->price_basis;
  p.source = row->price_source;
  p.as_of = row->price_as_of;
  if (spot) {
    std::string basis;
    double d = 0;
    p.price_usd_per_hour = SpotPriceUsdPerHour(catalog, *row, &d, &basis);
    p.spot_discount_pct = d;
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.1f", d);
    if (row->spot_price_usd_per_hour) {
      p.basis += "; spot: " + basis + ", " + std::string(buf) + " % off";
    } else {
      p.basis += "; managed spot, estimated at " + std::string(buf) + " % off (" + basis +
                 "); SageMaker reports the real saving per job";
    }
    if (row->spot_discount_pct || row->spot_price_usd_per_hour) {
      p.spot_source = row->spot_source;
      p.spot_as_of = row->spot_as_of;
    }
  }
  if (options.discount_pct) {
    p.discount_pct = *options.discount_pct;
    p.price_usd_per_hour *= 1 - *options.discount_pct / 100;
    p.basis += "; less the negotiated / savings-plan discount given with --discount-pct";
  }
  return p;
}

struct NodeInputs {
  std::string name;
  const model::NodeInfo* info = nullptr;
  std::vector<Span> phases;
};

std::string Plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The recorded hardware of a node against its instance label. Only where the node has host
// facts (cores) and the label is a catalog row: an import without host facts compares nothing.
// GPUs count as recorded when the node lists them or sampled them.
void CompareRecordedHardware(const model::NodeInfo* info, NodeCost* nc) {
  if (info == nullptr || !info->cpu_cores) return;
  nc->recorded_cpu_cores = *info->cpu_cores;
  int sampled = static_cast<int>(nc->usage.gpus.size());
  nc->recorded_gpus = std::max(static_cast<int>(info->gpus.size()), sampled);
  const InstanceType& label = nc->instance;
  if (label.provider == "custom" || !label.vcpus) return;
  const int label_vcpus = static_cast<int>(std::lround(*label.vcpus));
  const int label_gpus = label.AcceleratorCount();
  if (label_vcpus == *nc->recorded_cpu_cores && label_gpus == *nc->recorded_gpus) return;
  const std::string recorded_gpus =
      *nc->recorded_gpus == 0 ? "no GPU" : Plural(*nc->recorded_gpus, "GPU", "GPUs");
  nc->hardware_mismatch =
      "node " + nc->node + ": labelled " + nc->instance_type + " (" +
      Plural(label_vcpus, "vCPU", "vCPUs") + ", " + Plural(label_gpus, "GPU", "GPUs") +
      ") but recorded on " + Plural(*nc->recorded_cpu_cores, "CPU core", "CPU cores") + " and " +
      recorded_gpus +
      ": the price is the label's, the measurements are the recorded machine's and are not "
      "mapped onto the label's hardware (check the instance type, or pass --instance-type)";
}

}  // namespace

ResolvedInstance ResolveInstance(const Catalog& catalog, const model::RunMetadata& run,
                                 const model::NodeInfo* node, const std::string& forced_type) {
  ResolvedInstance r;
  if (!forced_type.empty()) {
    r.instance_type = forced_type;
    r.source = "--instance-type";
  } else if (node != nullptr && !node->instance_type.empty()) {
    r.instance_type = node->instance_type;
    r.source = "node facts";
  } else if (!run.instance_type.empty()) {
    r.instance_type = run.instance_type;
    r.source = "run.json";
  } else if (node != nullptr) {
    Detection d = DetectInstance(catalog, *node, IsSageMakerShaped(run, node));
    r.instance_type = d.instance_type;
    r.source = "detected from the node's CPU/GPU facts (" + d.confidence + " confidence)";
    r.detection = std::move(d);
  }
  return r;
}

double CostOfRange(const CostReport& report, const std::string& node, int64_t start_ns,
                   int64_t end_ns) {
  double total = 0;
  for (const NodeCost& n : report.nodes) {
    if (!node.empty() && n.node != node) continue;
    int64_t a = std::max(start_ns, n.window_start_ns), b = std::min(end_ns, n.window_end_ns);
    if (b > a) total += n.rate_usd_per_second * static_cast<double>(b - a) / kNs;
  }
  return total;
}

double AcceleratorCostOfRange(const CostReport& report, const std::string& node, int accelerators,
                              int64_t start_ns, int64_t end_ns) {
  double total = 0;
  for (const NodeCost& n : report.nodes) {
    if ((!node.empty() && n.node != node) || !n.accelerator_usd_per_second) continue;
    int64_t a = std::max(start_ns, n.window_start_ns), b = std::min(end_ns, n.window_end_ns);
    if (b > a) {
      total += *n.accelerator_usd_per_second * accelerators * static_cast<double>(b - a) / kNs;
    }
  }
  return total;
}

StatusOr<CostReport> ComputeCost(store::RunReader& run, const Catalog& catalog,
                                 const CostOptions& options) {
  const int64_t now_ns = options.now_ns != 0 ? options.now_ns : WallNowNs();
  const model::RunMetadata& meta = run.metadata();
  CostReport report;
  report.run_dir = run.dir();
  report.run_id = meta.run_id;
  report.catalog_origin = catalog.origin;
  report.idle_threshold_ratio = options.idle_threshold_ratio;

  // --- Read what the cost needs, once. ---
  // One pass over the events for phases, steps and kernels (three queries read every chunk
  // three times: a quarter of a large import's time went to the summary's cost), without args.
  store::EventQuery event_query;
  event_query.categories = {model::kCategoryPhase,
                            model::kCategoryStep,
                            model::kCategoryDataWait,
                            model::kCategoryForward,
                            model::kCategoryBackward,
                            model::kCategoryOptimizer,
                            "kernel"};
  event_query.args = false;
  TP_ASSIGN_OR_RETURN(store::EventTable events, run.Events(event_query));
  const auto category_code = [&](const std::string& name) {
    const auto& values = events.categories.values();
    auto it = std::find(values.begin(), values.end(), name);
    return it == values.end() ? -1 : static_cast<int32_t>(it - values.begin());
  };
  const int32_t phase_category = category_code(model::kCategoryPhase);
  const int32_t kernel_category = category_code("kernel");
  std::map<std::string, std::vector<Span>> phases_by_node;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events.category[i] != phase_category ||
        events.kind[i] != static_cast<uint8_t>(model::EventKind::kSpan) ||
        events.duration_ns[i] <= 0) {
      continue;
    }
    phases_by_node[events.nodes.at(events.node[i])].push_back(
        {events.names.at(events.name[i]), events.start_ns[i],
         events.start_ns[i] + events.duration_ns[i]});
  }
  report.phases_from_spans = !phases_by_node.empty();

  store::MetricQuery mq;
  mq.metrics = {"cpu_utilization_ratio", "memory_used_bytes", "gpu_utilization_ratio",
                "gpu_memory_used_bytes", "gpu_memory_total_bytes"};
  TP_ASSIGN_OR_RETURN(store::MetricTable metrics, run.SystemMetrics(mq));
  std::map<std::string, SeriesMap> series;  // node -> (metric, device) -> samples
  for (size_t i = 0; i < metrics.size(); ++i) {
    const std::string& metric = metrics.metrics.at(metrics.metric[i]);
    const std::string& device = metrics.devices.at(metrics.device[i]);
    if (metric == "cpu_utilization_ratio" && device != "total") continue;
    series[metrics.nodes.at(metrics.node[i])][{metric, device}].push_back(
        {metrics.timestamp_ns[i], metrics.value[i]});
  }
  for (auto& [node, m] : series) {
    for (auto& [key, samples] : m) {
      std::sort(samples.begin(), samples.end(),
                [](const Sample& a, const Sample& b) { return a.ts_ns < b.ts_ns; });
    }
  }
  const store::StepTable steps = store::BuildSteps(events);  // as run.Steps() builds them
  TP_ASSIGN_OR_RETURN(auto annotations, run.Annotations());
  TP_ASSIGN_OR_RETURN(auto findings, run.Findings());
  {
    std::set<std::string> fired;
    for (const auto& f : findings) fired.insert(f.rule);
    report.rules_fired.assign(fired.begin(), fired.end());
  }

  // Keys from run.json tags, then annotations (the latest value wins).
  std::map<std::string, std::string> keys = meta.tags;
  std::set<std::string> epoch_marks;
  for (const auto& [node, a] : annotations) {
    keys[a.key] = a.value;
    if (a.key == kKeyEpoch) epoch_marks.insert(a.value);
  }
  auto key_number = [&](const char* key) -> std::optional<double> {
    auto it = keys.find(key);
    if (it == keys.end()) return std::nullopt;
    auto v = ParseNumber(it->second);
    if (!v)
      report.warnings.push_back("ignored " + std::string(key) + "='" + it->second +
                                "': not a non-negative number");
    return v;
  };
  const bool spot = options.spot || keys[kKeySpot] == "true";

  // --- The run's window. ---
  int64_t run_start = meta.start_ns;
  std::optional<int64_t> run_end = meta.end_ns;
  for (const auto& [node, spans] : phases_by_node) {
    for (const Span& s : spans) {
      if (run_start <= 0 || s.start_ns < run_start) run_start = s.start_ns;
    }
  }
  if (!run_end) {
    TP_ASSIGN_OR_RETURN(auto latest, run.LatestTimestampNs());
    if (latest) {
      run_end = *latest;
      report.notes.push_back(
          "run.json has no end time (still running, or the recorder was "
          "killed): billed until the latest stored sample or event");
    }
  }
  if (run_start <= 0 || !run_end || *run_end <= run_start) {
    return FailedPrecondition(run.dir() +
                              ": the run has no usable start and end time in "
                              "run.json, phase spans or samples; nothing to bill");
  }
  if (!report.phases_from_spans) {
    report.notes.push_back(
        "the run has no phase spans: its start..end is billed as training (mark download / "
        "upload phases to see them billed separately)");
  }

  // --- Nodes and their instance types. ---
  std::vector<NodeInputs> inputs;
  for (const model::NodeInfo* info : run.node_infos()) {
    inputs.push_back({info->node, info, phases_by_node[info->node]});
  }
  if (inputs.empty()) {
    inputs.push_back({"(run)", nullptr, {}});
    report.notes.push_back("the run has no node stores: billed from run.json alone");
  }

  std::map<std::string, std::vector<double>> step_durations_by_mode;
  // Steps: train mode when present, else every step.
  std::string step_mode = "";
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps.modes.at(steps.mode[i]) == "train") step_mode = "train";
  }
  auto step_selected = [&](size_t i) {
    return step_mode.empty() || steps.modes.at(steps.mode[i]) == step_mode;
  };

  for (const NodeInputs& in : inputs) {
    NodeCost nc;
    nc.node = in.name;
    ResolvedInstance ri = ResolveInstance(catalog, meta, in.info, options.instance_type);
    if (ri.instance_type.empty()) {
      std::string why = ri.detection && !ri.detection->reasons.empty()
                            ? ri.detection->reasons.back()
                            : "no node facts";
      return NotFound("no instance type for node '" + in.name +
                      "': run.json names none and detection failed (" + why +
                      "); pass --instance-type");
    }
    nc.instance_type = ri.instance_type;
    nc.instance_source = ri.source;
    nc.detection = ri.detection;
    const InstanceType* row = FindInstance(catalog, ri.instance_type);
    if (row) {
      nc.instance = *row;
    } else {
      nc.instance.instance_type = ri.instance_type;
      nc.instance.provider = "custom";
    }
    TP_ASSIGN_OR_RETURN(nc.price, PriceFor(catalog, row, ri.instance_type, options, spot, now_ns));

    // Billed window: the run's, widened to this node's phase spans.
    nc.window_start_ns = run_start;
    nc.window_end_ns = *run_end;
    for (const Span& s : in.phases) {
      nc.window_start_ns = std::min(nc.window_start_ns, s.start_ns);
      nc.window_end_ns = std::max(nc.window_end_ns, s.end_ns);
    }
    const int64_t window_ns = nc.window_end_ns - nc.window_start_ns;
    // Per second, no minimum (NOTES.md section 2.4): round the window up to whole seconds.
    nc.billed_seconds = (window_ns + kNanosPerSecond - 1) / kNanosPerSecond;
    const double price_per_s = nc.price.price_usd_per_hour / 3600.0;
    nc.compute_cost_usd = price_per_s * static_cast<double>(nc.billed_seconds);

    // ML storage volume: SageMaker training on EBS-only types.
    double storage_per_s = 0;
    if (nc.instance.IsSageMakerTraining()) {
      if (!nc.instance.local_nvme_gb) {
        nc.storage_basis =
            "unknown whether " + nc.instance_type + " has local NVMe; no storage volume billed";
      } else if (*nc.instance.local_nvme_gb > 0) {
        nc.storage_basis =
            "instance store (local NVMe): SageMaker provisions no ML storage "
            "volume (NOTES.md section 2.5)";
      } else if (const StoragePrice* sp = FindStorage(catalog, nc.instance.provider,
                                                      nc.instance.service, nc.instance.region)) {
        std::string basis;
        if (options.volume_gb) {
          nc.storage_volume_gb = options.volume_gb;
          basis = "--volume-gb";
        } else if (auto v = key_number(kKeyVolumeSizeGb)) {
          nc.storage_volume_gb = v;
          basis = "the run's volume_size_gb";
        } else {
          nc.storage_volume_gb = sp->default_volume_gb;
          basis = "SageMaker SDK default volume size (the run does not state VolumeSizeInGB)";
        }
        if (nc.storage_volume_gb) {
          storage_per_s = *nc.storage_volume_gb * sp->price_usd_per_gb_month / kSecondsPerMonth;
          char buf[256];
          std::snprintf(buf, sizeof(buf),
                        "%.0f GB gp2 ML storage volume (%s) at $%.3f per "
                        "GB-month, pro rata over 730 h",
                        *nc.storage_volume_gb, basis.c_str(), sp->price_usd_per_gb_month);
          nc.storage_basis =
              std::string(buf) + " (" + sp->price_source + ", " + sp->price_as_of + ")";
        }
      } else {
        nc.storage_basis = "no storage rate for " + nc.instance.provider + "/" +
                           nc.instance.region + " in the catalog; none billed";
      }
    }
    nc.storage_cost_usd = storage_per_s * static_cast<double>(nc.billed_seconds);
    nc.total_cost_usd = nc.compute_cost_usd + nc.storage_cost_usd;
    nc.rate_usd_per_second = price_per_s + storage_per_s;

    // Phases.
    std::vector<Segment> segs = Segments(in.phases, nc.window_start_ns, nc.window_end_ns);
    std::map<std::string, double> phase_s;
    for (const Segment& s : segs) {
      phase_s[s.phase] += static_cast<double>(s.end_ns - s.start_ns) / kNs;
    }
    // What per-second billing rounds up (under a second) is billed too: a phase of its own,
    // so that the phases add up to the node's bill.
    const double round_up_s =
        static_cast<double>(nc.billed_seconds * kNanosPerSecond - window_ns) / kNs;
    if (round_up_s > 0) phase_s[kPhaseRoundUp] += round_up_s;
    for (const auto& [phase, secs] : phase_s) {
      nc.phases.push_back({phase, secs, secs * nc.rate_usd_per_second});
    }
    std::sort(nc.phases.begin(), nc.phases.end(), [](const PhaseCost& a, const PhaseCost& b) {
      return PhaseOrder(a.phase) != PhaseOrder(b.phase) ? PhaseOrder(a.phase) < PhaseOrder(b.phase)
                                                        : a.phase < b.phase;
    });

    MeasureUsage(series[in.name], segs, window_ns, price_per_s, options, &nc, &report.warnings);

    // Steps on this node: first, last, and the time between them not inside any step.
    std::vector<std::pair<int64_t, int64_t>> step_spans;
    std::set<int64_t> ranks;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps.nodes.at(steps.node[i]) != in.name) continue;
      ranks.insert(steps.rank[i]);
      if (!step_selected(i)) continue;
      step_spans.push_back({steps.start_ns[i], steps.start_ns[i] + steps.duration_ns[i]});
    }
    if (!step_spans.empty()) {
      std::sort(step_spans.begin(), step_spans.end());
      nc.first_step_ns = step_spans.front().first;
      int64_t covered_end = step_spans.front().second, gaps = 0;
      for (const auto& [a, b] : step_spans) {
        if (a > covered_end) gaps += a - covered_end;
        covered_end = std::max(covered_end, b);
      }
      nc.last_step_end_ns = covered_end;
      nc.between_steps_seconds = static_cast<double>(gaps) / kNs;
    }
    nc.ranks = static_cast<int>(ranks.size());
    CompareRecordedHardware(in.info, &nc);
    if (!nc.hardware_mismatch.empty()) report.warnings.push_back(nc.hardware_mismatch);
    report.nodes.push_back(std::move(nc));
  }

  // --- Instance count: instances not recorded are assumed like the first node. ---
  int recorded = static_cast<int>(report.nodes.size());
  int count = options.instance_count.value_or(meta.instance_count.value_or(recorded));
  if (count < recorded) {
    report.warnings.push_back("instance count " + std::to_string(count) + " is below the " +
                              std::to_string(recorded) +
                              " recorded nodes; billing every "
                              "recorded node");
    count = recorded;
  }
  if (count > recorded && report.nodes.front().node == "(run)" && recorded == 1) {
    report.nodes.front().node = "instance-1";
  }
  for (int i = recorded; i < count; ++i) {
    NodeCost clone = report.nodes.front();
    clone.like_node = clone.node;
    clone.node = "instance-" + std::to_string(i + 1) + " (not recorded)";
    clone.assumed = true;
    clone.usage = Usage{};
    clone.idle_weighted_cost_usd.reset();
    clone.idle_threshold_cost_usd.reset();
    clone.idle_threshold_accelerator_seconds.reset();
    clone.idle_held_cost_usd.reset();
    clone.idle_threshold_cost_by_phase.clear();
    clone.between_steps_seconds.reset();
    report.nodes.push_back(std::move(clone));
  }
  if (count > recorded) {
    report.notes.push_back(std::to_string(count - recorded) + " of " + std::to_string(count) +
                           " instances were not recorded: billed like node " +
                           report.nodes.front().node + " (same type and window)");
  }
  report.instance_count = count;

  // --- Totals. ---
  std::map<std::string, PhaseCost> phases;
  std::set<std::string> stale_checked;
  double init_s = 0, init_cost = 0;
  bool init_from_phase = false, init_from_steps = false;
  std::optional<double> idle_w, idle_t, idle_h, idle_t_s;
  double between_s = 0, between_cost = 0;
  bool any_between = false;
  for (const NodeCost& n : report.nodes) {
    report.billed_instance_seconds += static_cast<double>(n.billed_seconds);
    report.compute_cost_usd += n.compute_cost_usd;
    report.storage_cost_usd += n.storage_cost_usd;
    report.total_cost_usd += n.total_cost_usd;
    report.cluster_rate_usd_per_second += n.rate_usd_per_second;
    for (const PhaseCost& p : n.phases) {
      PhaseCost& t = phases[p.phase];
      t.phase = p.phase;
      t.billed_seconds += p.billed_seconds;
      t.cost_usd += p.cost_usd;
      if (p.phase == "initialization") {
        init_s += p.billed_seconds;
        init_cost += p.cost_usd;
        init_from_phase = true;
      }
    }
    auto add = [](std::optional<double>& sum, const std::optional<double>& v) {
      if (v) sum = sum.value_or(0) + *v;
    };
    add(idle_w, n.idle_weighted_cost_usd);
    add(idle_t, n.idle_threshold_cost_usd);
    add(idle_h, n.idle_held_cost_usd);
    add(idle_t_s, n.idle_threshold_accelerator_seconds);
    if (n.between_steps_seconds) {
      any_between = true;
      between_s += *n.between_steps_seconds;
      between_cost += *n.between_steps_seconds * n.rate_usd_per_second;
    }
    if (!n.assumed && stale_checked.insert(n.instance_type).second &&
        n.price.source.rfind("user", 0) != 0) {
      for (auto& w : StalePriceWarnings(n.instance, now_ns, options.max_price_age_days)) {
        report.warnings.push_back(w);
      }
      if (n.price.spot_discount_pct) {
        for (auto& w : StaleSpotWarnings(n.instance, now_ns, options.max_price_age_days)) {
          report.warnings.push_back(w);
        }
      }
    }
    if (n.detection) {
      report.notes.push_back("node " + n.node + ": instance " + n.instance_type + " " +
                             n.instance_source + ": " + [&] {
                               std::string s;
                               for (const auto& r : n.detection->reasons) {
                                 s += (s.empty() ? "" : "; ") + r;
                               }
                               return s;
                             }());
    }
  }
  for (auto& [name, p] : phases) report.phases.push_back(p);
  std::sort(report.phases.begin(), report.phases.end(), [](const PhaseCost& a, const PhaseCost& b) {
    return PhaseOrder(a.phase) != PhaseOrder(b.phase) ? PhaseOrder(a.phase) < PhaseOrder(b.phase)
                                                      : a.phase < b.phase;
  });
  report.idle_accelerator_cost_usd = idle_w;
  report.idle_threshold_cost_usd = idle_t;
  report.idle_held_cost_usd = idle_h;
  if (idle_t_s) report.idle_threshold_accelerator_hours = *idle_t_s / 3600.0;

  // Initialisation: the phase spans when present, else billing start to the first step (less
  // any download before it).
  if (!init_from_phase) {
    for (const NodeCost& n : report.nodes) {
      if (!n.first_step_ns || n.assumed) continue;
      double dl = 0;
      for (const PhaseCost& p : n.phases) {
        if (p.phase == "download") dl += p.billed_seconds;
      }
      double s =
          std::max(0.0, static_cast<double>(*n.first_step_ns - n.window_start_ns) / kNs - dl);
      init_s += s;
      init_cost += s * n.rate_usd_per_second;
      init_from_steps = true;
    }
  }
  if (init_from_phase || init_from_steps) {
    report.initialization_seconds = init_s;
    report.initialization_cost_usd = init_cost;
    report.initialization_basis =
        init_from_phase ? "initialization phase spans"
                        : "from the start of billing to the first step, less download";
  }

  if (any_between) {
    report.steps.between_steps_seconds = between_s;
    report.steps.between_steps_cost_usd = between_cost;
  }
  FillStepCosts(steps, step_selected, step_mode, report.cluster_rate_usd_per_second,
                report.total_cost_usd, key_number, epoch_marks, &report.steps);

  // --- What-ifs. ---
  WhatIfEvidence ev;
  ev.findings = std::move(findings);
  {
    int64_t kernel_events = 0;
    // Per kernel name, once: -1 not yet known, else matmul (bit 0) and tensor-core (bit 1).
    std::vector<int8_t> kind(events.names.values().size(), -1);
    double all = 0, mm = 0, mm32 = 0;
    if (kernel_category >= 0) {
      for (size_t i = 0; i < events.size(); ++i) {
        if (events.category[i] != kernel_category) continue;
        ++kernel_events;
        double d = static_cast<double>(events.duration_ns[i]);
        size_t c = static_cast<size_t>(events.name[i]);
        if (kind[c] < 0) {
          const std::string& name = events.names.values()[c];
          kind[c] = static_cast<int8_t>((IsMatmulKernel(name) ? 1 : 0) |
                                        (IsTensorCoreKernel(name) ? 2 : 0));
        }
        const bool matmul = (kind[c] & 1) != 0, tensor = (kind[c] & 2) != 0;
        all += d;
        if (matmul) {
          mm += d;
          if (!tensor) mm32 += d;
        }
      }
    }
    ev.kernel_events = kernel_events;
    if (all > 0) {
      ev.matmul_kernel_share = mm / all;
      ev.fp32_matmul_kernel_share = mm32 / all;
    }
  }
  const NodeCost& first = report.nodes.front();
  std::vector<int64_t> ckpt;
  for (const auto& [node, spans] : phases_by_node) {
    if (node != first.node) continue;
    for (const Span& s : spans) {
      if (s.name == "checkpoint") ckpt.push_back(s.start_ns);
    }
  }
  std::sort(ckpt.begin(), ckpt.end());
  ev.checkpoint_spans = static_cast<int>(ckpt.size());
  if (ckpt.size() >= 2) {
    std::vector<double> gaps;
    for (size_t i = 1; i < ckpt.size(); ++i)
      gaps.push_back(static_cast<double>(ckpt[i] - ckpt[i - 1]) / kNs);
    ev.checkpoint_interval_seconds = Percentile(gaps, 50);
  }
  for (const PhaseCost& p : first.phases) {
    if (p.phase == "download") ev.download_seconds += p.billed_seconds;
    if (p.phase == "initialization") ev.initialization_seconds += p.billed_seconds;
  }
  if (!init_from_phase && first.first_step_ns) {
    ev.initialization_seconds =
        std::max(0.0, static_cast<double>(*first.first_step_ns - first.window_start_ns) / kNs -
                          ev.download_seconds);
  }
  AddWhatIfs(catalog, options, ev, &report);
  (void)Money;
  return report;
}

}  // namespace trainprof::cost
