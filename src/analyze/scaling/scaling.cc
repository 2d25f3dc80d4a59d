#include "analyze/scaling/scaling.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "analyze/stats/stats.h"
#include "model/event.h"

namespace trainprof::analyze::scaling {
namespace {

std::string Fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

StatusOr<RunThroughput> MeasureThroughput(store::RunReader& reader, const std::string& run,
                                          const ScalingOptions& options) {
  TP_ASSIGN_OR_RETURN(store::StepTable steps, reader.Steps());
  // Start times of each device's training steps.
  std::map<std::tuple<std::string, int64_t, int64_t>, std::vector<int64_t>> starts;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps.modes.at(steps.mode[i]) != "train") continue;
    if (steps.duration_ns[i] == model::kMissing) continue;
    starts[{steps.nodes.at(steps.node[i]), steps.rank[i], steps.pid[i]}].push_back(
        steps.start_ns[i]);
  }
  RunThroughput out;
  out.run = run;
  out.name = reader.metadata().name;
  const size_t skip = static_cast<size_t>(std::max<int64_t>(0, options.warmup_steps));
  std::vector<double> rates;
  for (auto& [key, t] : starts) {
    std::sort(t.begin(), t.end());
    if (t.size() < skip + 2) continue;
    const int64_t span = t.back() - t[skip];
    if (span <= 0) continue;
    DeviceRate d;
    std::tie(d.node, d.rank, d.pid) = key;
    d.steps = static_cast<int64_t>(t.size() - skip);
    d.steps_per_s = static_cast<double>(d.steps - 1) / (static_cast<double>(span) / 1e9);
    rates.push_back(d.steps_per_s);
    out.steps_per_s += d.steps_per_s;
    out.devices.push_back(std::move(d));
  }
  if (out.devices.empty()) {
    return FailedPrecondition(run + ": no device has 2 training steps after the first " +
                              std::to_string(skip) + " (--scaling compares training throughput)");
  }
  out.steps_per_s_per_device = stats::QuantileInPlace(rates, 0.5);
  return out;
}

ScalingResult CompareScaling(std::vector<RunThroughput> runs) {
  ScalingResult result;
  std::stable_sort(runs.begin(), runs.end(), [](const RunThroughput& a, const RunThroughput& b) {
    return a.devices.size() < b.devices.size();
  });
  for (auto& r : runs) result.rows.push_back({std::move(r), 0, 0, 0});
  if (result.rows.empty()) return result;
  const RunThroughput& base = result.rows[0].run;
  for (ScalingRow& row : result.rows) {
    row.ideal_speedup =
        static_cast<double>(row.run.devices.size()) / static_cast<double>(base.devices.size());
    row.speedup = base.steps_per_s > 0 ? row.run.steps_per_s / base.steps_per_s : 0;
    row.efficiency = base.steps_per_s_per_device > 0
                         ? row.run.steps_per_s_per_device / base.steps_per_s_per_device
                         : 0;
  }
  return result;
}

nlohmann::json ScalingToJson(const ScalingResult& result, const ScalingOptions& options) {
  nlohmann::json runs = nlohmann::json::array();
  for (const ScalingRow& row : result.rows) {
    nlohmann::json devices = nlohmann::json::array();
    for (const DeviceRate& d : row.run.devices) {
      devices.push_back(
          {{"node", d.node},
           {"rank", d.rank == model::kMissing ? nlohmann::json(nullptr) : nlohmann::json(d.rank)},
           {"pid", d.pid},
           {"steps", d.steps},
           {"steps_per_s", d.steps_per_s}});
    }
    runs.push_back({{"run", row.run.run},
                    {"name", row.run.name},
                    {"devices", row.run.devices.size()},
                    {"steps_per_s_per_device", row.run.steps_per_s_per_device},
                    {"steps_per_s", row.run.steps_per_s},
                    {"speedup", row.speedup},
                    {"ideal_speedup", row.ideal_speedup},
                    {"efficiency", row.efficiency},
                    {"per_device", devices}});
  }
  return {
      {"scaling",
       {{"baseline", result.rows.empty() ? nlohmann::json(nullptr)
                                         : nlohmann::json(result.rows[result.baseline].run.run)},
        {"unit", "training steps per second"},
        {"warmup_steps", options.warmup_steps},
        {"runs", runs}}}};
}

std::string ScalingText(const ScalingResult& result) {
  std::string out =
      "scaling efficiency (training steps/s per device against the run of fewest devices; the "
      "same per-device batch assumed)\n";
  out += "devices  steps/s/device  steps/s  speedup  ideal  efficiency  run\n";
  for (const ScalingRow& row : result.rows) {
    char line[256];
    std::snprintf(line, sizeof line, "%7zu  %14s  %7s  %7s  %5s  %10s  ", row.run.devices.size(),
                  Fixed(row.run.steps_per_s_per_device, 2).c_str(),
                  Fixed(row.run.steps_per_s, 2).c_str(), Fixed(row.speedup, 2).c_str(),
                  Fixed(row.ideal_speedup, 2).c_str(),
                  (Fixed(row.efficiency * 100, 1) + " %").c_str());
    out += line + row.run.run + "\n";
  }
  return out;
}

}  // namespace trainprof::analyze::scaling
