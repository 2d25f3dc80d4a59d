#pragma once
// The `trainprof analyze --json` document (a contract; keys may be added, not renamed).
// Times are microseconds as numbers (HTA and TensorBoard report µs), named *_us.

#include <string>
#include <vector>

#include "analyze/trace/trace_analysis.h"

namespace trainprof::analyze::trace {

std::string AnalysisToJson(const std::vector<RankAnalysis>& ranks,
                           const std::vector<Straggler>& stragglers,
                           const std::vector<DiffEntry>* diff,
                           const std::vector<KernelTypeTime>* all_kernel_types = nullptr);

}  // namespace trainprof::analyze::trace
