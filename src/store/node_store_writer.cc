#include "store/node_store_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <future>
#include <span>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/logging.h"
#include "base/time.h"
#include "model/data_quality.h"
#include "store/codec.h"
#include "store/schema.h"
#include "trainprof/version.h"

namespace trainprof::store {

// Data-quality counter: events whose args passed kMaxEventArgsBytes (stored without them).
constexpr const char* kDroppedEventArgs = "dropped_event_args";

struct NodeStoreWriter::Pending {
  struct Chunk {
    SeriesId series = 0;
    std::vector<int64_t> ts_ns;
    std::vector<double> values;
    bool sealed = false;
    std::vector<int64_t> delete_ids;        // tails a sealed chunk replaces
    std::vector<int64_t> delete_times_ids;  // their metric_times rows (0: none)
    int64_t new_id = 0;                     // rowid once written
    int64_t times_id = 0;                   // its metric_times row once written (0: none)
  };
  std::vector<Chunk> chunks;
  std::vector<std::pair<SeriesId, std::pair<std::string, std::string>>> new_series;
  EventColumns events;
  // Strings first seen since the last successful flush: ids first_new_string.. in order.
  uint32_t first_new_string = 1;
  std::vector<std::string_view> new_strings;
  std::vector<model::Finding> findings;
  std::map<std::string, int64_t> counters;
  std::vector<std::tuple<int64_t, std::string, std::string>> annotations;
  std::map<std::string, std::string> meta;
  int64_t value_count = 0;
  int encode_threads = 1;  // Flush(2): the batch's event chunks encoded on two threads
};

NodeStoreWriter::NodeStoreWriter(std::unique_ptr<SqliteDb> db, std::string path,
                                 WriterOptions options)
    : db_(std::move(db)), path_(std::move(path)), options_(options), zstd_(options.zstd_level) {}

StatusOr<std::unique_ptr<NodeStoreWriter>> NodeStoreWriter::Open(const std::string& path,
                                                                 const model::NodeInfo& node,
                                                                 const WriterOptions& options) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) TP_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash)));
  // SQLite opens (and creates) the store and its journals following symbolic links: one planted
  // by another user would redirect our writes into any file we may write. Refuse links, and
  // files another user owns.
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string p = path + suffix;
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      return FailedPrecondition(p +
                                ": is a symbolic link; trainprof does not write a store "
                                "through a link");
    }
    if (!S_ISREG(st.st_mode)) return FailedPrecondition(p + ": is not a regular file");
    if (st.st_uid != geteuid()) {
      return FailedPrecondition(p + ": owned by uid " + std::to_string(st.st_uid) +
                                ", not by this user: refusing to write into it");
    }
  }
  TP_ASSIGN_OR_RETURN(auto db, SqliteDb::Open(path, SqliteDb::Mode::kReadWriteCreate));
  std::unique_ptr<NodeStoreWriter> writer(new NodeStoreWriter(std::move(db), path, options));
  TP_RETURN_IF_ERROR(writer->Initialize(node));
  if (options.auto_flush_interval_ns > 0) {
    try {
      writer->flusher_ = std::thread([w = writer.get()] { w->AutoFlushLoop(); });
    } catch (const std::system_error& e) {
      // No thread to be had: the caller's Flush and Close write it all the same.
      TP_LOG_ONCE(LogLevel::kWarning, path + ": cannot start the store's flush thread (" +
                                          e.what() +
                                          "): appends wait for an explicit flush or "
                                          "the close, within their bounds");
    }
  }
  return writer;
}

Status NodeStoreWriter::Initialize(const model::NodeInfo& node) {
  if (options_.sync_every_flush) {
    // FULL: each flush's commit is on disk when Flush returns, so even a power cut loses at
    // most one flush interval. One fsync per second is cheap.
    TP_RETURN_IF_ERROR(db_->Exec("PRAGMA journal_mode = WAL"));
    TP_RETURN_IF_ERROR(db_->Exec("PRAGMA synchronous = FULL"));
  } else {
    // An import writes into a directory nobody reads until it is complete and moved into place
    // (a crash leaves only that hidden directory): the rollback journal stays in memory (a
    // failed statement still rolls back), nothing waits for the disk, and Close() syncs the
    // file once. WAL mode and FULL syncs cost 12 fsyncs (a small trace's import: 14 -> 4 in all).
    TP_RETURN_IF_ERROR(db_->Exec("PRAGMA journal_mode = MEMORY"));
    TP_RETURN_IF_ERROR(db_->Exec("PRAGMA synchronous = OFF"));
    // And nobody else opens it: the lock is taken once and held until Close, instead of taken
    // and dropped (three fcntl calls, a header read and two journal stats) every transaction.
    TP_RETURN_IF_ERROR(db_->Exec("PRAGMA locking_mode = EXCLUSIVE"));
  }
  TP_RETURN_IF_ERROR(CreateSchema(*db_));
  TP_RETURN_IF_ERROR(CheckFormatVersion(*db_).status());

  // Reopening to append: continue the series and string ids already stored.
  TP_ASSIGN_OR_RETURN(SqliteStmt series,
                      db_->Prepare("SELECT id, metric, device FROM series ORDER BY id"));
  Status status;
  while (series.Step(&status)) {
    auto id = static_cast<SeriesId>(series.Int(0));
    if (id != series_keys_.size() + 1) return DataLoss(path_ + ": series ids are not dense");
    std::pair<std::string, std::string> key{std::string(series.Text(1)),
                                            std::string(series.Text(2))};
    series_ids_[key] = id;
    series_keys_.push_back(key);
    series_.emplace_back();
  }
  TP_RETURN_IF_ERROR(status);
  TP_ASSIGN_OR_RETURN(SqliteStmt strings, db_->Prepare("SELECT id, text FROM strings ORDER BY id"));
  while (strings.Step(&status)) {
    if (!strings_.AddWithId(static_cast<uint32_t>(strings.Int(0)), strings.Text(1))) {
      return DataLoss(path_ + ": string ids are not dense");
    }
  }
  TP_RETURN_IF_ERROR(status);
  persisted_strings_ = strings_.size();

  // A version 1 store appended to gets chunks of this version.
  meta_["format_version"] = std::to_string(kStoreFormatVersion);
  meta_["node"] = node.node;
  meta_["node_info"] = model::NodeInfoToJson(node);
  meta_["trainprof_version"] = kVersion;
  TP_ASSIGN_OR_RETURN(SqliteStmt created,
                      db_->Prepare("SELECT 1 FROM meta WHERE key = 'created_ns'"));
  if (!created.Step(&status)) meta_["created_ns"] = std::to_string(WallNowNs());
  TP_RETURN_IF_ERROR(status);
  return Flush();
}

NodeStoreWriter::~NodeStoreWriter() {
  Status s = Close();
  if (!s.ok()) TP_LOG_ERROR("closing store: " + s.message());
}

SeriesId NodeStoreWriter::Series(const std::string& metric, const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(metric, device);
  auto it = series_ids_.find(key);
  if (it != series_ids_.end()) return it->second;
  auto id = static_cast<SeriesId>(series_keys_.size() + 1);
  series_ids_.emplace(key, id);
  series_keys_.push_back(std::move(key));
  series_.emplace_back();
  return id;
}

void NodeStoreWriter::Append(SeriesId series, int64_t ts_ns, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  TP_CHECK(series >= 1 && series <= series_.size());
  if (buffered_values_ >= options_.max_buffered_values) {
    ++stats_.dropped_values;
    return;
  }
  SeriesBuffer& buf = series_[series - 1];
  buf.ts_ns.push_back(ts_ns);
  buf.values.push_back(value);
  ++buffered_values_;
}

void NodeStoreWriter::AppendEvent(const model::Event& event) { AppendEvent(model::ViewOf(event)); }

void NodeStoreWriter::AppendEvent(const model::EventView& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int64_t>(events_.size()) >= options_.max_buffered_events) {
    ++stats_.dropped_events;
    return;
  }
  EventColumns& c = events_;
  c.kind.push_back(static_cast<uint8_t>(e.kind));
  c.start_ns.push_back(e.start_ns);
  c.duration_ns.push_back(e.kind == model::EventKind::kInstant ? 0 : e.duration_ns);
  c.name_id.push_back(strings_.Intern(e.name));
  c.category_id.push_back(strings_.Intern(e.category));
  c.mode_id.push_back(strings_.Intern(e.mode));
  c.step.push_back(e.step);
  c.pid.push_back(e.pid);
  c.tid.push_back(e.tid);
  c.rank.push_back(e.rank);
  if (e.args.size() > kMaxEventArgsBytes) {
    ++counters_[kDroppedEventArgs];  // the event is kept, its args are not
  } else {
    c.args.append(e.args);
  }
  c.args_end.push_back(c.args.size());
  buffered_event_bytes_.store(static_cast<int64_t>(c.args.size()), std::memory_order_relaxed);
}

void NodeStoreWriter::AddFinding(model::Finding finding) {
  std::lock_guard<std::mutex> lock(mu_);
  findings_.push_back(std::move(finding));
}

void NodeStoreWriter::AddCounter(const std::string& name, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_[name] += delta;
}

void NodeStoreWriter::Annotate(int64_t ts_ns, std::string key, std::string value) {
  std::lock_guard<std::mutex> lock(mu_);
  annotations_.emplace_back(ts_ns, std::move(key), std::move(value));
}

void NodeStoreWriter::SetMeta(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  meta_[key] = value;
}

WriterStats NodeStoreWriter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status NodeStoreWriter::Flush() { return Flush(1); }

Status NodeStoreWriter::Flush(int encode_threads) {
  std::lock_guard<std::mutex> flush_lock(flush_mu_);
  if (closed_) return FailedPrecondition(path_ + ": store is closed");
  Pending pending;
  TakeLocked(pending);
  pending.encode_threads = encode_threads;
  return WriteTakenLocked(pending);
}

void NodeStoreWriter::ReleaseBuffers() {
  std::lock_guard<std::mutex> flush_lock(flush_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.size() == 0) events_ = EventColumns();
  }
  spare_events_ = EventColumns();
  order_ = std::vector<uint32_t>();
  raw_chunk_ = EncodeScratch();
  blob_ = std::string();
  zstd_.Release();
  helper_zstd_.reset();
}

void NodeStoreWriter::ReserveEvents(size_t events, size_t args_bytes) {
  std::lock_guard<std::mutex> flush_lock(flush_mu_);  // spare_events_ is the writes'
  std::lock_guard<std::mutex> lock(mu_);
  events_.Reserve(events, args_bytes);
  spare_events_.Reserve(events, args_bytes);
}

std::function<Status()> NodeStoreWriter::CutBatch() {
  auto pending = std::make_shared<Pending>();
  {
    std::lock_guard<std::mutex> flush_lock(flush_mu_);
    if (closed_) {
      return [p = path_] { return FailedPrecondition(p + ": store is closed"); };
    }
    TakeLocked(*pending);
  }
  return [this, pending] {
    std::lock_guard<std::mutex> flush_lock(flush_mu_);
    return WriteTakenLocked(*pending);
  };
}

void NodeStoreWriter::TakeLocked(Pending& pending) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (SeriesId id = 1; id <= series_.size(); ++id) {
      SeriesBuffer& buf = series_[id - 1];
      // At close, series whose values all sit in tail chunks still need sealing.
      bool seal_tails = sealing_all_ && !buf.tail_ids.empty();
      if (buf.ts_ns.size() == buf.flushed && !seal_tails) continue;
      Pending::Chunk chunk;
      chunk.series = id;
      // Tails stay below kMaxMetricChunkValues; sealed runs longer than it are split when
      // written (WriteLocked), so that every chunk is one the reader accepts.
      const int64_t seal_at =
          std::min(options_.seal_values, static_cast<int64_t>(kMaxMetricChunkValues));
      if (static_cast<int64_t>(buf.ts_ns.size()) >= seal_at || seal_tails) {
        chunk.sealed = true;
        chunk.ts_ns = std::move(buf.ts_ns);
        chunk.values = std::move(buf.values);
        chunk.delete_ids = std::move(buf.tail_ids);
        chunk.delete_times_ids = std::move(buf.tail_times_ids);
        buffered_values_ -= static_cast<int64_t>(chunk.ts_ns.size());
        pending.value_count += static_cast<int64_t>(chunk.ts_ns.size() - buf.flushed);
        buf = SeriesBuffer();
      } else {
        chunk.ts_ns.assign(buf.ts_ns.begin() + static_cast<ptrdiff_t>(buf.flushed),
                           buf.ts_ns.end());
        chunk.values.assign(buf.values.begin() + static_cast<ptrdiff_t>(buf.flushed),
                            buf.values.end());
        pending.value_count += static_cast<int64_t>(chunk.ts_ns.size());
        buf.flushed = buf.ts_ns.size();
      }
      pending.chunks.push_back(std::move(chunk));
    }
    pending.events = std::move(spare_events_);
    pending.events.Clear();
    std::swap(pending.events, events_);
    buffered_event_bytes_.store(0, std::memory_order_relaxed);
    pending.first_new_string = persisted_strings_ + 1;
    for (uint32_t id = persisted_strings_ + 1; id <= strings_.size(); ++id) {
      pending.new_strings.push_back(strings_.text(id));  // arena text: stays valid unlocked
    }
    pending.findings.swap(findings_);
    pending.counters.swap(counters_);
    pending.annotations.swap(annotations_);
    pending.meta.swap(meta_);
    if (stats_.dropped_values > 0) {
      pending.counters[model::dq::kDroppedSamples] += stats_.dropped_values;
    }
    if (stats_.dropped_events > 0) {
      pending.counters[model::dq::kDroppedEvents] += stats_.dropped_events;
    }
    stats_.dropped_values = stats_.dropped_events = 0;
  }
}

Status NodeStoreWriter::WriteTakenLocked(Pending& pending) {
  Status status = WriteLocked(pending, /*seal_all=*/false);
  if (status.ok()) {
    persisted_strings_ =
        pending.first_new_string - 1 + static_cast<uint32_t>(pending.new_strings.size());
  }
  const auto events_flushed = static_cast<int64_t>(pending.events.size());
  pending.events.Clear();
  spare_events_ = std::move(pending.events);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.flushes;
  if (status.ok()) {
    for (const auto& chunk : pending.chunks) {
      if (!chunk.sealed) {
        series_[chunk.series - 1].tail_ids.push_back(chunk.new_id);
        series_[chunk.series - 1].tail_times_ids.push_back(chunk.times_id);
      }
    }
    stats_.values_written += pending.value_count;
    stats_.events_written += events_flushed;
  } else {
    // The batch is lost; count it so the loss shows up in the run's data quality.
    ++stats_.write_errors;
    stats_.dropped_values += pending.value_count;
    stats_.dropped_events += events_flushed;
    counters_[model::dq::kWriteErrors] += 1;
    TP_LOG_ONCE(LogLevel::kWarning, "store writes are failing (" + status.message() +
                                        "); recording continues and counts what is lost");
  }
  return status;
}

Status NodeStoreWriter::WriteLocked(Pending& pending, bool seal_all) {
  (void)seal_all;
  TP_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
  auto body = [&]() -> Status {
    // New series rows, so that readers can name every chunk's series.
    TP_ASSIGN_OR_RETURN(SqliteStmt count_series, db_->Prepare("SELECT count(*) FROM series"));
    Status status;
    int64_t stored_series = count_series.Step(&status) ? count_series.Int(0) : 0;
    TP_RETURN_IF_ERROR(status);
    std::vector<std::pair<std::string, std::string>> keys;
    {
      std::lock_guard<std::mutex> lock(mu_);
      keys.assign(series_keys_.begin() + stored_series, series_keys_.end());
    }
    if (!keys.empty()) {
      TP_ASSIGN_OR_RETURN(SqliteStmt ins,
                          db_->Prepare("INSERT INTO series(id, metric, device) VALUES(?, ?, ?)"));
      for (size_t i = 0; i < keys.size(); ++i) {
        TP_RETURN_IF_ERROR(ins.Bind(1, stored_series + static_cast<int64_t>(i) + 1)
                               .Bind(2, keys[i].first)
                               .Bind(3, keys[i].second)
                               .Run());
      }
    }
    if (!pending.chunks.empty()) {
      TP_ASSIGN_OR_RETURN(
          SqliteStmt ins,
          db_->Prepare(
              "INSERT INTO metric_chunks(series_id, first_ns, last_ns, count, sealed, data) "
              "VALUES(?, ?, ?, ?, ?, ?)"));
      TP_ASSIGN_OR_RETURN(SqliteStmt del, db_->Prepare("DELETE FROM metric_chunks WHERE id = ?"));
      TP_ASSIGN_OR_RETURN(SqliteStmt ins_times,
                          db_->Prepare("INSERT INTO metric_times(count, data) VALUES(?, ?)"));
      // Series sampled at one tick carry identical timestamps (jittered ones cost bytes per
      // value): chunks of this flush with identical timestamp vectors store them once, in a
      // metric_times row they refer to. leader[i]: the first chunk with chunk i's timestamps.
      const size_t k = pending.chunks.size();
      std::vector<size_t> leader(k), sharers(k, 0);
      std::unordered_map<uint64_t, std::vector<size_t>> leaders_by_hash;
      for (size_t i = 0; i < k; ++i) {
        leader[i] = i;
        const std::vector<int64_t>& ts = pending.chunks[i].ts_ns;
        if (ts.empty() || ts.size() > kMaxMetricChunkValues) continue;
        uint64_t h = ts.size();
        for (int64_t t : ts) h = (h ^ static_cast<uint64_t>(t)) * 0x100000001b3ULL + (h >> 29);
        std::vector<size_t>& leaders = leaders_by_hash[h];
        for (size_t j : leaders) {
          if (pending.chunks[j].ts_ns == ts) {
            leader[i] = j;
            break;
          }
        }
        if (leader[i] == i) leaders.push_back(i);
        ++sharers[leader[i]];
      }
      std::unordered_map<int64_t, int64_t> ref_delta;
      for (size_t i = 0; i < k; ++i) {
        auto& chunk = pending.chunks[i];
        chunk.times_id = 0;
        if (sharers[leader[i]] >= 2) {
          if (leader[i] == i) {
            std::string times = EncodeMetricTimes(chunk.ts_ns, options_.zstd_level);
            TP_RETURN_IF_ERROR(ins_times.Bind(1, static_cast<int64_t>(chunk.ts_ns.size()))
                                   .BindBlob(2, times)
                                   .Run());
            chunk.times_id = db_->LastInsertRowId();
          } else {
            chunk.times_id = pending.chunks[leader[i]].times_id;
          }
          ++ref_delta[chunk.times_id];
        }
        const std::span<const int64_t> all_ts(chunk.ts_ns);
        const std::span<const double> all_values(chunk.values);
        for (size_t begin = 0; begin < all_ts.size(); begin += kMaxMetricChunkValues) {
          const size_t n = std::min(kMaxMetricChunkValues, all_ts.size() - begin);
          const auto ts = all_ts.subspan(begin, n);
          std::string blob = EncodeMetricChunk(ts, all_values.subspan(begin, n),
                                               options_.zstd_level, chunk.times_id);
          auto [min_it, max_it] = std::minmax_element(ts.begin(), ts.end());
          TP_RETURN_IF_ERROR(ins.Bind(1, static_cast<int64_t>(chunk.series))
                                 .Bind(2, *min_it)
                                 .Bind(3, *max_it)
                                 .Bind(4, static_cast<int64_t>(n))
                                 .Bind(5, static_cast<int64_t>(chunk.sealed ? 1 : 0))
                                 .BindBlob(6, blob)
                                 .Run());
          chunk.new_id = db_->LastInsertRowId();
        }
        for (int64_t id : chunk.delete_ids) TP_RETURN_IF_ERROR(del.Bind(1, id).Run());
        for (int64_t id : chunk.delete_times_ids) {
          if (id > 0) --ref_delta[id];
        }
      }
      // A timestamp column no chunk refers to any more goes with its last tail.
      TP_ASSIGN_OR_RETURN(SqliteStmt del_times,
                          db_->Prepare("DELETE FROM metric_times WHERE id = ?"));
      for (const auto& [id, delta] : ref_delta) {
        auto it = times_refs_.find(id);
        if ((it == times_refs_.end() ? 0 : it->second) + delta <= 0) {
          TP_RETURN_IF_ERROR(del_times.Bind(1, id).Run());
        }
      }
      times_ref_delta_ = std::move(ref_delta);
    }
    if (!pending.new_strings.empty()) {
      TP_ASSIGN_OR_RETURN(SqliteStmt ins,
                          db_->Prepare("INSERT INTO strings(id, text) VALUES(?, ?)"));
      for (size_t i = 0; i < pending.new_strings.size(); ++i) {
        TP_RETURN_IF_ERROR(ins.Bind(1, static_cast<int64_t>(pending.first_new_string + i))
                               .Bind(2, pending.new_strings[i])
                               .Run());
      }
    }
    const EventColumns& ev = pending.events;
    if (ev.size() > 0) {
      // Sorted by (start, arrival): an order of indices, the columns stay where they are.
      StableSortByKey(ev.start_ns, &order_);
      TP_ASSIGN_OR_RETURN(
          SqliteStmt ins,
          db_->Prepare(
              "INSERT INTO event_chunks(first_start_ns, last_start_ns, max_end_ns, count, data) "
              "VALUES(?, ?, ?, ?, ?)"));
      size_t per_chunk =
          std::min(kMaxEventChunkEvents,
                   static_cast<size_t>(std::max<int64_t>(1, options_.max_events_per_chunk)));
      // Chunks of up to per_chunk events, fewer when their args pass kMaxEventChunkArgsBytes.
      std::vector<std::pair<size_t, size_t>> ranges;
      for (size_t begin = 0, end = 0; begin < ev.size(); begin = end) {
        size_t args_bytes = 0;
        for (end = begin; end < ev.size() && end - begin < per_chunk; ++end) {
          if (end > begin && args_bytes >= kMaxEventChunkArgsBytes) break;
          args_bytes += ev.Args(order_[end]).size();
        }
        ranges.emplace_back(begin, end);
      }
      // Flush(2) with the batch in one chunk: two halves, so that both threads encode.
      if (pending.encode_threads > 1 && ranges.size() == 1 &&
          ev.size() >= 2 * kMinSplitChunkEvents) {
        ranges = {{0, ev.size() / 2}, {ev.size() / 2, ev.size()}};
      }
      auto order_of = [&](const std::pair<size_t, size_t>& r) {
        return std::span<const uint32_t>(order_.data() + r.first, r.second - r.first);
      };
      auto insert = [&](std::span<const uint32_t> order, const std::string& blob) {
        int64_t max_end = INT64_MIN;
        for (uint32_t i : order) {
          max_end = std::max(max_end, ev.start_ns[i] + std::max<int64_t>(0, ev.duration_ns[i]));
        }
        return ins.Bind(1, ev.start_ns[order.front()])
            .Bind(2, ev.start_ns[order.back()])
            .Bind(3, max_end)
            .Bind(4, static_cast<int64_t>(order.size()))
            .BindBlob(5, blob)
            .Run();
      };
      if (pending.encode_threads > 1 && ranges.size() > 1) {
        // The first half of the chunks on a second thread (its own compressor and scratch),
        // the rest here; inserted in order once both are done.
        const size_t half = ranges.size() / 2;
        if (!helper_zstd_) helper_zstd_ = std::make_unique<ZstdCompressor>(options_.zstd_level);
        std::vector<std::string> blobs(ranges.size());
        auto encode_first_half = [&] {
          EncodeScratch raw;
          for (size_t k = 0; k < half; ++k) {
            EncodeEventColumns(ev, order_of(ranges[k]), *helper_zstd_, &raw, &blobs[k]);
          }
        };
        std::future<void> helper;
        try {
          helper = std::async(std::launch::async, encode_first_half);
        } catch (const std::system_error&) {
          encode_first_half();  // no thread to be had: all of it here
        }
        for (size_t k = half; k < ranges.size(); ++k) {
          EncodeEventColumns(ev, order_of(ranges[k]), zstd_, &raw_chunk_, &blobs[k]);
        }
        if (helper.valid()) helper.get();
        for (size_t k = 0; k < ranges.size(); ++k) {
          TP_RETURN_IF_ERROR(insert(order_of(ranges[k]), blobs[k]));
        }
      } else {
        for (const auto& r : ranges) {
          EncodeEventColumns(ev, order_of(r), zstd_, &raw_chunk_, &blob_);
          TP_RETURN_IF_ERROR(insert(order_of(r), blob_));
        }
      }
    }
    if (!pending.findings.empty()) {
      TP_ASSIGN_OR_RETURN(
          SqliteStmt ins,
          db_->Prepare(
              "INSERT INTO findings(rule, severity, node, device, start_ns, end_ns, message, "
              "recommendation, evidence) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)"));
      for (const auto& f : pending.findings) {
        TP_RETURN_IF_ERROR(ins.Bind(1, f.rule)
                               .Bind(2, std::string(model::SeverityName(f.severity)))
                               .Bind(3, f.node)
                               .Bind(4, f.device)
                               .Bind(5, f.start_ns)
                               .Bind(6, f.end_ns)
                               .Bind(7, f.message)
                               .Bind(8, f.recommendation)
                               .Bind(9, f.evidence_json)
                               .Run());
      }
    }
    if (!pending.counters.empty()) {
      TP_ASSIGN_OR_RETURN(
          SqliteStmt up,
          db_->Prepare("INSERT INTO counters(name, value) VALUES(?, ?) "
                       "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value"));
      for (const auto& [name, delta] : pending.counters) {
        TP_RETURN_IF_ERROR(up.Bind(1, name).Bind(2, delta).Run());
      }
    }
    if (!pending.annotations.empty()) {
      TP_ASSIGN_OR_RETURN(
          SqliteStmt ins,
          db_->Prepare("INSERT INTO annotations(ts_ns, key, value) VALUES(?, ?, ?)"));
      for (const auto& [ts, key, value] : pending.annotations) {
        TP_RETURN_IF_ERROR(ins.Bind(1, ts).Bind(2, key).Bind(3, value).Run());
      }
    }
    if (!pending.meta.empty()) {
      TP_ASSIGN_OR_RETURN(SqliteStmt up,
                          db_->Prepare("INSERT INTO meta(key, value) VALUES(?, ?) "
                                       "ON CONFLICT(key) DO UPDATE SET value = excluded.value"));
      for (const auto& [key, value] : pending.meta) {
        TP_RETURN_IF_ERROR(up.Bind(1, key).Bind(2, value).Run());
      }
    }
    return OkStatus();
  };
  times_ref_delta_.clear();
  Status status = body();
  if (status.ok()) status = db_->Exec("COMMIT");
  if (status.ok()) {
    for (const auto& [id, delta] : times_ref_delta_) {
      if ((times_refs_[id] += delta) <= 0) times_refs_.erase(id);
    }
  }
  times_ref_delta_.clear();
  if (!status.ok()) {
    // The strings inserted in the rolled-back transaction are gone too; they stay interned and
    // go in with the next flush (persisted_strings_ is not advanced).
    (void)db_->Exec("ROLLBACK");
  }
  return status;
}

void NodeStoreWriter::AutoFlushLoop() {
  std::unique_lock<std::mutex> lock(flusher_mu_);
  while (!stop_flusher_) {
    flusher_cv_.wait_for(lock, std::chrono::nanoseconds(options_.auto_flush_interval_ns));
    if (stop_flusher_) break;
    lock.unlock();
    (void)Flush();  // errors are counted and logged once inside Flush
    lock.lock();
  }
}

Status NodeStoreWriter::Close() {
  if (flusher_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(flusher_mu_);
      stop_flusher_ = true;
    }
    flusher_cv_.notify_all();
    flusher_.join();
  }
  {
    std::lock_guard<std::mutex> flush_lock(flush_mu_);
    if (closed_) return OkStatus();
  }
  // Seal every series so that the finished store holds large chunks only.
  int64_t saved_seal = options_.seal_values;
  options_.seal_values = 1;
  sealing_all_ = true;
  Status status = Flush();
  sealing_all_ = false;
  options_.seal_values = saved_seal;
  std::lock_guard<std::mutex> flush_lock(flush_mu_);
  closed_ = true;
  if (!status.ok()) return status;
  TP_RETURN_IF_ERROR(db_->Exec("PRAGMA incremental_vacuum"));
  if (!options_.sync_every_flush) {
    if (!options_.sync_at_close) return OkStatus();
    // An import's store never left rollback mode: one file, synced once with its directory.
    const size_t slash = path_.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash + !slash);
    for (const std::string& p : {path_, dir}) {
      const int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return Unavailable(p + ": cannot open to sync: " + ErrnoMessage(errno));
      const bool synced = fsync(fd) == 0 || errno == EINVAL;
      const int err = errno;
      close(fd);
      if (!synced) return Unavailable(p + ": fsync failed: " + ErrnoMessage(err));
    }
    return OkStatus();
  }
  // Leave WAL mode so that a finished store is one file that read-only media can open. That
  // needs the database to ourselves: while a live reader (dashboard, rules) still has it open,
  // the store simply stays in WAL mode, which is equally complete and consistent.
  sqlite3_busy_timeout(db_->raw(), 200);
  if (db_->Exec("PRAGMA wal_checkpoint(TRUNCATE)").ok()) {
    (void)db_->Exec("PRAGMA journal_mode = DELETE");
  }
  return OkStatus();
}

}  // namespace trainprof::store
