#pragma once
// Imports one Chrome-trace-format file (the JSON timelines written by smdebug, Horovod and the
// TensorFlow profiler) into a node store: X events and B/E pairs become spans, i/I events
// instants, M events name processes. smdebug's metadata event
// (args.start_time_since_epoch_in_micros) or the caller's base time turns relative timestamps
// into epoch ns. Kineto files have their own importer (kineto/), which knows ranks, flows and
// steps of that format.
// Threads: one thread.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/progress.h"
#include "base/status.h"
#include "store/node_store_writer.h"

namespace trainprof::importers {

enum class ChromeFlavor {
  kSmdebugFramework,  // pythontimeline / model_timeline: Step:ModeKeys.* are steps
  kHorovod,           // per-tensor activities: category "horovod", args.tensor = process name
  kTensorflow,        // TF profiler trace: category "tf_op"
};

struct ChromeImportOptions {
  ChromeFlavor flavor = ChromeFlavor::kSmdebugFramework;
  // Added to ts (µs) when the file carries no start_time_since_epoch_in_micros.
  std::optional<int64_t> base_time_ns;
  int64_t rank = INT64_MIN;  // model::kMissing
  // The events' pid when the file name tells the process (smdebug's "<pid>-<host>"); the
  // trace's own pid (a track number there) is used when INT64_MIN.
  int64_t pid = INT64_MIN;
  bool allow_unterminated = true;
  ProgressSink* progress = nullptr;  // advanced by the file's bytes as they are read
};

struct ChromeImportStats {
  int64_t elements = 0;
  int64_t spans = 0;  // X events and matched B/E pairs
  int64_t instants = 0;
  int64_t steps = 0;
  int64_t start_ns = INT64_MAX, end_ns = INT64_MIN;
  std::map<std::string, int64_t> problems;
  // The base time the file gives itself (start_time_since_epoch_in_micros), which wins over
  // ChromeImportOptions::base_time_ns.
  std::optional<int64_t> file_base_ns;
};

StatusOr<ChromeImportStats> ImportChromeTrace(const std::string& path,
                                              const ChromeImportOptions& options,
                                              store::NodeStoreWriter* writer);

}  // namespace trainprof::importers
