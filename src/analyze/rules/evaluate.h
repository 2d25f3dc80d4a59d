#pragma once
// Offline evaluation of a stored run: read the store once (system metrics, steps, the phase /
// collective / dataloader events), feed the engine, finalise. Also writes findings back into
// the run (`trainprof rules RUN --store`).
// Threads: plain functions; one caller at a time per run.

#include <memory>
#include <vector>

#include "analyze/rules/config.h"
#include "analyze/rules/engine.h"
#include "base/status.h"
#include "store/run_reader.h"

namespace trainprof::analyze::rules {

// Feeds everything `reader` holds into a new engine and finalises it.
StatusOr<std::unique_ptr<RuleEngine>> EvaluateRun(store::RunReader& reader,
                                                  const RuleConfig& config,
                                                  const EngineOptions& options = {});

// Adds `findings` to the node stores of the run (reopened for appending); findings the run
// already holds (same rule, node, device, times and message) are skipped. Findings without a
// node go to the first node. Returns how many were written.
StatusOr<int64_t> StoreFindings(store::RunReader& reader,
                                const std::vector<model::Finding>& findings);

}  // namespace trainprof::analyze::rules
