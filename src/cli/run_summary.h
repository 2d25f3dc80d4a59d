#pragma once
// summary.json: what `trainprof fleet` reads of a run instead of its metrics (docs/fleet.md).
// Written at the end of `record` and of the imports: run.json, the user who recorded or
// imported it, and the cost advisor's report exactly as `trainprof cost RUN --json` prints it
// (without the per-GPU detail), or why there is no cost. The Python fleet view
// (python/trainprof/_fleet_runs.py) writes the same file for runs that have none.

#include <string>

#include "analyze/cost/cost_model.h"
#include "base/status.h"

namespace trainprof::cli {

inline constexpr const char* kRunSummaryName = "summary.json";
inline constexpr int kRunSummaryVersion = 1;

// Writes run_dir/summary.json atomically. `report` null: no cost, and `why_not` says why.
Status WriteRunSummary(const std::string& run_dir, const cost::CostReport* report,
                       const std::string& why_not);
// Prices the run with the defaults of `trainprof cost` and writes its summary.
Status WriteRunSummaryFor(const std::string& run_dir);

}  // namespace trainprof::cli
