#pragma once
// Reads one node's store, while its writer runs or after. Every query runs in its own SQLite
// read transaction, so a live reader sees each committed flush (within the flush interval).
// Corrupt chunks are skipped and reported through ReadProblems; the rest stays readable.
// Threads: one reader per thread.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "model/finding.h"
#include "model/run_metadata.h"
#include "store/sqlite_db.h"
#include "store/tables.h"

namespace trainprof::store {

struct SeriesInfo {
  int64_t id = 0;
  std::string metric;
  std::string device;
  int64_t count = 0;
  int64_t first_ns = 0;
  int64_t last_ns = 0;
};

struct Annotation {
  int64_t ts_ns = 0;
  std::string key;
  std::string value;
};

struct EventChunkColumns;  // store/codec.h

class NodeStoreReader {
 public:
  static StatusOr<std::unique_ptr<NodeStoreReader>> Open(const std::string& path);

  const std::string& node() const { return info_.node; }
  const model::NodeInfo& info() const { return info_; }
  const std::string& path() const { return path_; }
  int format_version() const { return format_version_; }
  // Set when a leftover write-ahead log could not be read (read-only media after a crash).
  const std::string& warning() const { return warning_; }

  StatusOr<std::vector<SeriesInfo>> ListSeries();
  // Appends matching samples to `out`, coding this node as `node_code` in out->nodes.
  Status ReadMetrics(const MetricQuery& query, MetricTable* out, ReadProblems* problems);
  // The samples of the chunks written after `after_chunk_id` (chunk ids only grow: a sealed
  // chunk is inserted before the tails it replaces are deleted) that match the query and are
  // newer than `newest_ns[series id]` (updated: a sealed chunk repeats its tails' samples);
  // *max_chunk_id receives the largest id seen. One query whatever the number of series: a
  // live tail reads a few values of each series every poll.
  Status ReadMetricsSince(const MetricQuery& query, MetricTable* out, ReadProblems* problems,
                          int64_t after_chunk_id, int64_t* max_chunk_id,
                          std::unordered_map<int64_t, int64_t>* newest_ns);
  // Appends matching events; with `after_chunk_id`, only chunks with a larger id (for tailing),
  // and *max_chunk_id receives the largest id seen.
  Status ReadEvents(const EventQuery& query, EventTable* out, ReadProblems* problems,
                    int64_t after_chunk_id = 0, int64_t* max_chunk_id = nullptr);
  // The event chunks overlapping [start_ns, end_ns), one decoded chunk at a time, in the order
  // ReadEvents reads them (by first start; the events are not sorted by start within or across
  // chunks), for a reader that folds events into its own structures instead of an EventTable
  // (trace analysis: a million events' table is most of the cost of reading them). The chunk's
  // events are as the store holds them: every one, whatever its time, names as string ids
  // (StringById) and args viewing a buffer valid during the call. Corrupt chunks are skipped
  // and named in `problems`.
  using EventChunkVisitor = std::function<void(int64_t chunk_id, const EventChunkColumns& chunk)>;
  Status VisitEventChunks(int64_t start_ns, int64_t end_ns, ReadProblems* problems,
                          const EventChunkVisitor& visit);
  // The string a chunk names by `id`; nullptr when the store has none (a damaged chunk).
  const std::string* StringById(uint32_t id);
  StatusOr<std::vector<model::Finding>> Findings();
  StatusOr<std::map<std::string, int64_t>> Counters();
  StatusOr<std::vector<Annotation>> Annotations();
  StatusOr<std::map<std::string, std::string>> Meta();
  // Latest sample or event end in the store; nullopt when it holds none.
  StatusOr<std::optional<int64_t>> LatestTimestampNs();
  StatusOr<int64_t> EventCount();
  // Changes whenever event chunks are added or replaced (the largest chunk id and the number
  // of chunks): lets a reader keep what it derived from the events until they change.
  StatusOr<std::pair<int64_t, int64_t>> EventGeneration();

 private:
  NodeStoreReader(std::unique_ptr<SqliteDb> db, std::string path)
      : db_(std::move(db)), path_(std::move(path)) {}
  Status LoadStrings();
  Status RefreshSeries();
  Status ForEachEventChunk(int64_t start_ns, int64_t end_ns, int64_t after_chunk_id,
                           int64_t* max_chunk_id, ReadProblems* problems,
                           const EventChunkVisitor& visit);
  struct SeriesRow {
    int64_t id;
    std::string metric, device;
  };
  std::vector<SeriesRow> series_;  // the series table as read so far, by id

  std::unique_ptr<SqliteDb> db_;
  std::string path_;
  model::NodeInfo info_;
  int format_version_ = 0;
  std::string warning_;
  std::vector<std::string> strings_;  // by id; [0] is ""
  // ReadMetricsSince's query restricted to the series it selects, when that is a small part of
  // the store's (a live poll reads a few metrics of a node's hundreds of series every time):
  // SQLite then skips the others' rows instead of handing each one over. Rebuilt when the
  // selection or the number of series changes.
  struct SinceSelection {
    std::vector<std::string> metrics, devices;
    size_t series_count = 0;
    bool every_series = true;
    bool none = false;
    SqliteStmt stmt;
  };
  // Declared after db_: its statement is finalized before the connection closes.
  std::unique_ptr<SinceSelection> since_;
  Status SelectSince(const MetricQuery& query);
};

}  // namespace trainprof::store
