#pragma once
// Scaling efficiency across runs of one job at different world sizes (`trainprof analyze RUN
// --scaling RUN2 ...`): each run's training throughput per device (a device = a process with
// training steps: a rank, or the one process of a job that is not distributed), compared with
// the run of the fewest devices. Efficiency = throughput per device / the smallest run's; 1.0 is
// linear scaling. Throughput is counted in training steps per second, so it compares samples
// only when each device's batch is the same in every run (weak scaling, how data-parallel jobs
// usually scale); a run whose per-device batch differs needs its figure rescaled by that ratio.
// Threads: plain functions.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/run_reader.h"

namespace trainprof::analyze::scaling {

struct ScalingOptions {
  int64_t warmup_steps = 5;  // first training steps of each device left out (compilation, caches)
};

struct DeviceRate {
  std::string node;
  int64_t rank = 0, pid = 0;  // rank: model::kMissing when the process has none
  int64_t steps = 0;          // steps counted (after warm-up)
  double steps_per_s = 0;     // (steps - 1) / (last step's start - first counted step's start)
};

struct RunThroughput {
  std::string run;   // as given
  std::string name;  // run.json's name
  std::vector<DeviceRate> devices;
  double steps_per_s_per_device = 0;  // median over devices
  double steps_per_s = 0;             // sum over devices (aggregate)
};

// Reads the run's training steps. A run without two training steps past the warm-up on any
// device is an error naming it.
StatusOr<RunThroughput> MeasureThroughput(store::RunReader& reader, const std::string& run,
                                          const ScalingOptions& options = {});

struct ScalingRow {
  RunThroughput run;
  double speedup = 0;        // aggregate throughput / the baseline's
  double ideal_speedup = 0;  // devices / the baseline's devices
  double efficiency = 0;     // per-device throughput / the baseline's (= speedup / ideal)
};

struct ScalingResult {
  std::vector<ScalingRow> rows;  // by devices, then in the order given
  size_t baseline = 0;           // index in rows: the fewest devices (the first given on a tie)
};

ScalingResult CompareScaling(std::vector<RunThroughput> runs);
nlohmann::json ScalingToJson(const ScalingResult& result, const ScalingOptions& options);
std::string ScalingText(const ScalingResult& result);

}  // namespace trainprof::analyze::scaling
