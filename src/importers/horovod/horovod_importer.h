#pragma once
// Imports raw Horovod timelines (HOROVOD_TIMELINE=file.json): a Chrome-trace array, usually
// left unterminated while Horovod runs, with one "process" per tensor and B/E (plus X and
// instant) events for NEGOTIATE_*, ALLREDUCE, MEMCPY_IN_FUSION_BUFFER... Each file becomes
// spans with category "horovod", args.tensor naming the tensor. Raw timelines use the
// monotonic clock: pass --base-time-us (or rely on smdebug's rotated files, which carry
// start_time_since_epoch_in_micros) to place them on the wall clock; otherwise the
// import_relative_timestamps counter says so.
// Threads: one thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"

namespace trainprof::importers::horovod {

struct HorovodImportOptions {
  std::vector<std::string> timelines;
  std::string out;
  std::string name;
  std::optional<int64_t> base_time_ns;
  ProgressSink* progress = nullptr;  // the timelines' bytes, as read
};

struct HorovodImportResult {
  int64_t spans = 0;
  int64_t instants = 0;
  int64_t unterminated_files = 0;
  std::vector<std::string> nodes;
  // What the import changed or did not use, and why (a timeline whose name another file's
  // node took; --base-time-us where the timeline gives its own start).
  std::vector<std::string> warnings;
};

StatusOr<HorovodImportResult> ImportHorovod(const HorovodImportOptions& options);

}  // namespace trainprof::importers::horovod
