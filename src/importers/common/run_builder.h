#pragma once
// What every importer does around its parser: create the run directory, open one store
// writer per node on first use, track the run's time span, and write run.json at the end.
// Threads: one thread.

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/run_metadata.h"
#include "store/node_store_writer.h"

namespace trainprof::importers {

class RunBuilder {
 public:
  // Fails if `dir` already holds a run (importing never mixes into an existing run). `scratch`:
  // a run made for one command and removed after it (`trainprof analyze TRACE...`): nothing is
  // synced to disk and chunks get zstd's fastest level (smaller match tables, faster writes).
  static StatusOr<std::unique_ptr<RunBuilder>> Create(const std::string& dir,
                                                      const std::string& name,
                                                      const std::string& source,
                                                      std::vector<std::string> command,
                                                      bool scratch = false);
  ~RunBuilder();

  // The writer of `node.node`'s store, opened with `node` the first time (names that map to the
  // same node directory, store::SanitizeNodeName, share it).
  StatusOr<store::NodeStoreWriter*> Node(const model::NodeInfo& node);
  void NoteTime(int64_t start_ns, int64_t end_ns) {
    if (start_ns < min_ns_) min_ns_ = start_ns;
    if (end_ns > max_ns_) max_ns_ = end_ns;
  }
  bool has_time() const { return min_ns_ <= max_ns_; }
  model::RunMetadata& metadata() { return meta_; }
  std::vector<std::string> node_names() const;  // the node directories' names

  // Closes every writer and writes run.json (start/end from the times noted).
  Status Finish();

 private:
  RunBuilder() = default;
  std::string dir_;
  bool scratch_ = false;
  model::RunMetadata meta_;
  std::map<std::string, std::unique_ptr<store::NodeStoreWriter>> writers_;
  int64_t min_ns_ = INT64_MAX;
  int64_t max_ns_ = INT64_MIN;
  bool finished_ = false;
};

// The file name without directories and without .gz / .json / .pt.trace endings.
std::string FileStem(const std::string& path);

// InvalidArgument when a file is listed twice (as given, or by another path to it): its events
// would be stored twice.
Status RefuseFilesGivenTwice(const std::vector<std::string>& paths);

// `wanted`, or "<wanted>-2", "-3"... : the first name not in `taken`.
std::string UnusedName(const std::string& wanted, const std::set<std::string>& taken);

}  // namespace trainprof::importers
