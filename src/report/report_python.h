#pragma once
// The report's "Python functions" section: the cProfile statistics a run holds, from
// `record --python-profile A-B` (python/trainprof/_detail.py store_pstats) or from SageMaker
// Debugger's python_stats dumps (importers/smdebug). Both store one instant per function, of
// category "python_function", at the end of the profile, with args
//   {function, file, line, calls, primitive_calls, total_ns, cumulative_ns, [steps],
//    [callers (count)], [called_by: [{function, file, line, calls, primitive_calls, total_ns,
//    cumulative_ns}]]}.
// One profile is the instants of one process (node, pid, rank) with the same time and steps.
// Kineto's python_function spans (torch.profiler with_stack) are not cProfile rows: only
// instants whose args carry cumulative_ns are read.
//
// Threads: BuildPythonFunctions reads through one RunReader, called from one thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/run_reader.h"

namespace trainprof::report {

struct PythonCaller {
  std::string function, file;
  int64_t line = 0;
  int64_t calls = 0, primitive_calls = 0;
  int64_t total_ns = 0, cumulative_ns = 0;  // the callee's time when called from here
};

struct PythonFunctionRow {
  std::string function, file;
  int64_t line = 0;
  int64_t calls = 0, primitive_calls = 0;   // pstats ncalls and primitive calls
  int64_t total_ns = 0, cumulative_ns = 0;  // own time (tottime) and with callees (cumtime)
  // As pstats prints them: own time / calls, cumulative time / primitive calls.
  std::optional<double> total_per_call_ns, cumulative_per_call_ns;
  std::optional<int64_t> caller_count;  // distinct callers (n/a when not stored)
  std::vector<PythonCaller> callers;    // the stored callers, the most cumulative time first
};

struct PythonProfile {
  std::string node;
  std::optional<int64_t> pid, rank;
  std::string steps;   // "10-20"; "" for a time-window profile without steps
  int64_t end_ns = 0;  // when the profile was stored
  int64_t functions = 0;
  std::vector<PythonFunctionRow> by_total;       // top by own time
  std::vector<PythonFunctionRow> by_cumulative;  // top by cumulative time
};

struct PythonFunctions {
  int64_t profile_count = 0;            // every profile of the run
  std::vector<PythonProfile> profiles;  // the first kMaxPythonProfiles in time order
  int64_t unreadable = 0;               // python_function instants whose args did not parse
  std::string note;                     // how to get a profile, when there is none
};

inline constexpr size_t kMaxPythonProfiles = 16;
inline constexpr size_t kPythonTopFunctions = 20;

Status BuildPythonFunctions(store::RunReader& reader, PythonFunctions* out);

}  // namespace trainprof::report
