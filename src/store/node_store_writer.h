#pragma once
// Writes one node's store: metric samples, framework events, findings, data-quality counters
// and annotations. Appends are buffered in memory and made durable by Flush(), one SQLite
// transaction each, at least every flush interval when auto-flush runs.
//
// Threads: Append*/Add*/Annotate may be called from any thread (a mutex guards the buffers);
// Flush() and Close() serialize on their own mutex and may run on the auto-flush thread.
//
// Metric samples: each series keeps the values since its last sealed chunk. A flush writes the
// values that arrived since the previous flush as a small unsealed "tail" chunk; once a series
// holds `seal_values` values, one sealed chunk replaces its tails in the same transaction. So
// a crash loses at most the unflushed interval, and a long run ends up in large, well-compressed
// chunks.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "model/event.h"
#include "model/finding.h"
#include "model/run_metadata.h"
#include "store/codec.h"
#include "store/sqlite_db.h"
#include "store/string_interner.h"

namespace trainprof::store {

struct WriterOptions {
  int64_t seal_values = 4096;  // values per sealed metric chunk
  int64_t max_events_per_chunk = 65536;
  int zstd_level = 3;
  // When > 0, a background thread flushes this often (the durability bound).
  int64_t auto_flush_interval_ns = 0;
  // Each flush on disk when it returns (a recording, WAL mode). False for a one-shot writer (an
  // import into a directory nobody reads before it is complete): the journal stays in memory,
  // flushes are committed without waiting for the disk and Close() syncs the file once.
  bool sync_every_flush = true;
  // With sync_every_flush false: whether Close() syncs the file (false: a scratch run, made for
  // one command and removed after it).
  bool sync_at_close = true;
  // Buffered values/events beyond which new appends are dropped and counted (the writer never
  // grows without bound when the disk is slow or full).
  int64_t max_buffered_values = 50'000'000;
  int64_t max_buffered_events = 5'000'000;
};

struct WriterStats {
  int64_t values_written = 0;
  int64_t events_written = 0;
  int64_t flushes = 0;
  int64_t dropped_values = 0;
  int64_t dropped_events = 0;
  int64_t write_errors = 0;
};

using SeriesId = uint32_t;

class NodeStoreWriter {
 public:
  // Creates the store (and its parent directory) or reopens an existing one to append.
  static StatusOr<std::unique_ptr<NodeStoreWriter>> Open(const std::string& path,
                                                         const model::NodeInfo& node,
                                                         const WriterOptions& options = {});
  ~NodeStoreWriter();
  NodeStoreWriter(const NodeStoreWriter&) = delete;
  NodeStoreWriter& operator=(const NodeStoreWriter&) = delete;

  // Interns a (metric, device) pair; the id is stable for the life of the writer.
  SeriesId Series(const std::string& metric, const std::string& device);
  void Append(SeriesId series, int64_t ts_ns, double value);
  void AppendEvent(const model::Event& event);
  // The same without building a model::Event: the views are copied before this returns.
  void AppendEvent(const model::EventView& event);
  // Room for batches of this many events and bytes of args in the buffers that take them and in
  // the spare set they alternate with: a writer that knows its batch sizes (an import) fills
  // them without growing them, each growth a copy and fresh pages to fault in.
  void ReserveEvents(size_t events, size_t args_bytes);
  void AddFinding(model::Finding finding);
  // Adds `delta` to a data-quality counter (see model/data_quality.h).
  void AddCounter(const std::string& name, int64_t delta);
  void Annotate(int64_t ts_ns, std::string key, std::string value);
  void SetMeta(const std::string& key, const std::string& value);

  // Makes everything appended so far durable. On a write error the batch is dropped and
  // counted (never retried forever), and the error is returned.
  Status Flush();
  // The same, with the batch's events encoded on `encode_threads` threads (2 at most): for a
  // one-shot writer's last flush, which nothing else overlaps (an import's end). A batch
  // that would be one chunk of at least 2 x kMinSplitChunkEvents events is stored as two.
  Status Flush(int encode_threads);
  static constexpr size_t kMinSplitChunkEvents = 4096;
  // Flush in two halves, for a one-shot writer that writes on another thread while appends go
  // on (an import: the parser fills the next batch meanwhile). Cuts the batch now, exactly as
  // Flush() would (so the store's chunks do not depend on thread timing), and returns what
  // writes it. At most one cut batch outstanding: run it before the next cut, Flush or Close.
  std::function<Status()> CutBatch();
  // Frees what the writer keeps for its next batches (the event columns a flush emptied, the
  // encoding scratch, the compression contexts), keeping what is buffered: for a writer that
  // may stay idle a long while (an import's node whose files are all read). Appends after it
  // grow them again.
  void ReleaseBuffers();
  // Seals every series, flushes, vacuums freed pages and switches the file out of WAL mode, so
  // a finished store is one self-contained file. Idempotent.
  Status Close();

  WriterStats stats() const;
  // Bytes of event args buffered since the last flush (a cheap read, for callers that flush
  // by size: an import of args-heavy events).
  int64_t buffered_event_bytes() const {
    return buffered_event_bytes_.load(std::memory_order_relaxed);
  }
  const std::string& path() const { return path_; }

 private:
  struct SeriesBuffer {
    std::vector<int64_t> ts_ns;  // values since the last sealed chunk
    std::vector<double> values;
    size_t flushed = 0;                   // how many of them are already in tail chunks
    std::vector<int64_t> tail_ids;        // rowids of those tail chunks
    std::vector<int64_t> tail_times_ids;  // their metric_times rows (0: timestamps inline)
  };
  struct Pending;  // what one flush takes out of the buffers

  NodeStoreWriter(std::unique_ptr<SqliteDb> db, std::string path, WriterOptions options);
  Status Initialize(const model::NodeInfo& node);
  Status WriteLocked(Pending& pending, bool seal_all);
  void TakeLocked(Pending& pending);          // flush_mu_ held: the buffers' contents
  Status WriteTakenLocked(Pending& pending);  // flush_mu_ held: writes and accounts them
  void AutoFlushLoop();

  std::unique_ptr<SqliteDb> db_;
  std::string path_;
  WriterOptions options_;

  mutable std::mutex mu_;  // guards the buffers below
  std::map<std::pair<std::string, std::string>, SeriesId> series_ids_;
  std::vector<std::pair<std::string, std::string>> series_keys_;  // by SeriesId
  std::vector<SeriesBuffer> series_;
  int64_t buffered_values_ = 0;
  // Events since the last flush, columnar, their strings interned as they arrive (`strings_`
  // is the node's whole string table: ids up to persisted_strings_ are in the store).
  EventColumns events_;
  StringInterner strings_;
  std::atomic<int64_t> buffered_event_bytes_{0};
  std::vector<model::Finding> findings_;
  std::map<std::string, int64_t> counters_;
  std::vector<std::tuple<int64_t, std::string, std::string>> annotations_;
  std::map<std::string, std::string> meta_;
  WriterStats stats_;

  std::mutex flush_mu_;  // serializes Flush/Close; guards db_ and what follows
  uint32_t persisted_strings_ = 0;
  EventColumns spare_events_;  // the last flush's columns, emptied, capacity kept
  std::vector<uint32_t> order_;
  EncodeScratch raw_chunk_;
  std::string blob_;
  // metric_times row -> chunks written by this writer that refer to it; a row is deleted with
  // the last tail chunk referring to it (sealed chunks are never deleted).
  std::unordered_map<int64_t, int64_t> times_refs_;
  std::unordered_map<int64_t, int64_t> times_ref_delta_;  // this transaction's changes to it
  ZstdCompressor zstd_;
  std::unique_ptr<ZstdCompressor> helper_zstd_;  // Flush(2)'s second thread (made on first use)
  bool closed_ = false;
  std::atomic<bool> sealing_all_{false};  // set by Close() for its final flush

  std::thread flusher_;
  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool stop_flusher_ = false;
};

}  // namespace trainprof::store
