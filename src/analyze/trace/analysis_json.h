#pragma once
// The `trainprof analyze --json` document (a contract; keys may be added, not renamed).
// Times are microseconds as numbers (HTA and TensorBoard report µs), named *_us.

#include <cstddef>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "analyze/trace/trace_analysis.h"

namespace trainprof::analyze::trace {

// Adds keys to rank `index`'s object before it is printed (the advice layer's summaries).
using RankJsonExtra = std::function<void(size_t index, nlohmann::json* rank)>;

// Each rank's object is built and printed on a small thread pool (base/parallel.h) and the
// document assembled in rank order: the same text as one nlohmann document dumped with indent 2.
std::string AnalysisToJson(const std::vector<RankAnalysis>& ranks,
                           const std::vector<Straggler>& stragglers,
                           const std::vector<DiffEntry>* diff,
                           const std::vector<KernelTypeTime>* all_kernel_types = nullptr,
                           const RankJsonExtra& extra = nullptr);

}  // namespace trainprof::analyze::trace
