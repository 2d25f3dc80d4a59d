#pragma once
// The per-rank view of imported trace events that the analyses work on: GPU activities
// (kernels, memcpy, memset, syncs) with device, stream and correlation id, and CPU spans
// (operators, runtime calls, annotations, profiler steps). Built once from the store's
// EventTable; names stay dictionary codes into that table.
// Threads: plain data, read-only after construction.

#include <cstdint>
#include <string>
#include <vector>

#include "store/tables.h"

namespace trainprof::analyze::trace {

enum class GpuKind : uint8_t { kKernel, kMemcpy, kMemset, kSync };
// kCollective: a collective timed on the host by in-process instrumentation (category
// "collective": all_reduce, barrier... of torch.distributed), what the rank waits in.
enum class CpuKind : uint8_t { kOp, kRuntime, kAnnotation, kStep, kCollective, kOther };

struct GpuActivity {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t name = 0;  // code in the EventTable's names
  int64_t device = -1;
  int64_t stream = -1;
  int64_t correlation = -1;
  GpuKind kind = GpuKind::kKernel;
};

struct CpuSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t name = 0;
  int64_t tid = -1;
  int64_t correlation = -1;  // runtime calls
  int64_t step = -1;         // profiler steps
  CpuKind kind = CpuKind::kOther;
};

struct RankTrace {
  int64_t rank = -1;  // -1 when the trace had no distributedInfo
  std::string label;  // "0", or the node name when the rank is unknown
  std::string node;
  const store::Dictionary* names = nullptr;
  std::vector<GpuActivity> gpu;  // sorted by start
  std::vector<CpuSpan> cpu;      // sorted by start
  const std::string& Name(int32_t code) const { return names->at(code); }
};

// Groups a table's events by (rank, or node when the rank is missing). The table must outlive
// the result (names point into it).
std::vector<RankTrace> SplitByRank(const store::EventTable& events);
// Whether SplitByRank reads the args of an event of this category and kind (a device
// activity's correlation and stream, a runtime call's correlation): EventQuery::keep_args for
// a read that only feeds it.
bool SplitByRankReadsArgs(const std::string& category, model::EventKind kind);

// The integer value of `"key":` in a JSON args text, or -1 when absent.
int64_t ArgInt(const std::string& args, const char* quoted_key);

}  // namespace trainprof::analyze::trace
