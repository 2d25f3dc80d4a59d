#pragma once
// Imports PyTorch profiler / Kineto traces (.json or .json.gz, every format generation since
// 2021) into a run directory. Each file is streamed (never parsed into one DOM): events go to
// the store in batches, so memory stays bounded whatever the trace size.
//
// Mapping (docs/importers.md has the full table):
// - rank: distributedInfo.rank (never guessed from the file name); missing when absent.
// - node: the trace's host_name when present (ranks on one host share a node store), else
//   "rank-<N>", else the file name without extensions.
// - timestamps: parsed from their text into int64 ns; baseTimeNanoseconds (written after the
//   events by recent Kineto) is added when the timestamps are relative.
// - spans (ph X) keep their category in today's Kineto names (Kernel -> kernel...); a
//   ProfilerStep#N also yields a "step" span (mode "global", step N); flows (ac2g, async...)
//   are instants whose args carry flow_phase and flow_id (= the correlation id); counters
//   (ph C) and [memory] instants become metric series; deviceProperties become the node's GPUs;
//   process_name / process_labels / thread_name become node metadata (TrackNameKey).
// Threads: called on one thread. With several files and CPUs, files are read at once, a thread
// each (file_threads; the threads take the files in the order given); a file may also get a
// reading thread (parse_threads) when there are CPUs to spare, or, when one file is read on one
// thread and the process may use two CPUs, a writing thread per batch. All are joined before
// it returns. The stored run is the same whatever the threads: nodes are named and metadata
// set in the order the files were given (events of two files of one node may share a chunk).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "model/event.h"

namespace trainprof::importers::kineto {

// Args nested deeper than this many objects/arrays are not stored (counted as
// import_args_too_deep; the event is kept): readers and exporters never meet unbounded nesting.
inline constexpr int kMaxArgsDepth = 64;

struct KinetoImportOptions {
  std::vector<std::string> traces;
  std::string out;                 // run directory (created; must not hold a run already)
  std::string name;                // run name; default: the run directory's base name
  int64_t flush_events = 1 << 16;  // events buffered per store flush (bounds memory)
  // The streamer's first read window (it grows for a larger element); tests make it tiny so
  // that events straddle every refill.
  size_t read_buffer_bytes = 1 << 20;
  // the traces' file bytes, as read (called on the reading thread when there is one)
  ProgressSink* progress = nullptr;
  // 2: a second thread reads and tokenizes the trace while this one stores it
  // (kineto_parse_pipeline.h); 1: all on this thread; 0: 2 when the process may use two CPUs
  // or more, else 1. The stored run is the same.
  int parse_threads = 0;
  // Files read at once, a thread each: 0: as many as the process may use CPUs (at most 8 and
  // the number of files). 1: one after the other.
  int file_threads = 0;
  // A run that one command makes and removes (`trainprof analyze TRACE...`): see
  // RunBuilder::Create.
  bool scratch = false;
};

struct KinetoFileSummary {
  std::string path;
  std::string node;
  int64_t rank = model::kMissing;
  int64_t world_size = model::kMissing;
  std::string timestamp_format;  // "integer_us", "decimal_us" or "" (no events)
  int64_t base_time_ns = 0;      // added to relative timestamps
  int64_t elements = 0;          // traceEvents elements read
  int64_t events_stored = 0;     // spans and instants written (incl. derived step spans)
  int64_t steps = 0;             // step spans: one per ProfilerStep#N, or as exported
  int64_t flows = 0;
  int64_t metric_samples = 0;  // counter and memory samples
  int64_t metadata_events = 0;
  int64_t gpus = 0;  // deviceProperties entries
  int64_t start_ns = 0, end_ns = 0;
  std::map<std::string, int64_t> categories;  // stored events by category
  std::map<std::string, int64_t> problems;    // data-quality counters added for this file
  // What the import changed and why, for the user (a trace without a rank whose node another
  // file took is stored under a node of its own, "<node>-2").
  std::vector<std::string> warnings;
};

struct KinetoImportResult {
  std::vector<KinetoFileSummary> files;
  std::vector<std::string> nodes;
  int64_t events_stored = 0;
};

// The node metadata key under which the importer keeps a trace's track name: `what` is
// "process_name", "process_labels" (Kineto's device label, "GPU 1") or "thread_name" (tid only
// then): "kineto[.rank<R>].<what>.<pid>[.<tid>]" (the rank when the trace has one, so that the
// ranks sharing a host's node keep their own names). The Chrome-trace export reads them back.
std::string TrackNameKey(std::string_view what, int64_t rank, int64_t pid,
                         int64_t tid = model::kMissing);

// Fails on the first file that cannot be read (naming it and why); what was imported before
// stays in the run directory.
StatusOr<KinetoImportResult> ImportKineto(const KinetoImportOptions& options);

}  // namespace trainprof::importers::kineto
