#pragma once
// Reads a whole run: its metadata and every node's store, merged. Nodes that cannot be opened
// are listed in problems() with the reason; the others stay readable. Tables from several
// nodes carry the node in their `node` column.
// Threads: one RunReader per thread. Reads of several stores (SystemMetrics, Events,
// EventsByStore) run each store on a small thread pool inside the call (base/parallel.h), one
// thread per store at a time, and return what a sequential read returns.

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "model/finding.h"
#include "model/run_metadata.h"
#include "store/node_store_reader.h"
#include "store/tables.h"

namespace trainprof::store {

struct NodeSeries {
  std::string node;
  SeriesInfo series;
};

// Where to resume tailing events: per store file, the last event chunk already returned.
// Where an incremental read stopped: the last chunk id read per store file, and for metrics the
// newest sample delivered per series (a sealed chunk repeats the samples of the tails it
// replaces).
struct ChunkCursor {
  std::map<std::string, int64_t> last_chunk_id;
  std::map<std::string, std::unordered_map<int64_t, int64_t>> newest_ns;  // store -> series
};
using EventCursor = ChunkCursor;

// One store file's events (RunReader::EventsByStore).
struct StoreEvents {
  std::string node;
  EventTable events;  // in start-time order
};

class RunReader {
 public:
  static StatusOr<std::unique_ptr<RunReader>> Open(const std::string& run_dir);

  const std::string& dir() const { return dir_; }
  const model::RunMetadata& metadata() const { return metadata_; }
  std::vector<std::string> nodes() const;
  std::vector<const model::NodeInfo*> node_infos() const;
  // Everything that could not be read: missing run.json, nodes that failed to open,
  // corrupt chunks met by queries so far.
  const std::vector<std::string>& problems() const { return problems_; }

  // Re-reads run.json and opens nodes that appeared since Open (for live readers).
  Status Refresh();

  StatusOr<MetricTable> SystemMetrics(const MetricQuery& query);
  // In start-time order over all nodes; events that start together keep the order stored.
  StatusOr<EventTable> Events(const EventQuery& query);
  // The same events, one table per store file (in path order, each in start-time order):
  // Events() is these tables appended and ordered by start, the order within a store kept.
  // For work that splits by store (a node's ranks), without merging dictionaries first.
  StatusOr<std::vector<StoreEvents>> EventsByStore(const EventQuery& query);
  // The run's stores, in EventsByStore's order.
  size_t StoreCount() const { return nodes_.size(); }
  // read(i, store i, problems) for every store, the stores on a small thread pool, each used by
  // one thread at a time; the problems are noted as a read of the run notes them. For readers
  // that fold a store's event chunks into their own structures (NodeStoreReader::
  // VisitEventChunks) instead of reading an EventTable.
  void ForEachStore(const std::function<Status(size_t, NodeStoreReader&, ReadProblems*)>& read);
  // Samples written since `cursor` (updated) inside the query's window, each once.
  // Both refresh first (new node stores) unless `refresh` is false.
  StatusOr<MetricTable> SystemMetricsSince(ChunkCursor* cursor, const MetricQuery& query = {},
                                           bool refresh = true);
  // Events in chunks written since `cursor` (updated), for incremental tailing.
  StatusOr<EventTable> EventsSince(EventCursor* cursor, const EventQuery& query = {},
                                   bool refresh = true);
  // Derived from the step and step-part events; kept until the stores' events change, so the
  // rules and the cost model of one command share one read.
  StatusOr<StepTable> Steps();
  StatusOr<std::vector<model::Finding>> Findings();
  StatusOr<std::vector<NodeSeries>> ListSeries();
  // Data-quality counters summed over nodes, plus corrupt chunks this reader skipped.
  StatusOr<std::map<std::string, int64_t>> Counters();
  StatusOr<std::vector<std::pair<std::string, Annotation>>> Annotations();
  // Each node's key/value metadata (its stores' meta tables merged; importers keep the source's
  // track names there), by node.
  StatusOr<std::map<std::string, std::map<std::string, std::string>>> NodeMeta();
  StatusOr<std::optional<int64_t>> LatestTimestampNs();
  StatusOr<int64_t> EventCount();

 private:
  explicit RunReader(std::string dir) : dir_(std::move(dir)) {}
  void NoteProblems(const ReadProblems& p);
  // The stores whose node `nodes` selects (empty: all), in path order.
  std::vector<NodeStoreReader*> SelectedStores(const std::vector<std::string>& nodes);
  // Reads each store into its own table on a small thread pool (base/parallel.h):
  // `read(store, table, problems)`; the problems merged in store order into `problems`.
  template <typename Table, typename ReadFn>
  std::vector<Table> ReadEachStore(const std::vector<NodeStoreReader*>& stores,
                                   ReadProblems* problems, const ReadFn& read);
  // Reads each store from its cursor position (`read(node, store path, out, problems,
  // after_chunk_id, &max_chunk_id)`) and moves the cursor.
  template <typename Table, typename ReadFn>
  StatusOr<Table> ReadSince(ChunkCursor* cursor, bool refresh, const ReadFn& read);

  std::string dir_;
  model::RunMetadata metadata_;
  std::array<int64_t, 4> metadata_stamp_{-2, -2, -2, -2};  // run.json's inode, size, mtime read
  // Every store file of the run (several per node when processes write their own), by path.
  std::map<std::string, std::unique_ptr<NodeStoreReader>> nodes_;
  std::vector<std::string> failed_nodes_;  // store paths that could not be opened
  std::vector<std::string> problems_;
  int64_t corrupt_chunks_seen_ = 0;
  // Steps() of the event generation (store path -> EventGeneration()) it was built from.
  std::optional<StepTable> steps_cache_;
  std::map<std::string, std::pair<int64_t, int64_t>> steps_generation_;
};

// Turns events into one row per step: a "step" span gives the step's start and duration; the
// data_wait / forward / backward / optimizer spans with the same (node, rank, pid, mode, step)
// add up into its parts. Steps are in time order (equal starts in the table's order).
StepTable BuildSteps(const EventTable& events);
// The same over several tables, each sorted by start, as if over the table merging them (rows
// by start, equal starts in the tables' order): analyze builds its steps from the per-store
// tables it has read instead of reading the run's events again.
StepTable BuildSteps(const std::vector<const EventTable*>& tables);
StepTable BuildSteps(const std::vector<StoreEvents>& stores);  // EventsByStore()'s tables

struct RunSummary {
  std::string dir;
  std::string run_id;
  std::string name;
  std::optional<int64_t> start_ns;
  std::optional<int64_t> duration_ns;
  std::optional<int> exit_status;
  int node_count = 0;
  std::string source;
  std::string error;  // set when the run could not be read
};

// The runs directly under `dir` (each subdirectory that is a run), newest first. `dir` may
// itself be a run.
StatusOr<std::vector<RunSummary>> ListRuns(const std::string& dir);

}  // namespace trainprof::store
