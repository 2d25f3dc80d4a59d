#pragma once
// Imports a SageMaker Debugger profiler-output folder (as copied from S3) into a run:
//
//   system/incremental/YYYYMMDDHH/<epoch-s>.algo-N.json   system metrics, JSON lines; one node
//                                                         per NodeId (algo-N)
//   framework/pevents/YYYYMMDDHH/<us>_<node>_{pythontimeline,model_timeline,horovod_timeline}.json
//                                                         Chrome traces (base time from the
//                                                         metadata event)
//   framework/tensorflow/detailed_profiling/.../<host>.trace.json.gz
//                                                         TF profiler trace; start time from the
//                                                         sibling
//                                                         <node>_<start_us>_<end_us>.metadata file
//                                                         NAME
//   framework/tensorflow/cProfile/<start>_<end>_<node>_<step>/python_stats
//                                                         cProfile dumps: one "python_profile"
//                                                         span each (see docs/importers.md)
//   training_job_end.ts                                   the job's end time
//
// Metric names are converted to ours (CPUUtilization percent -> cpu_utilization_ratio 0..1,
// ...; docs/importers.md has the table). A corrupt line is skipped and counted (parse_errors).
// Threads: one thread.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace trainprof::importers::smdebug {

struct SmdebugImportOptions {
  std::string dir;  // the profiler-output folder
  std::string out;
  std::string name;
};

struct SmdebugImportResult {
  int64_t system_files = 0;
  int64_t system_samples = 0;
  std::map<std::string, int64_t> samples_by_type;  // smdebug "Type": cpu, gpu...
  int64_t framework_files = 0;
  int64_t framework_events = 0;  // spans + instants from Chrome traces
  int64_t steps = 0;
  int64_t tf_trace_files = 0;
  int64_t tf_events = 0;
  int64_t python_stats_files = 0;
  int64_t parse_errors = 0;
  std::vector<std::string> nodes;
  std::vector<std::string> skipped;  // files not understood, with the reason
};

StatusOr<SmdebugImportResult> ImportSmdebug(const SmdebugImportOptions& options);

// smdebug metric (Type, Dimension) -> our stored metric name and the factor applied to the
// value; empty name when unknown (kept as "smdebug_<dimension>").
struct MetricMapping {
  std::string metric;
  double scale = 1.0;
};
MetricMapping MapSystemMetric(const std::string& type, const std::string& dimension);

}  // namespace trainprof::importers::smdebug
