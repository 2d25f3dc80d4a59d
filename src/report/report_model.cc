// BuildReport: reads a run once, section by section, and computes every number the report
// shows. Memory stays bounded on long runs because system metrics are read one series at a time.

#include "report/report_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/time.h"
#include "model/data_quality.h"
#include "model/event.h"
#include "report/report_operators.h"
#include "trainprof/version.h"

namespace trainprof::report {
namespace {

constexpr double kNsPerMs = 1e6;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A DataLoader's settings as the instrumentation annotates them fit in a few hundred bytes;
// a longer value is not parsed (an annotation is text anyone may have written).
constexpr size_t kMaxLoaderJson = 64 << 10;

// The median: the mean of the middle two of an even count (reorders `v`).
double Median(std::vector<double>& v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return (*std::max_element(v.begin(), mid) + *mid) / 2;
}

// The steps the training figures are about: the train steps when the run has any (an eval
// step's wait and parts are not the training loop's), else every step.
std::vector<char> TrainingSteps(const store::StepTable& steps) {
  std::vector<char> train(steps.size(), 0);
  bool any = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    train[i] = steps.modes.at(steps.mode[i]) == "train";
    any = any || train[i];
  }
  if (!any) std::fill(train.begin(), train.end(), 1);
  return train;
}

std::string UnitOf(const std::string& metric) {
  auto ends = [&](const std::string& suffix) {
    return metric.size() >= suffix.size() &&
           metric.compare(metric.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (metric == "process_cpu_utilization_ratio" || metric == "pid_cpu_utilization_ratio") {
    return "cores";
  }
  if (ends("_ratio")) return "ratio";
  if (ends("_bytes_per_second")) return "bytes_per_second";
  if (ends("_bytes")) return "bytes";
  if (ends("_watts")) return "watts";
  if (ends("_celsius")) return "celsius";
  return "";
}

// Display order of system metrics; others follow alphabetically.
int MetricRank(const std::string& metric) {
  static const char* kOrder[] = {
      "cpu_utilization_ratio",
      "cpu_iowait_ratio",
      "memory_used_bytes",
      "gpu_utilization_ratio",
      "gpu_memory_utilization_ratio",
      "gpu_memory_used_bytes",
      "gpu_power_watts",
      "network_receive_bytes_per_second",
      "network_transmit_bytes_per_second",
      "disk_read_bytes_per_second",
      "disk_write_bytes_per_second",
      "process_cpu_utilization_ratio",
      "process_resident_memory_bytes",
  };
  for (size_t i = 0; i < std::size(kOrder); ++i) {
    if (metric == kOrder[i]) return static_cast<int>(i);
  }
  return 1000;
}

// "cpu12" -> 12, for numeric device order; -1 when there is no trailing number.
int64_t DeviceNumber(const std::string& device) {
  size_t i = device.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(device[i - 1]))) --i;
  if (i == device.size()) return -1;
  return std::stoll(device.substr(i, 18));
}

bool DeviceLess(const std::string& a, const std::string& b) {
  size_t pa = a.find_last_not_of("0123456789"), pb = b.find_last_not_of("0123456789");
  std::string sa = a.substr(0, pa + 1), sb = b.substr(0, pb + 1);
  if (sa != sb) return sa < sb;
  return DeviceNumber(a) < DeviceNumber(b);
}

bool IsPerCore(const std::string& metric, const std::string& device) {
  return (metric == "cpu_utilization_ratio" || metric == "cpu_iowait_ratio") && device != "total";
}

std::string FormatPercent(double ratio) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f %%", ratio * 100);
  return buf;
}

struct TimeRange {
  int64_t start_ns = 0, end_ns = 0;
};

StatusOr<TimeRange> RunRange(store::RunReader& reader) {
  TimeRange r;
  const auto& m = reader.metadata();
  TP_ASSIGN_OR_RETURN(auto latest, reader.LatestTimestampNs());
  r.start_ns = m.start_ns;
  r.end_ns = m.end_ns ? *m.end_ns : (latest ? *latest : m.start_ns);
  if (latest && *latest > r.end_ns) r.end_ns = *latest;
  if (r.end_ns <= r.start_ns) r.end_ns = r.start_ns + 1;
  return r;
}

void BuildSummaryFacts(store::RunReader& reader, Report& report) {
  const auto& m = reader.metadata();
  Summary& s = report.summary;
  s.name = m.name;
  s.run_id = m.run_id;
  s.source = m.source;
  s.command = m.command;
  s.tags = m.tags;
  s.start_ns = m.start_ns;
  s.end_ns = m.end_ns;
  if (m.end_ns) s.duration_ns = *m.end_ns - m.start_ns;
  s.exit_status = m.exit_status;
  s.instance_type = m.instance_type;
  auto infos = reader.node_infos();
  s.node_count = static_cast<int>(infos.size());
  int cores = 0;
  bool cores_known = !infos.empty();
  for (const auto* n : infos) {
    s.gpu_count += static_cast<int>(n->gpus.size());
    if (n->cpu_cores) {
      cores += *n->cpu_cores;
    } else {
      cores_known = false;
    }
    if (s.instance_type.empty()) s.instance_type = n->instance_type;
  }
  if (cores_known) s.cpu_cores = cores;
}

Status BuildPhases(store::RunReader& reader, Report& report) {
  store::EventQuery q;
  q.categories = {model::kCategoryPhase};
  TP_ASSIGN_OR_RETURN(auto events, reader.Events(q));
  const auto& s = report.summary;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events.kind[i] != static_cast<uint8_t>(model::EventKind::kSpan)) continue;
    Phase p;
    p.name = events.names.at(events.name[i]);
    p.node = events.nodes.at(events.node[i]);
    p.start_ns = events.start_ns[i];
    p.duration_ns = events.duration_ns[i];
    if (s.duration_ns && *s.duration_ns > 0) {
      p.share_of_run = static_cast<double>(p.duration_ns) / static_cast<double>(*s.duration_ns);
    }
    report.phases.push_back(std::move(p));
  }
  std::sort(report.phases.begin(), report.phases.end(),
            [](const Phase& a, const Phase& b) { return a.start_ns < b.start_ns; });
  return OkStatus();
}

struct GpuTotals {
  int64_t samples = 0, idle = 0;
  double sum = 0;
};

Status BuildSystemUsage(store::RunReader& reader, const TimeRange& range,
                        const BuildOptions& options, Report& report, GpuTotals& gpu) {
  TP_ASSIGN_OR_RETURN(auto all, reader.ListSeries());
  std::map<std::string, std::map<std::string, std::vector<std::string>>> by_node;
  for (const auto& ns : all) by_node[ns.node][ns.series.metric].push_back(ns.series.device);

  std::map<std::string, const model::NodeInfo*> infos;
  for (const auto* n : reader.node_infos()) infos[n->node] = n;

  const int columns = std::max(1, options.heatmap_columns);
  const int64_t bucket_ns =
      std::max<int64_t>(1, (range.end_ns - range.start_ns + columns - 1) / columns);
  std::set<std::string> nodes;
  for (const auto& [node, _] : by_node) nodes.insert(node);
  for (const auto& [node, _] : infos) nodes.insert(node);

  for (const std::string& node : nodes) {
    NodeUsage nu;
    nu.node = node;
    if (auto it = infos.find(node); it != infos.end()) {
      const auto* info = it->second;
      nu.hostname = info->hostname;
      nu.cpu_model = info->cpu_model;
      nu.instance_type = info->instance_type;
      nu.cpu_cores = info->cpu_cores;
      nu.memory_total_bytes = info->memory_total_bytes;
      for (const auto& g : info->gpus) nu.gpu_names.push_back(g.name);
    }
    auto& metrics = by_node[node];
    std::vector<std::string> names;
    for (const auto& [metric, _] : metrics) names.push_back(metric);
    std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      return MetricRank(a) < MetricRank(b);
    });
    std::vector<std::pair<std::string, std::vector<std::optional<double>>>> cpu_rows, gpu_rows;
    for (const std::string& metric : names) {
      MetricUsage mu;
      mu.metric = metric;
      mu.unit = UnitOf(metric);
      auto devices = metrics[metric];
      std::sort(devices.begin(), devices.end(), DeviceLess);
      for (const std::string& device : devices) {
        store::MetricQuery q;
        q.metrics = {metric};
        q.nodes = {node};
        q.devices = {device};
        TP_ASSIGN_OR_RETURN(auto table, reader.SystemMetrics(q));
        DeviceUsage du;
        du.device = device;
        const bool heat = (metric == "cpu_utilization_ratio" && device != "total") ||
                          metric == "gpu_utilization_ratio";
        if (!IsPerCore(metric, device)) {
          du.band = Downsample(table.timestamp_ns.data(), table.value.data(), table.size(),
                               range.start_ns, range.end_ns, options.chart_points);
        }
        if (heat) {
          std::vector<double> sum(static_cast<size_t>(columns), 0);
          std::vector<int64_t> count(static_cast<size_t>(columns), 0);
          for (size_t i = 0; i < table.size(); ++i) {
            if (std::isnan(table.value[i])) continue;
            int64_t b = (table.timestamp_ns[i] - range.start_ns) / bucket_ns;
            auto k = static_cast<size_t>(std::clamp<int64_t>(b, 0, columns - 1));
            sum[k] += table.value[i];
            ++count[k];
          }
          std::vector<std::optional<double>> row(static_cast<size_t>(columns));
          for (size_t k = 0; k < row.size(); ++k) {
            if (count[k] > 0) row[k] = sum[k] / static_cast<double>(count[k]);
          }
          (metric == "gpu_utilization_ratio" ? gpu_rows : cpu_rows)
              .emplace_back(device, std::move(row));
        }
        if (metric == "gpu_utilization_ratio") {
          for (double v : table.value) {
            if (std::isnan(v)) continue;
            ++gpu.samples;
            gpu.sum += v;
            if (v < kGpuIdleBelow) ++gpu.idle;
          }
        }
        du.stats = ComputeStats(table.value);
        mu.devices.push_back(std::move(du));
      }
      nu.metrics.push_back(std::move(mu));
    }
    // A node whose facts name no GPU but whose GPUs were measured (an import: SageMaker's
    // system files give utilisation per GPU, not the GPU's model) has those GPUs.
    if (nu.gpu_names.empty() && !gpu_rows.empty()) {
      for (const auto& [device, _] : gpu_rows)
        nu.gpu_names.push_back(device + " (model not recorded)");
      report.summary.gpu_count += static_cast<int>(gpu_rows.size());
    }
    nu.heatmap.start_ns = range.start_ns;
    nu.heatmap.bucket_ns = bucket_ns;
    nu.heatmap.columns = columns;
    for (auto* rows : {&cpu_rows, &gpu_rows}) {
      for (auto& [device, row] : *rows) {
        nu.heatmap.rows.push_back(device);
        nu.heatmap.cells.push_back(std::move(row));
      }
    }
    report.nodes.push_back(std::move(nu));
  }
  return OkStatus();
}

std::string ModeName(const std::string& mode) { return mode.empty() ? "unknown" : mode; }

void BuildTraining(const store::StepTable& steps, const TimeRange& range,
                   const BuildOptions& options, Report& report) {
  TrainingLoop& t = report.training;
  std::map<std::string, std::vector<size_t>> by_mode;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps.duration_ns[i] == model::kMissing) continue;
    by_mode[ModeName(steps.modes.at(steps.mode[i]))].push_back(i);
  }
  for (auto& [mode, rows] : by_mode) {
    ModeSteps ms;
    ms.mode = mode;
    ms.count = static_cast<int64_t>(rows.size());
    std::vector<int64_t> ts;
    std::vector<double> ms_values;
    ts.reserve(rows.size());
    ms_values.reserve(rows.size());
    std::sort(rows.begin(), rows.end(),
              [&](size_t a, size_t b) { return steps.start_ns[a] < steps.start_ns[b]; });
    for (size_t i : rows) {
      ms.total_ns += steps.duration_ns[i];
      ts.push_back(steps.start_ns[i]);
      ms_values.push_back(static_cast<double>(steps.duration_ns[i]) / kNsPerMs);
    }
    ms.series_ms = Downsample(ts.data(), ms_values.data(), ts.size(), range.start_ns, range.end_ns,
                              options.chart_points);
    std::vector<double> sorted = ms_values;
    ms.duration_ms = ComputeStats(sorted);
    std::sort(sorted.begin(), sorted.end());
    ms.histogram_ms = MakeHistogram(sorted, options.histogram_bins);
    if (ms.duration_ms.p50) {
      // A step is an outlier against the steps around it (blocks of kOutlierBlock steps in time
      // order): above the block's median + 5 scaled MADs and 20 % above that median, so that a
      // run whose steps slow down for good is not all "outliers" after the change.
      constexpr size_t kOutlierBlock = 100;
      std::vector<size_t> out;
      std::vector<double> thresholds, block, dev;
      for (size_t b = 0; b < ms_values.size(); b += kOutlierBlock) {
        size_t e = std::min(ms_values.size(), b + kOutlierBlock);
        block.assign(ms_values.begin() + static_cast<std::ptrdiff_t>(b),
                     ms_values.begin() + static_cast<std::ptrdiff_t>(e));
        const double med = Median(block);
        dev.clear();
        for (double v : block) dev.push_back(std::abs(v - med));
        const double threshold = std::max(med + 5 * 1.4826 * Median(dev), med * 1.2);
        thresholds.push_back(threshold);
        for (size_t k = b; k < e; ++k) {
          if (ms_values[k] > threshold) out.push_back(k);
        }
      }
      std::nth_element(thresholds.begin(),
                       thresholds.begin() + static_cast<std::ptrdiff_t>(thresholds.size() / 2),
                       thresholds.end());
      ms.outlier_above_ms = thresholds[thresholds.size() / 2];
      ms.outlier_count = static_cast<int64_t>(out.size());
      std::sort(out.begin(), out.end(),
                [&](size_t a, size_t b) { return ms_values[a] > ms_values[b]; });
      if (out.size() > 50) out.resize(50);
      std::sort(out.begin(), out.end(), [&](size_t a, size_t b) { return ts[a] < ts[b]; });
      for (size_t k : out) {
        size_t i = rows[k];
        StepRef r;
        r.node = steps.nodes.at(steps.node[i]);
        if (steps.rank[i] != model::kMissing) r.rank = steps.rank[i];
        if (steps.step[i] != model::kMissing) r.step = steps.step[i];
        r.start_ns = steps.start_ns[i];
        r.duration_ns = steps.duration_ns[i];
        ms.outliers.push_back(std::move(r));
      }
    }
    t.modes.push_back(std::move(ms));
  }
  std::optional<int64_t> train_total, eval_total;
  for (const auto& m : t.modes) {
    if (m.mode == "train") train_total = m.total_ns;
    if (m.mode == "eval") eval_total = m.total_ns;
  }
  if (train_total && eval_total && *eval_total > 0) {
    t.train_eval_ratio = static_cast<double>(*train_total) / static_cast<double>(*eval_total);
  }

  // Parts: over the training steps that recorded at least one part; "other" is what the parts
  // leave.
  const std::vector<char> training = TrainingSteps(steps);
  int64_t total = 0, wait = 0, fwd = 0, bwd = 0, opt = 0, other = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps.duration_ns[i] == model::kMissing || !training[i]) continue;
    int64_t parts[4] = {steps.data_wait_ns[i], steps.forward_ns[i], steps.backward_ns[i],
                        steps.optimizer_ns[i]};
    bool any = false;
    int64_t sum = 0;
    for (int64_t p : parts) {
      if (p != model::kMissing) {
        any = true;
        sum += p;
      }
    }
    if (!any) continue;
    total += steps.duration_ns[i];
    if (parts[0] != model::kMissing) wait += parts[0];
    if (parts[1] != model::kMissing) fwd += parts[1];
    if (parts[2] != model::kMissing) bwd += parts[2];
    if (parts[3] != model::kMissing) opt += parts[3];
    other += std::max<int64_t>(0, steps.duration_ns[i] - sum);
  }
  if (total > 0) {
    for (auto [name, ns] : {std::pair<const char*, int64_t>{"data_wait", wait},
                            {"forward", fwd},
                            {"backward", bwd},
                            {"optimizer", opt},
                            {"other", other}}) {
      t.parts.push_back({name, ns, static_cast<double>(ns) / static_cast<double>(total)});
    }
  }

  std::map<std::tuple<std::string, int64_t, std::string>, std::vector<double>> by_rank;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps.duration_ns[i] == model::kMissing) continue;
    by_rank[{steps.nodes.at(steps.node[i]), steps.rank[i], ModeName(steps.modes.at(steps.mode[i]))}]
        .push_back(static_cast<double>(steps.duration_ns[i]) / kNsPerMs);
  }
  for (auto& [key, values] : by_rank) {
    RankSteps r;
    r.node = std::get<0>(key);
    if (std::get<1>(key) != model::kMissing) r.rank = std::get<1>(key);
    r.mode = std::get<2>(key);
    r.duration_ms = ComputeStats(values);
    t.ranks.push_back(std::move(r));
  }
}

Status BuildDataLoader(store::RunReader& reader, const store::StepTable& steps,
                       const BuildOptions& options, Report& report) {
  DataLoader& d = report.data_loader;
  TP_ASSIGN_OR_RETURN(auto annotations, reader.Annotations());
  for (const auto& [node, a] : annotations) {
    std::string key = Lower(a.key);
    if (key.find("dataloader") == std::string::npos &&
        key.find("data_loader") == std::string::npos) {
      continue;
    }
    d.config.emplace_back(a.key, a.value);
    if (key.size() >= 11 && key.compare(key.size() - 11, 11, "num_workers") == 0) {
      try {
        d.workers = std::max<int64_t>(d.workers.value_or(0), std::stoll(a.value));
      } catch (...) {
        // A non-numeric worker count stays in the config table, unparsed.
      }
    } else if (!a.value.empty() && a.value.front() == '{' && a.value.size() <= kMaxLoaderJson) {
      // What the zero-code instrumentation writes: dataloader.<i> = {"num_workers": 2, ...}
      // for each DataLoader; the most workers any loader has.
      auto j = nlohmann::json::parse(a.value, nullptr, false);
      if (j.is_object() && j.contains("num_workers") && j["num_workers"].is_number_integer()) {
        d.workers = std::max<int64_t>(d.workers.value_or(0), j["num_workers"].get<int64_t>());
      }
    }
  }
  d.cpu_cores = report.summary.cpu_cores;
  std::vector<double> waits;
  int64_t wait_total = 0, step_total = 0;
  const std::vector<char> training = TrainingSteps(steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps.data_wait_ns[i] == model::kMissing || !training[i]) continue;
    waits.push_back(static_cast<double>(steps.data_wait_ns[i]) / kNsPerMs);
    if (steps.duration_ns[i] != model::kMissing) {
      wait_total += steps.data_wait_ns[i];
      step_total += steps.duration_ns[i];
    }
  }
  d.steps_with_wait = static_cast<int64_t>(waits.size());
  d.wait_ms = ComputeStats(waits);
  std::sort(waits.begin(), waits.end());
  d.wait_histogram_ms = MakeHistogram(waits, options.histogram_bins);
  if (step_total > 0)
    d.wait_share = static_cast<double>(wait_total) / static_cast<double>(step_total);

  std::string text;
  if (d.wait_share) {
    text = "Waiting for data takes " + FormatPercent(*d.wait_share) + " of training step time";
    text += *d.wait_share > 0.2 ? ": the data loader holds the accelerators back." : ".";
  } else {
    text = "No data_wait spans were recorded, so the loader's share of step time is not known.";
  }
  if (d.workers && d.cpu_cores) {
    text += " " + std::to_string(*d.workers) + " loader workers for " +
            std::to_string(*d.cpu_cores) + " cores";
    if (*d.workers < *d.cpu_cores / 2 && d.wait_share && *d.wait_share > 0.1) {
      text += ": there is room for more workers.";
    } else if (*d.workers > *d.cpu_cores) {
      text += ": more workers than cores, they compete for CPU.";
    } else {
      text += ".";
    }
  }
  d.assessment = text;
  return OkStatus();
}

// Picks what a finding's chart shows: the device's utilisation when the finding names a device.
std::string EvidenceMetric(const std::string& device) {
  if (device.rfind("gpu", 0) == 0) return "gpu_utilization_ratio";
  if (device.rfind("cpu", 0) == 0 || device == "total") return "cpu_utilization_ratio";
  return "";
}

Status AttachEvidence(store::RunReader& reader, const store::StepTable& steps,
                      const BuildOptions& options, RulesSection& rules) {
  for (auto& rule : rules.rules) {
    int charted = 0;
    for (auto& f : rule.findings) {
      if (!f.evidence.ts_ns.empty() || charted >= 3) continue;
      const auto& fd = f.finding;
      int64_t span = std::max<int64_t>(fd.end_ns - fd.start_ns, kNanosPerSecond);
      int64_t from = fd.start_ns - span / 2, to = fd.end_ns + span / 2;
      std::string metric = EvidenceMetric(fd.device);
      if (!metric.empty()) {
        store::MetricQuery q;
        q.metrics = {metric};
        q.devices = {fd.device};
        if (!fd.node.empty()) q.nodes = {fd.node};
        q.start_ns = from;
        q.end_ns = to;
        TP_ASSIGN_OR_RETURN(auto table, reader.SystemMetrics(q));
        f.evidence = Downsample(table.timestamp_ns.data(), table.value.data(), table.size(), from,
                                to, std::min(options.chart_points, 300));
        f.evidence_metric = metric;
        f.evidence_device = fd.device;
      } else {
        std::vector<int64_t> ts;
        std::vector<double> v;
        for (size_t i = 0; i < steps.size(); ++i) {
          if (steps.duration_ns[i] == model::kMissing) continue;
          if (steps.start_ns[i] < from || steps.start_ns[i] >= to) continue;
          if (!fd.node.empty() && steps.nodes.at(steps.node[i]) != fd.node) continue;
          ts.push_back(steps.start_ns[i]);
          v.push_back(static_cast<double>(steps.duration_ns[i]) / kNsPerMs);
        }
        f.evidence = Downsample(ts.data(), v.data(), ts.size(), from, to,
                                std::min(options.chart_points, 300));
        if (!f.evidence.ts_ns.empty()) f.evidence_metric = "step_duration_ms";
      }
      if (!f.evidence.ts_ns.empty()) ++charted;
    }
  }
  return OkStatus();
}

void BuildDataQuality(store::RunReader& reader, const std::map<std::string, int64_t>& counters,
                      Report& report) {
  DataQuality& dq = report.data_quality;
  const char* kKnown[] = {model::dq::kDroppedEvents,    model::dq::kDroppedSamples,
                          model::dq::kSamplingOverruns, model::dq::kParseErrors,
                          model::dq::kCorruptChunks,    model::dq::kWriteErrors,
                          model::dq::kClockSkewEvents};
  std::set<std::string> seen;
  for (const char* name : kKnown) {
    auto it = counters.find(name);
    // A counter nobody stored was never measured by this run's source: n/a, not 0... except
    // that the store writes only non-zero counters, so a run recorded by trainprof shows 0.
    std::optional<int64_t> value;
    if (it != counters.end())
      value = it->second;
    else if (report.summary.source == "record" || report.summary.source == "agent")
      value = 0;
    dq.counters.emplace_back(name, value);
    seen.insert(name);
  }
  for (const auto& [name, value] : counters) {
    if (!seen.count(name)) dq.counters.emplace_back(name, value);
  }
  dq.problems = reader.problems();
  for (const auto& node : report.nodes) {
    std::set<std::string> present;
    for (const auto& m : node.metrics) present.insert(m.metric);
    std::vector<std::string> expected = {"cpu_utilization_ratio",
                                         "cpu_iowait_ratio",
                                         "memory_used_bytes",
                                         "network_receive_bytes_per_second",
                                         "network_transmit_bytes_per_second",
                                         "disk_read_bytes_per_second",
                                         "disk_write_bytes_per_second"};
    if (!node.gpu_names.empty() || present.count("gpu_utilization_ratio")) {
      for (const char* g :
           {"gpu_utilization_ratio", "gpu_memory_used_bytes", "gpu_memory_utilization_ratio"}) {
        expected.push_back(g);
      }
    }
    for (const auto& e : expected) {
      if (!present.count(e)) dq.absent_metrics.push_back(node.node + ": " + e);
    }
  }
  if (report.nodes.empty()) dq.absent_metrics.push_back("all system metrics (no node stores)");
  if (report.training.modes.empty()) dq.absent_metrics.push_back("training steps (no step spans)");
}

void BuildVerdict(const GpuTotals& gpu, Report& report) {
  Summary& s = report.summary;
  if (gpu.samples > 0) {
    s.gpu_utilization_mean = gpu.sum / static_cast<double>(gpu.samples);
    s.gpu_idle_share = static_cast<double>(gpu.idle) / static_cast<double>(gpu.samples);
  }
  std::vector<std::string> sentences;
  std::string first;
  if (s.gpu_utilization_mean) {
    first = "GPUs were busy " + FormatPercent(*s.gpu_utilization_mean) +
            " of the time on average and idle (below " + FormatPercent(kGpuIdleBelow) + ") " +
            FormatPercent(*s.gpu_idle_share) + " of the time";
  } else {
    first = "No GPU utilisation was measured";
  }
  const auto& dl = report.data_loader;
  std::string bottleneck;
  if (dl.wait_share && *dl.wait_share > 0.2) {
    bottleneck = "the data loader is the bottleneck (" + FormatPercent(*dl.wait_share) +
                 " of step time is spent waiting for data)";
  } else if (s.gpu_utilization_mean && *s.gpu_utilization_mean < 0.5) {
    bottleneck = "the GPUs are underused";
  }
  sentences.push_back(first + (bottleneck.empty() ? "" : "; " + bottleneck) + ".");
  int triggered = 0;
  for (const auto& r : report.rules.rules) triggered += r.triggered ? 1 : 0;
  std::string second;
  if (report.rules.available) {
    second = std::to_string(triggered) + (triggered == 1 ? " rule" : " rules") + " fired";
  }
  if (report.cost.available && report.cost.total_usd) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "this run cost ≈ $%.2f", *report.cost.total_usd);
    second += (second.empty() ? "" : "; ") + std::string(buf);
    if (report.cost.idle_accelerator_usd) {
      std::snprintf(buf, sizeof(buf), " of which idle accelerators ≈ $%.2f",
                    *report.cost.idle_accelerator_usd);
      second += buf;
    }
  }
  if (!second.empty()) {
    second[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(second[0])));
    sentences.push_back(second + ".");
  }
  s.verdict = sentences[0] + (sentences.size() > 1 ? " " + sentences[1] : "");

  // Top changes: heuristics with numbers first when they are strong, then triggered rules by
  // severity and violations.
  std::vector<std::pair<double, Recommendation>> candidates;
  if (dl.wait_share && *dl.wait_share > 0.1) {
    std::string detail =
        "Waiting for data takes " + FormatPercent(*dl.wait_share) + " of training step time";
    if (dl.workers) detail += " with " + std::to_string(*dl.workers) + " loader workers";
    if (dl.cpu_cores) detail += " on " + std::to_string(*dl.cpu_cores) + " cores";
    // Advice that fits the machine: pinned memory and "accelerators" only where there is one.
    const bool has_gpu = s.gpu_count > 0 || gpu.samples > 0;
    detail += has_gpu ? ". Add loader workers, prefetch batches and pin host memory."
                      : ". Add loader workers (within the cores torch's operator threads leave "
                        "free) and prefetch batches, or make the per-sample work cheaper.";
    candidates.push_back(
        {3 + *dl.wait_share * 10,
         {has_gpu ? "Feed the accelerators faster" : "Feed the training loop faster", detail,
          "report heuristic"}});
  }
  if (s.gpu_utilization_mean && *s.gpu_utilization_mean < 0.5 &&
      !(dl.wait_share && *dl.wait_share > 0.2)) {
    candidates.push_back({(1 - *s.gpu_utilization_mean) * 5,
                          {"Give the GPUs more work",
                           "Mean GPU utilisation is " + FormatPercent(*s.gpu_utilization_mean) +
                               ". Raise the batch size or use fewer / smaller GPUs.",
                           "report heuristic"}});
  }
  for (const auto& m : report.training.modes) {
    if (m.count > 0 && m.outlier_count * 100 > m.count) {
      candidates.push_back(
          {1.0,
           {"Find the slow " + m.mode + " steps",
            std::to_string(m.outlier_count) + " of " + std::to_string(m.count) + " " + m.mode +
                " steps are outliers; see the training loop section for when they happened.",
            "report heuristic"}});
    }
  }
  for (const auto& r : report.rules.rules) {
    if (!r.triggered) continue;
    double weight = r.severity == "critical" ? 8 : r.severity == "warning" ? 4 : 1;
    weight += std::log1p(static_cast<double>(r.violations.value_or(1))) * 0.1;
    std::string detail = r.recommendation.empty() && !r.findings.empty()
                             ? r.findings.front().finding.message
                             : r.recommendation;
    candidates.push_back({weight, {r.name, detail, "rule " + r.name}});
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& c : candidates) {
    if (s.top_changes.size() >= 3) break;
    s.top_changes.push_back(std::move(c.second));
  }
}

}  // namespace

StatusOr<RulesSection> RulesFromStoredFindings(store::RunReader& reader) {
  TP_ASSIGN_OR_RETURN(auto findings, reader.Findings());
  RulesSection section;
  section.available = true;
  section.source = "stored findings";
  section.note =
      "Rules shown from the findings stored in the run; rules that did not fire, their "
      "parameters and datapoint counts are known only to the rules engine.";
  std::map<std::string, RuleResult> by_rule;
  for (auto& f : findings) {
    RuleResult& r = by_rule[f.rule];
    r.name = f.rule;
    r.triggered = true;
    r.violations = r.violations.value_or(0) + 1;
    if (r.recommendation.empty()) r.recommendation = f.recommendation;
    std::string sev = model::SeverityName(f.severity);
    auto rank = [](const std::string& s) { return s == "critical" ? 2 : s == "warning" ? 1 : 0; };
    if (r.severity.empty() || rank(sev) > rank(r.severity)) r.severity = sev;
    if (r.findings.size() < 50) r.findings.push_back({std::move(f), "", "", {}});
  }
  for (auto& [_, r] : by_rule) section.rules.push_back(std::move(r));
  return section;
}

CostSection CostNotAvailable() {
  CostSection c;
  c.note =
      "Cost not available: the cost advisor was not run for this report (run `trainprof cost "
      "RUN` once it is installed, or give the instance type).";
  return c;
}

StatusOr<Report> BuildReport(store::RunReader& reader, const BuildOptions& options) {
  Report report;
  report.generator = std::string("trainprof ") + kVersion;
  report.generated_ns = WallNowNs();
  report.run_dir = reader.dir();
  BuildSummaryFacts(reader, report);
  TP_ASSIGN_OR_RETURN(TimeRange range, RunRange(reader));
  TP_RETURN_IF_ERROR(BuildPhases(reader, report));
  GpuTotals gpu;
  TP_RETURN_IF_ERROR(BuildSystemUsage(reader, range, options, report, gpu));
  TP_ASSIGN_OR_RETURN(auto steps, reader.Steps());
  BuildTraining(steps, range, options, report);
  TP_RETURN_IF_ERROR(BuildOperators(reader, &report.operators));
  TP_RETURN_IF_ERROR(BuildPythonFunctions(reader, &report.python));
  TP_RETURN_IF_ERROR(BuildDataLoader(reader, steps, options, report));
  if (options.rules) {
    TP_ASSIGN_OR_RETURN(report.rules, options.rules(reader));
  } else {
    TP_ASSIGN_OR_RETURN(report.rules, RulesFromStoredFindings(reader));
  }
  TP_RETURN_IF_ERROR(AttachEvidence(reader, steps, options, report.rules));
  if (options.cost) {
    TP_ASSIGN_OR_RETURN(report.cost, options.cost(reader, report));
  } else {
    report.cost = CostNotAvailable();
  }
  if (options.scaling) {
    TP_ASSIGN_OR_RETURN(report.scaling, options.scaling(reader));
  }
  TP_ASSIGN_OR_RETURN(auto counters, reader.Counters());
  BuildDataQuality(reader, counters, report);
  BuildVerdict(gpu, report);
  return report;
}

}  // namespace trainprof::report
