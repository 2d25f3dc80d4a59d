// `trainprof analyze RUN --scaling RUN2 [RUN3...] [--json]`: scaling efficiency across runs of
// one job at different world sizes (src/analyze/scaling).

#include <ostream>

#include "analyze/scaling/scaling.h"
#include "cli/commands.h"
#include "cli/report_providers.h"
#include "store/run_reader.h"

namespace trainprof::cli {

Status RunScaling(const AnalyzeOptions& options, std::ostream& out) {
  namespace sc = analyze::scaling;
  sc::ScalingOptions o;
  o.warmup_steps = options.warmup_steps;
  std::vector<std::string> runs = {options.run};
  runs.insert(runs.end(), options.scaling.begin(), options.scaling.end());
  std::vector<sc::RunThroughput> measured;
  for (const std::string& run : runs) {
    TP_ASSIGN_OR_RETURN(auto reader, store::RunReader::Open(run));
    TP_ASSIGN_OR_RETURN(sc::RunThroughput t, sc::MeasureThroughput(*reader, run, o));
    measured.push_back(std::move(t));
  }
  const sc::ScalingResult result = sc::CompareScaling(std::move(measured));
  if (options.json) {
    out << sc::ScalingToJson(result, o).dump(1) << "\n";
  } else {
    out << sc::ScalingText(result);
  }
  return OkStatus();
}

StatusOr<report::ScalingSection> ScalingSectionFor(const std::string& run, store::RunReader& reader,
                                                   const std::vector<std::string>& others,
                                                   int64_t warmup_steps) {
  namespace sc = analyze::scaling;
  sc::ScalingOptions o;
  o.warmup_steps = warmup_steps;
  std::vector<sc::RunThroughput> measured;
  TP_ASSIGN_OR_RETURN(sc::RunThroughput self, sc::MeasureThroughput(reader, run, o));
  measured.push_back(std::move(self));
  for (const std::string& other : others) {
    TP_ASSIGN_OR_RETURN(auto other_reader, store::RunReader::Open(other));
    TP_ASSIGN_OR_RETURN(sc::RunThroughput t, sc::MeasureThroughput(*other_reader, other, o));
    measured.push_back(std::move(t));
  }
  const sc::ScalingResult result = sc::CompareScaling(std::move(measured));
  report::ScalingSection section;
  section.available = true;
  section.warmup_steps = o.warmup_steps;
  for (size_t i = 0; i < result.rows.size(); ++i) {
    const sc::ScalingRow& row = result.rows[i];
    section.rows.push_back({.run = row.run.run,
                            .name = row.run.name,
                            .devices = static_cast<int64_t>(row.run.devices.size()),
                            .steps_per_s = row.run.steps_per_s,
                            .steps_per_s_per_device = row.run.steps_per_s_per_device,
                            .speedup = row.speedup,
                            .ideal_speedup = row.ideal_speedup,
                            .efficiency = row.efficiency,
                            .baseline = i == result.baseline,
                            .this_run = row.run.run == run});
  }
  return section;
}

}  // namespace trainprof::cli
