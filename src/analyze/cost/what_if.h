#pragma once
// The what-ifs: managed spot, rightsizing from measured peaks, fewer GPUs / bigger batch, mixed
// precision, a heterogeneous CPU group, shorter download / initialisation. Each one is proposed
// only when a measurement or a stored rule finding motivates it, prices its alternative from
// the catalog, states its assumptions, and is ranked by saving. What is not proposed is listed
// with the reason (CostReport::not_proposed).

#include <optional>
#include <string>
#include <vector>

#include "analyze/cost/catalog.h"
#include "analyze/cost/cost_model.h"
#include "model/finding.h"

namespace trainprof::cost {

// Evidence from the run beyond what CostReport holds.
struct WhatIfEvidence {
  std::vector<model::Finding> findings;  // stored rule findings
  int64_t kernel_events = 0;
  std::optional<double> matmul_kernel_share;       // of GPU kernel time
  std::optional<double> fp32_matmul_kernel_share;  // matmul kernels without tensor-core names
  int checkpoint_spans = 0;
  std::optional<double> checkpoint_interval_seconds;  // median spacing of checkpoint spans
  double download_seconds = 0;                        // per instance (the first node's)
  double initialization_seconds = 0;  // per instance, from phases or time to first step
};

// Fills report->what_ifs (ranked) and report->not_proposed.
void AddWhatIfs(const Catalog& catalog, const CostOptions& options, const WhatIfEvidence& evidence,
                CostReport* report);

// Whether a GPU kernel name reads as a matrix multiply / convolution, and whether it runs on
// tensor cores in a 16-bit or tf32 type (cuBLAS/cuDNN/CUTLASS naming).
bool IsMatmulKernel(const std::string& name);
bool IsTensorCoreKernel(const std::string& name);

}  // namespace trainprof::cost
