#pragma once
// Writes a realistic synthetic run for the report's tests and benchmark (never for users'
// numbers): one node with per-core CPU, memory, network, disk and per-GPU metrics, job phases,
// train and eval steps with their parts (the data loader falls behind in the second half),
// occasional slow steps, operator events, stored findings, data-quality counters and data
// loader annotations. Names from "users" include markup and quotes to exercise escaping.
// Threads: call from one thread.

#include <cstdint>
#include <string>

#include "base/status.h"

namespace trainprof::report {

struct SyntheticRunOptions {
  int64_t start_ns = 1'764'460'800'000'000'000;  // 2025-11-30T00:00:00Z
  int64_t duration_s = 600;
  int64_t interval_ms = 500;
  int cores = 8;
  int gpus = 2;
  int64_t step_ms = 250;      // a training step's compute time before the loader slows
  bool operators = true;      // write cpu_op / kernel / gpu_memcpy events for a few steps
  bool hostile_names = true;  // op names, command and tags with <script> and quotes
};

Status WriteSyntheticRun(const std::string& dir, const SyntheticRunOptions& options);

}  // namespace trainprof::report
