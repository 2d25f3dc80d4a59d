#pragma once
// `analyze --hta-compat`: HolisticTraceAnalysis 0.5.0's idle time, temporal breakdown, kernel
// breakdown and communication-computation overlap, computed the way HTA computes them (each
// rule is listed in docs/trace-analysis.md, "--hta-compat"): HTA's view of the events (rows
// with a duration, ns timestamps rounded inwards to whole µs, the events after the last
// ProfilerStep's start dropped with the kernels they launched), its name-based kernel types,
// its interval merge and sweep, its per-stream idle classification and its rounding.
// Threads: pure functions of their inputs.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analyze/trace/intervals.h"
#include "analyze/trace/trace_analysis.h"
#include "store/tables.h"

namespace trainprof::analyze::trace {

// HTA's kernel type, by name only (hta/utils/utils.py get_kernel_type).
enum class HtaKernelType : uint8_t { kCommunication, kMemory, kComputation, kOther };
HtaKernelType HtaClassify(const std::string& name);

// One event as HTA's data frame holds it.
struct HtaRow {
  int64_t ts_us = 0;   // ceil of the start in µs
  int64_t end_us = 0;  // floor of the end in µs (may be ts_us - 1 for sub-µs events)
  int64_t stream = -1;
  int64_t correlation = -1;
  int64_t device = -1;
  int32_t name = 0;
  int32_t category = 0;
  int32_t copies = 1;  // HTA's filter duplicates kernels whose correlation id two CPU rows share
  bool gpu = false;    // HTA's GPUKernelFilter: (stream >= 0 and correlation >= 0) or a sync
  int64_t runtime_ts_us = INT64_MIN;  // start of the CPU row with the same correlation id
};

struct HtaRankTrace {
  int64_t rank = -1;
  std::string label;    // as SplitByRank labels it
  int64_t base_ns = 0;  // added by the importer to the file's relative timestamps
  std::vector<HtaRow> rows;
};

// HTA's load: rows of every span (not trainprof's derived steps, not category "Trace" or no
// category), the correlation join, and the last-step filter when the traces name more than one
// ProfilerStep. Same rank grouping and labels as SplitByRank. `node_meta` (RunReader::NodeMeta)
// names the base time the importer added to a file's relative timestamps
// (kineto.[rankN.]base_time_ns): HTA rounds the values the file wrote, as doubles.
using NodeMetaMap = std::map<std::string, std::map<std::string, std::string>>;
std::vector<HtaRankTrace> BuildHtaTraces(const store::EventTable& events,
                                         const NodeMetaMap& node_meta = {});

// HTA's µs interval of an event: the file's values (start - base) read as doubles, the start
// rounded up and start + duration rounded down; returned on the absolute µs scale.
Interval HtaMicros(int64_t start_ns, int64_t duration_ns, int64_t base_ns);

struct HtaResult {
  std::vector<RankAnalysis> ranks;           // rank, label, temporal, kernel_types, idle, overlap
  std::vector<KernelTypeTime> kernel_types;  // over all ranks, as HTA's kernel breakdown
};

// `kernel_wait_threshold_us` is HTA's consecutive_kernel_delay (30 by default).
HtaResult AnalyzeHta(const std::vector<HtaRankTrace>& traces, const store::EventTable& events,
                     int64_t kernel_wait_threshold_us);

// Replaces the HTA figures of `ranks` (matched by label) with HtaResult's.
void ApplyHta(const HtaResult& hta, std::vector<RankAnalysis>* ranks);

}  // namespace trainprof::analyze::trace
