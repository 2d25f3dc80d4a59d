#pragma once
// Decodes a cProfile dump as SageMaker Debugger writes it (framework/*/cProfile/.../
// python_stats): `pstats.Stats.dump_stats`, i.e. Python's `marshal` of the dict
//   {(file, line, function): (primitive_calls, calls, total_s, cumulative_s, callers)}
// into per-function rows, the statistics trainprof's own --python-profile stores.
//
// Only the part of the marshal format such a dict uses is read (None/bool, int, long, float,
// strings, tuples, lists, dicts, sets and back-references); anything else, a length beyond
// the bytes left, nesting deeper than 8 or more than 16 M objects is an error naming the byte
// offset. Python code objects and the like are refused, never executed.
// Threads: pure functions.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainprof::importers::smdebug {

// One caller of a function: cProfile keeps, per calling function, the calls from it and the
// time the function spent when called from it.
struct PythonCallerStats {
  std::string file;
  int64_t line = 0;
  std::string function;
  int64_t primitive_calls = 0;
  int64_t calls = 0;
  double total_s = 0;
  double cumulative_s = 0;
};

// Caller edges kept per function (the most cumulative time first), as trainprof's own
// --python-profile keeps them (python/trainprof/_detail.py MAX_CALLERS).
inline constexpr size_t kMaxPythonCallers = 10;

struct PythonFunctionStats {
  std::string file;
  int64_t line = 0;
  std::string function;
  int64_t primitive_calls = 0;  // pstats "cc"
  int64_t calls = 0;            // pstats "nc"
  double total_s = 0;           // own time ("tottime")
  double cumulative_s = 0;      // with callees ("cumtime")
  int64_t callers = 0;          // distinct calling functions
  // The kMaxPythonCallers callers with the most cumulative time (then calls, then file, line,
  // function): the order python/trainprof/_detail.py called_by() gives.
  std::vector<PythonCallerStats> called_by;
};

// Every function of the dump, in the dump's order.
StatusOr<std::vector<PythonFunctionStats>> DecodePythonStats(std::string_view bytes);

}  // namespace trainprof::importers::smdebug
