// `trainprof analyze RUN --scaling RUN2 [RUN3...] [--json]`: scaling efficiency across runs of
// one job at different world sizes (src/analyze/scaling).

#include <ostream>

#include "analyze/scaling/scaling.h"
#include "cli/commands.h"
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

}  // namespace trainprof::cli
