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
//                                                         span each, and one "python_function"
//                                                         instant per function (decoded)
//   training_job_end.ts                                   the job's end time
//
// Framework node ids are "<pid or rank>-<host>" (smdebug's get_node_id): the host is the node,
// the same one the system files name, and the number the events' pid or rank.
// Metric names are converted to the samplers' (CPUUtilization percent -> cpu_utilization_ratio
// 0..1, ...; docs/importers.md has the table), percent -> ratio exactly from the value's text.
// A corrupt line is skipped and counted (parse_errors).
// Threads: one thread.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"

namespace trainprof::importers::smdebug {

struct SmdebugImportOptions {
  std::string dir;  // the profiler-output folder
  std::string out;
  std::string name;
  ProgressSink* progress = nullptr;  // the folder's bytes, file by file
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
  int64_t python_functions = 0;  // "python_function" instants decoded from them
  int64_t parse_errors = 0;
  std::vector<std::string> nodes;
  std::vector<std::string> skipped;  // files not understood, with the reason
  // Files imported only in part (cut off inside an event), also counted in the run as
  // import_truncated_files; each warning names the file.
  int64_t truncated_files = 0;
  std::vector<std::string> warnings;
};

StatusOr<SmdebugImportResult> ImportSmdebug(const SmdebugImportOptions& options);

// smdebug system metric (Type, Dimension, Name) -> the samplers' metric and device names
// (docs/metrics.md); what has no sampler counterpart gets a name documented there, and a type
// nobody knows "smdebug_<type>_<dimension or name>" (never a bare prefix).
struct MetricMapping {
  std::string metric;
  std::string device;
  bool percent = false;  // the value is a percentage: stored / 100 as a ratio 0..1
};
MetricMapping MapSystemMetric(const std::string& type, const std::string& dimension,
                              const std::string& name = "");

// A framework file's node id: "<digits>-<host>" (smdebug), "<host>-<digits>" for algo-N hosts
// (what `trainprof export smdebug` wrote before), bare digits (a process id: host empty; the
// importer takes the job's one instance from its system files), or just a host.
struct NodeIdParts {
  std::string host;
  int64_t number = -1;          // -1: none
  bool number_is_rank = false;  // true for the "algo-N-<rank>" form
};
NodeIdParts SplitNodeId(const std::string& node_id);

// "4.76" (percent) -> the double nearest 0.0476, the ratio's exact decimal (the store keeps
// such values in ~1 byte; 4.76 * 0.01 is 0.047599999999999996). False if not a number.
bool PercentTextToRatio(std::string_view text, double* ratio);

}  // namespace trainprof::importers::smdebug
