#include "store/node_store_reader.h"

#include <algorithm>
#include <future>
#include <span>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "base/files.h"
#include "model/event.h"
#include "store/codec.h"
#include "store/schema.h"

namespace trainprof::store {
namespace {

// Event chunks at least this large are decoded on a second thread while the previous one is kept.
constexpr size_t kThreadedDecodeEvents = 4096;

template <typename T>
bool Selected(const std::vector<T>& filter, const T& value) {
  return filter.empty() || std::find(filter.begin(), filter.end(), value) != filter.end();
}

// The shared timestamp columns (metric_times, format 2) of one read, decoded once each: the
// chunks of every series of a tick refer to the same row. Bounded, so that a hostile store
// cannot make it large: past kMaxCachedTimes timestamps it starts over.
class TimesCache {
 public:
  explicit TimesCache(SqliteDb* db) : db_(db) {}
  TimesCache(const TimesCache&) = delete;
  TimesCache& operator=(const TimesCache&) = delete;
  const MetricTimesLookup& lookup() { return lookup_; }

 private:
  static constexpr size_t kMaxCachedTimes = size_t{8} << 20;

  StatusOr<std::span<const int64_t>> Find(int64_t id, size_t count) {
    auto it = cache_.find(id);
    if (it == cache_.end()) {
      TP_ASSIGN_OR_RETURN(auto row,
                          db_->Cached("SELECT count, data FROM metric_times WHERE id = ?"));
      row->Bind(1, id);
      Status status;
      if (!row->Step(&status)) {
        TP_RETURN_IF_ERROR(status);
        return DataLoss("no such row in metric_times");
      }
      if (row->Int(0) != static_cast<int64_t>(count)) {
        return DataLoss("holds " + std::to_string(row->Int(0)) + " timestamps, the chunk " +
                        std::to_string(count));
      }
      if (cached_ + count > kMaxCachedTimes) {
        cache_.clear();
        cached_ = 0;
      }
      std::vector<int64_t> ts;
      TP_RETURN_IF_ERROR(DecodeMetricTimes(row->Blob(1), count, &ts));
      it = cache_.emplace(id, std::move(ts)).first;
      cached_ += count;
    }
    if (it->second.size() != count) {
      return DataLoss("holds " + std::to_string(it->second.size()) + " timestamps, the chunk " +
                      std::to_string(count));
    }
    return std::span<const int64_t>(it->second);
  }

  SqliteDb* db_;
  std::unordered_map<int64_t, std::vector<int64_t>> cache_;
  size_t cached_ = 0;
  MetricTimesLookup lookup_ = [this](int64_t id, size_t count) { return Find(id, count); };
};

}  // namespace

StatusOr<std::unique_ptr<NodeStoreReader>> NodeStoreReader::Open(const std::string& path) {
  if (!PathExists(path)) return NotFound(path + ": no such store file");
  auto db = SqliteDb::Open(path, SqliteDb::Mode::kReadOnly);
  std::string warning;
  if (!db.ok()) return db.status();
  std::unique_ptr<NodeStoreReader> reader(new NodeStoreReader(std::move(db).value(), path));
  auto version = CheckFormatVersion(*reader->db_);
  if (!version.ok() && version.status().code() == StatusCode::kUnavailable) {
    // A crashed writer left a WAL on media we cannot write (the -shm index cannot be made):
    // open the main file as immutable, without the WAL's last flushes, and say so.
    TP_ASSIGN_OR_RETURN(auto imm,
                        SqliteDb::Open("file:" + path + "?immutable=1", SqliteDb::Mode::kReadOnly));
    reader.reset(new NodeStoreReader(std::move(imm), path));
    reader->warning_ = path + ": opened without its write-ahead log (" +
                       version.status().message() + "); the last flushes may be missing";
    version = CheckFormatVersion(*reader->db_);
  }
  if (!version.ok()) {
    const Status& s = version.status();
    if (s.code() == StatusCode::kInternal) {
      // e.g. "no such table: meta": an SQLite file that is not ours.
      return DataLoss(path + ": not a trainprof store (" + s.message() + ")");
    }
    return s;
  }
  reader->format_version_ = *version;
  TP_ASSIGN_OR_RETURN(auto meta, reader->Meta());
  auto it = meta.find("node_info");
  if (it == meta.end()) return DataLoss(path + ": store has no node_info");
  TP_ASSIGN_OR_RETURN(reader->info_, model::NodeInfoFromJson(it->second, path + " (node_info)"));
  TP_RETURN_IF_ERROR(reader->LoadStrings());
  return reader;
}

Status NodeStoreReader::LoadStrings() {
  TP_ASSIGN_OR_RETURN(SqliteStmt stmt, db_->Prepare("SELECT id, text FROM strings ORDER BY id"));
  strings_.assign(1, std::string());
  Status status;
  while (stmt.Step(&status)) {
    // Ids are dense from 1 (the writer assigns them so): an id out of sequence would make us
    // size the table by a number read from the file.
    const int64_t id = stmt.Int(0);
    if (id != static_cast<int64_t>(strings_.size())) {
      return DataLoss(path_ + ": string id " + std::to_string(id) +
                      " is out of sequence (expected " + std::to_string(strings_.size()) + ")");
    }
    strings_.emplace_back(stmt.Text(1));
  }
  return status;
}

const std::string* NodeStoreReader::StringById(uint32_t id) {
  if (id >= strings_.size()) {
    // A live writer added strings since we loaded them.
    if (!LoadStrings().ok() || id >= strings_.size()) return nullptr;
  }
  return &strings_[id];
}

StatusOr<std::map<std::string, std::string>> NodeStoreReader::Meta() {
  TP_ASSIGN_OR_RETURN(SqliteStmt stmt, db_->Prepare("SELECT key, value FROM meta"));
  std::map<std::string, std::string> out;
  Status status;
  while (stmt.Step(&status)) out[std::string(stmt.Text(0))] = std::string(stmt.Text(1));
  TP_RETURN_IF_ERROR(status);
  return out;
}

StatusOr<std::vector<SeriesInfo>> NodeStoreReader::ListSeries() {
  TP_ASSIGN_OR_RETURN(
      SqliteStmt stmt,
      db_->Prepare("SELECT s.id, s.metric, s.device, coalesce(sum(c.count), 0), min(c.first_ns), "
                   "max(c.last_ns) FROM series s LEFT JOIN metric_chunks c ON c.series_id = s.id "
                   "GROUP BY s.id ORDER BY s.metric, s.device"));
  std::vector<SeriesInfo> out;
  Status status;
  while (stmt.Step(&status)) {
    SeriesInfo s;
    s.id = stmt.Int(0);
    s.metric = std::string(stmt.Text(1));
    s.device = std::string(stmt.Text(2));
    s.count = stmt.Int(3);
    s.first_ns = stmt.Int(4);
    s.last_ns = stmt.Int(5);
    out.push_back(std::move(s));
  }
  TP_RETURN_IF_ERROR(status);
  return out;
}

Status NodeStoreReader::RefreshSeries() {
  // Series are only ever added: read the new ones.
  TP_ASSIGN_OR_RETURN(
      auto series, db_->Cached("SELECT id, metric, device FROM series WHERE id > ? ORDER BY id"));
  series->Bind(1, series_.empty() ? int64_t{0} : series_.back().id);
  Status status;
  while (series->Step(&status)) {
    series_.push_back({series->Int(0), std::string(series->Text(1)), std::string(series->Text(2))});
  }
  return status;
}

Status NodeStoreReader::ReadMetricsSince(const MetricQuery& query, MetricTable* out,
                                         ReadProblems* problems, int64_t after_chunk_id,
                                         int64_t* max_chunk_id,
                                         std::unordered_map<int64_t, int64_t>* newest_ns) {
  if (!Selected(query.nodes, info_.node)) return OkStatus();
  TP_RETURN_IF_ERROR(RefreshSeries());
  // A store without series (a process's, holding events) has no chunks to read: a live poll
  // reads every store of the run each time, and this spares a query per such store.
  if (series_.empty()) return OkStatus();
  // (metric, device) codes in `out` of series_[k], decided when a chunk of it is met (a poll
  // meets a few of many series): metric -1 not selected, -2 not decided yet.
  std::vector<std::pair<int32_t, int32_t>> codes(series_.size(), {-2, -2});
  auto code_of = [&](int64_t series_id) -> const std::pair<int32_t, int32_t>* {
    // Ids are numbered 1, 2, ... as series are added: at series_[id - first id], else found.
    // (Unsigned: a damaged store's ids may be anything, their difference too.)
    auto row = series_.begin();
    const uint64_t k = static_cast<uint64_t>(series_id) -
                       static_cast<uint64_t>(series_.front().id);  // series_ is not empty here
    if (k < series_.size() && series_[static_cast<size_t>(k)].id == series_id) {
      row += static_cast<std::ptrdiff_t>(k);
    } else {
      row = std::lower_bound(series_.begin(), series_.end(), series_id,
                             [](const SeriesRow& r, int64_t v) { return r.id < v; });
    }
    if (row == series_.end() || row->id != series_id) return nullptr;
    auto& code = codes[static_cast<size_t>(row - series_.begin())];
    if (code.first == -2) {
      const bool wanted =
          Selected(query.metrics, row->metric) && Selected(query.devices, row->device);
      code = wanted ? std::make_pair(out->metrics.Code(row->metric), out->devices.Code(row->device))
                    : std::make_pair(-1, -1);
    }
    return &code;
  };
  TP_RETURN_IF_ERROR(SelectSince(query));
  if (since_->none) return OkStatus();
  const int32_t node_code = out->nodes.Code(info_.node);
  TP_ASSIGN_OR_RETURN(auto every, db_->Cached("SELECT series_id, id, count, data FROM "
                                              "metric_chunks WHERE id > ? ORDER BY id"));
  // Reset when done, as a lease does: no statement keeps a read transaction open.
  struct ResetWhenDone {
    SqliteStmt* stmt;
    ~ResetWhenDone() { stmt->Reset(); }
  };
  SqliteStmt* chunks = since_->every_series ? &*every : &since_->stmt;
  ResetWhenDone reset{chunks};
  chunks->Bind(1, after_chunk_id);
  TimesCache times(db_.get());
  Status status;
  while (chunks->Step(&status)) {
    const int64_t id = chunks->Int(1);
    *max_chunk_id = std::max(*max_chunk_id, id);
    const std::pair<int32_t, int32_t>* code = code_of(chunks->Int(0));
    if (code == nullptr) {
      problems->Add(path_ + ": metric chunk " + std::to_string(id) + " of an unknown series");
      continue;
    }
    if (code->first < 0) continue;
    auto [newest, first_seen] = newest_ns->try_emplace(chunks->Int(0), kMinTime);
    const size_t before = out->value.size();
    Status s = DecodeMetricChunk(chunks->Blob(3), static_cast<size_t>(chunks->Int(2)),
                                 &out->timestamp_ns, &out->value, &times.lookup());
    if (!s.ok()) {
      problems->Add(path_ + ": metric chunk " + std::to_string(id) + ": " + s.message());
      continue;
    }
    const int64_t seen_up_to = newest->second;
    size_t keep = before;
    for (size_t i = before; i < out->value.size(); ++i) {
      const int64_t ts = out->timestamp_ns[i];
      if (ts > seen_up_to) newest->second = std::max(newest->second, ts);
      if (ts > seen_up_to && ts >= query.start_ns && ts < query.end_ns) {
        out->timestamp_ns[keep] = ts;
        out->value[keep] = out->value[i];
        ++keep;
      }
    }
    out->timestamp_ns.resize(keep);
    out->value.resize(keep);
    out->node.insert(out->node.end(), keep - before, node_code);
    out->metric.insert(out->metric.end(), keep - before, code->first);
    out->device.insert(out->device.end(), keep - before, code->second);
  }
  return status;
}

Status NodeStoreReader::SelectSince(const MetricQuery& query) {
  if (since_ && since_->metrics == query.metrics && since_->devices == query.devices &&
      since_->series_count == series_.size()) {
    return OkStatus();
  }
  // Past this many selected series, or half of them, the filter costs about what it saves.
  constexpr size_t kMaxListed = 1024;
  auto sel = std::make_unique<SinceSelection>();
  sel->metrics = query.metrics;
  sel->devices = query.devices;
  sel->series_count = series_.size();
  std::string ids;
  size_t listed = 0;
  for (const SeriesRow& row : series_) {
    if (!Selected(query.metrics, row.metric) || !Selected(query.devices, row.device)) continue;
    if (++listed > kMaxListed) break;
    if (!ids.empty()) ids += ',';
    ids += std::to_string(row.id);
  }
  sel->none = listed == 0;
  sel->every_series = listed > kMaxListed || 2 * listed > series_.size();
  if (!sel->none && !sel->every_series) {
    // `+series_id`: not the series index. With it SQLite seeks each listed series and reads all
    // its chunks since the run began (then drops those at or below the id), a poll growing
    // with the run; the rowid range reads only the chunks written since the last poll.
    TP_ASSIGN_OR_RETURN(sel->stmt, db_->Prepare("SELECT series_id, id, count, data FROM "
                                                "metric_chunks WHERE id > ? AND +series_id IN (" +
                                                ids + ") ORDER BY id"));
  }
  since_ = std::move(sel);
  return OkStatus();
}

Status NodeStoreReader::ReadMetrics(const MetricQuery& query, MetricTable* out,
                                    ReadProblems* problems) {
  if (!Selected(query.nodes, info_.node)) return OkStatus();
  TP_RETURN_IF_ERROR(RefreshSeries());
  Status status;
  struct Wanted {
    int64_t id;
    int32_t metric_code, device_code;
  };
  std::vector<Wanted> wanted;
  for (const SeriesRow& row : series_) {
    if (!Selected(query.metrics, row.metric) || !Selected(query.devices, row.device)) continue;
    wanted.push_back({row.id, out->metrics.Code(row.metric), out->devices.Code(row.device)});
  }
  if (wanted.empty()) return OkStatus();
  int32_t node_code = out->nodes.Code(info_.node);

  // One read transaction for all series: a consistent snapshot even while the writer seals.
  // The statements are reset (their leases dropped) before it ends.
  {
    TP_ASSIGN_OR_RETURN(auto begin, db_->Cached("BEGIN"));
    TP_RETURN_IF_ERROR(begin->Run());
  }
  Status read = [&]() -> Status {
    // Size the columns once from the chunk counts (index only, no blobs read): growing them
    // chunk by chunk copied every value about twice and cost a third of the read.
    {
      // The counts come from the file: the hint is capped by what the chunks' bytes could
      // honestly hold (kHintValuesPerByte is above what real chunks reach), so a few KiB
      // claiming millions of values do not reserve gigabytes. Beyond it, columns just grow.
      constexpr int64_t kHintValuesPerByte = 512;
      TP_ASSIGN_OR_RETURN(
          auto counts,
          db_->Cached("SELECT SUM(min(max(count, 0), " + std::to_string(kMaxMetricChunkValues) +
                      ")), SUM(length(data)) FROM metric_chunks WHERE series_id = ? AND "
                      "last_ns >= ? AND first_ns < ?"));
      size_t expected = 0;
      for (const Wanted& w : wanted) {
        counts->Bind(1, w.id).Bind(2, query.start_ns).Bind(3, query.end_ns);
        if (counts->Step(&status)) {
          const int64_t claimed = std::max<int64_t>(0, counts->Int(0));
          const int64_t bytes = std::max<int64_t>(0, counts->Int(1));
          expected += static_cast<size_t>(std::min(claimed, bytes * kHintValuesPerByte));
        }
        counts->Reset();
      }
      status = OkStatus();  // only a size hint
      const size_t total = out->value.size() + expected;
      out->timestamp_ns.reserve(total);
      out->value.reserve(total);
      out->node.reserve(total);
      out->metric.reserve(total);
      out->device.reserve(total);
    }
    TP_ASSIGN_OR_RETURN(
        auto chunks,
        db_->Cached("SELECT id, count, data, first_ns, last_ns FROM metric_chunks WHERE "
                    "series_id = ? AND last_ns >= ? AND first_ns < ? ORDER BY last_ns"));
    TimesCache times(db_.get());
    for (const Wanted& w : wanted) {
      chunks->Bind(1, w.id).Bind(2, query.start_ns).Bind(3, query.end_ns);
      const size_t series_begin = out->value.size();
      while (chunks->Step(&status)) {
        const size_t before = out->value.size();
        Status s = DecodeMetricChunk(chunks->Blob(2), static_cast<size_t>(chunks->Int(1)),
                                     &out->timestamp_ns, &out->value, &times.lookup());
        if (!s.ok()) {
          problems->Add(path_ + ": metric chunk " + std::to_string(chunks->Int(0)) + ": " +
                        s.message());
          continue;
        }
        // Trim to the window; only the boundary chunks have anything to drop.
        if (chunks->Int(3) >= query.start_ns && chunks->Int(4) < query.end_ns) continue;
        const int64_t* ts = out->timestamp_ns.data();
        size_t keep = before;
        for (size_t i = before; i < out->value.size(); ++i) {
          if (ts[i] >= query.start_ns && ts[i] < query.end_ns) {
            out->timestamp_ns[keep] = out->timestamp_ns[i];
            out->value[keep] = out->value[i];
            ++keep;
          }
        }
        out->timestamp_ns.resize(keep);
        out->value.resize(keep);
      }
      chunks->Reset();
      if (!status.ok()) {
        problems->Add(status.message());
        status = OkStatus();
      }
      const size_t added = out->value.size() - series_begin;
      out->node.insert(out->node.end(), added, node_code);
      out->metric.insert(out->metric.end(), added, w.metric_code);
      out->device.insert(out->device.end(), added, w.device_code);
    }
    return OkStatus();
  }();
  if (auto commit = db_->Cached("COMMIT"); commit.ok()) (void)(*commit)->Run();
  return read;
}

Status NodeStoreReader::ReadEvents(const EventQuery& query, EventTable* out, ReadProblems* problems,
                                   int64_t after_chunk_id, int64_t* max_chunk_id) {
  if (!Selected(query.nodes, info_.node)) return OkStatus();
  int32_t node_code = out->nodes.Code(info_.node);
  // `out`'s dictionary codes by this store's string id, resolved once per id, not hashed per
  // event (ids are dense indexes into strings_).
  std::vector<int32_t> name_codes, category_codes, mode_codes;
  auto code = [](std::vector<int32_t>& memo, Dictionary& dict, uint32_t id,
                 const std::string& value) {
    if (id >= memo.size()) memo.resize(static_cast<size_t>(id) + 1, -1);
    int32_t& c = memo[id];
    if (c < 0) c = dict.Code(value);
    return c;
  };
  // Whether a name or category is selected, decided once per string id (not compared per event).
  std::vector<int8_t> name_ok, category_ok;
  auto chosen = [](std::vector<int8_t>& memo, const std::vector<std::string>& filter, uint32_t id,
                   const std::string& value) {
    if (filter.empty()) return true;
    if (id >= memo.size()) memo.resize(static_cast<size_t>(id) + 1, -1);
    int8_t& ok = memo[id];
    if (ok < 0) ok = Selected(filter, value) ? 1 : 0;
    return ok == 1;
  };
  // Whether an event keeps its args, decided once per (category id, kind) when the query asks.
  std::vector<int8_t> args_ok;
  auto keep_args = [&](uint32_t category_id, model::EventKind kind, const std::string& category) {
    if (!query.args) return false;
    if (!query.keep_args) return true;
    const size_t k =
        static_cast<size_t>(category_id) * 2 + (kind == model::EventKind::kSpan ? 0 : 1);
    if (k >= args_ok.size()) args_ok.resize(k + 1, -1);
    int8_t& ok = args_ok[k];
    if (ok < 0) ok = query.keep_args(category, kind) ? 1 : 0;
    return ok == 1;
  };
  auto keep = [&](int64_t chunk_id, const EventChunkColumns& e) {
    // Room for the whole chunk at once (growing geometrically), not column by column per event,
    // when the query keeps most of it (no filter but the time range, which chose the chunks).
    const bool keeps_most = query.names.empty() && query.categories.empty() && query.ranks.empty();
    const size_t room = out->size() + e.size();
    if (keeps_most && out->start_ns.capacity() < room) {
      const size_t cap = std::max(room, 2 * out->start_ns.capacity());
      for (auto* v : {&out->node, &out->name, &out->category, &out->mode}) v->reserve(cap);
      for (auto* v :
           {&out->rank, &out->pid, &out->tid, &out->step, &out->start_ns, &out->duration_ns}) {
        v->reserve(cap);
      }
      out->kind.reserve(cap);
      out->args.reserve(cap);
    }
    for (size_t i = 0; i < e.size(); ++i) {
      const int64_t start = e.start_ns[i];
      const int64_t end = model::SpanEndNs(start, e.duration_ns[i]);
      if (!(start < query.end_ns && end >= query.start_ns)) continue;
      const std::string* name = StringById(e.name_id[i]);
      const std::string* category = StringById(e.category_id[i]);
      const std::string* mode = StringById(e.mode_id[i]);
      if (!name || !category || !mode) {
        problems->Add(path_ + ": event chunk " + std::to_string(chunk_id) +
                      ": refers to an unknown string id");
        continue;
      }
      if (!chosen(name_ok, query.names, e.name_id[i], *name) ||
          !chosen(category_ok, query.categories, e.category_id[i], *category) ||
          !Selected(query.ranks, e.rank[i])) {
        continue;
      }
      const auto kind = static_cast<model::EventKind>(e.kind[i]);
      out->node.push_back(node_code);
      out->name.push_back(code(name_codes, out->names, e.name_id[i], *name));
      out->category.push_back(code(category_codes, out->categories, e.category_id[i], *category));
      out->mode.push_back(code(mode_codes, out->modes, e.mode_id[i], *mode));
      out->kind.push_back(e.kind[i]);
      out->rank.push_back(e.rank[i]);
      out->pid.push_back(e.pid[i]);
      out->tid.push_back(e.tid[i]);
      out->step.push_back(e.step[i]);
      out->start_ns.push_back(start);
      out->duration_ns.push_back(e.duration_ns[i]);
      if (keep_args(e.category_id[i], kind, *category)) {
        if (query.map_args) {
          std::string kept;
          query.map_args(e.args[i], &kept);
          out->args.push_back(std::move(kept));
        } else {
          out->args.emplace_back(e.args[i]);
        }
      } else {
        out->args.emplace_back();
      }
    }
  };
  return ForEachEventChunk(query.start_ns, query.end_ns, after_chunk_id, max_chunk_id, problems,
                           keep);
}

Status NodeStoreReader::VisitEventChunks(int64_t start_ns, int64_t end_ns, ReadProblems* problems,
                                         const EventChunkVisitor& visit) {
  return ForEachEventChunk(start_ns, end_ns, 0, nullptr, problems, visit);
}

Status NodeStoreReader::ForEachEventChunk(int64_t start_ns, int64_t end_ns, int64_t after_chunk_id,
                                          int64_t* max_chunk_id, ReadProblems* problems,
                                          const EventChunkVisitor& visit) {
  TP_ASSIGN_OR_RETURN(
      auto lease,
      db_->Cached("SELECT id, count, data FROM event_chunks WHERE id > ? AND first_start_ns < ? "
                  "AND max_end_ns >= ? ORDER BY first_start_ns, id"));
  SqliteStmt& chunks = *lease;
  chunks.Bind(1, after_chunk_id).Bind(2, end_ns).Bind(3, start_ns);
  Status status;
  // Chunk k+1 is decompressed and decoded on a second thread while chunk k's events are kept
  // here (two cores read a store of several chunks in about the time of the keeping); the first
  // chunk is decoded on this thread, so a one-chunk store starts no thread, and so is a small
  // chunk (a live poll's few hundred events: a thread costs more than decoding them). Two chunks
  // in memory.
  struct Chunk {
    int64_t id = 0;
    size_t count = 0;
    std::string blob;  // copied: stepping the statement invalidates it
    std::string raw;   // the decompressed chunk, reused: events[i].args view it
    EventChunkColumns events;
    Status status;
    void Decode() { status = DecodeEventChunkColumns(blob, count, &raw, &events); }
  };
  Chunk slots[2];
  Chunk* cur = &slots[0];
  Chunk* next = &slots[1];
  auto fetch = [&](Chunk* c) {
    if (!chunks.Step(&status)) return false;
    c->id = chunks.Int(0);
    c->count = static_cast<size_t>(chunks.Int(1));
    c->blob.assign(chunks.Blob(2));
    return true;
  };
  auto keep = [&](const Chunk& c) {
    if (max_chunk_id) *max_chunk_id = std::max(*max_chunk_id, c.id);
    if (!c.status.ok()) {
      problems->Add(path_ + ": event chunk " + std::to_string(c.id) + ": " + c.status.message());
      return;
    }
    visit(c.id, c.events);
  };
  bool more = fetch(cur);
  if (more) cur->Decode();
  while (more) {
    const bool more_next = fetch(next);
    std::future<void> decoding;
    if (more_next && next->count >= kThreadedDecodeEvents) {
      try {
        decoding = std::async(std::launch::async, [next] { next->Decode(); });
      } catch (const std::system_error&) {
        // No thread to be had: decoded on this one, below.
      }
    }
    keep(*cur);
    if (more_next && !decoding.valid()) next->Decode();
    if (decoding.valid()) decoding.get();
    std::swap(cur, next);
    more = more_next;
  }
  if (!status.ok()) problems->Add(status.message());
  return OkStatus();
}

StatusOr<std::vector<model::Finding>> NodeStoreReader::Findings() {
  TP_ASSIGN_OR_RETURN(SqliteStmt stmt,
                      db_->Prepare("SELECT rule, severity, node, device, start_ns, end_ns, "
                                   "message, recommendation, evidence "
                                   "FROM findings ORDER BY start_ns, id"));
  std::vector<model::Finding> out;
  Status status;
  while (stmt.Step(&status)) {
    model::Finding f;
    f.rule = std::string(stmt.Text(0));
    if (!model::ParseSeverity(std::string(stmt.Text(1)), &f.severity)) {
      f.severity = model::Severity::kWarning;
    }
    f.node = std::string(stmt.Text(2));
    f.device = std::string(stmt.Text(3));
    f.start_ns = stmt.Int(4);
    f.end_ns = stmt.Int(5);
    f.message = std::string(stmt.Text(6));
    f.recommendation = std::string(stmt.Text(7));
    f.evidence_json = std::string(stmt.Text(8));
    out.push_back(std::move(f));
  }
  TP_RETURN_IF_ERROR(status);
  return out;
}

StatusOr<std::map<std::string, int64_t>> NodeStoreReader::Counters() {
  TP_ASSIGN_OR_RETURN(SqliteStmt stmt, db_->Prepare("SELECT name, value FROM counters"));
  std::map<std::string, int64_t> out;
  Status status;
  while (stmt.Step(&status)) out[std::string(stmt.Text(0))] = stmt.Int(1);
  TP_RETURN_IF_ERROR(status);
  return out;
}

StatusOr<std::vector<Annotation>> NodeStoreReader::Annotations() {
  TP_ASSIGN_OR_RETURN(SqliteStmt stmt,
                      db_->Prepare("SELECT ts_ns, key, value FROM annotations ORDER BY ts_ns, id"));
  std::vector<Annotation> out;
  Status status;
  while (stmt.Step(&status)) {
    out.push_back({stmt.Int(0), std::string(stmt.Text(1)), std::string(stmt.Text(2))});
  }
  TP_RETURN_IF_ERROR(status);
  return out;
}

StatusOr<std::optional<int64_t>> NodeStoreReader::LatestTimestampNs() {
  TP_ASSIGN_OR_RETURN(
      SqliteStmt stmt,
      db_->Prepare("SELECT (SELECT max(last_ns) FROM metric_chunks), (SELECT max(max_end_ns) FROM "
                   "event_chunks)"));
  Status status;
  std::optional<int64_t> latest;
  if (stmt.Step(&status)) {
    for (int col = 0; col < 2; ++col) {
      if (!stmt.IsNull(col)) latest = std::max(latest.value_or(INT64_MIN), stmt.Int(col));
    }
  }
  TP_RETURN_IF_ERROR(status);
  return latest;
}

StatusOr<int64_t> NodeStoreReader::EventCount() {
  TP_ASSIGN_OR_RETURN(SqliteStmt stmt,
                      db_->Prepare("SELECT coalesce(sum(count), 0) FROM event_chunks"));
  Status status;
  int64_t n = stmt.Step(&status) ? stmt.Int(0) : 0;
  TP_RETURN_IF_ERROR(status);
  return n;
}

StatusOr<std::pair<int64_t, int64_t>> NodeStoreReader::EventGeneration() {
  TP_ASSIGN_OR_RETURN(auto stmt,
                      db_->Cached("SELECT coalesce(max(id), 0), count(*) FROM event_chunks"));
  Status status;
  std::pair<int64_t, int64_t> g{0, 0};
  if (stmt->Step(&status)) g = {stmt->Int(0), stmt->Int(1)};
  TP_RETURN_IF_ERROR(status);
  return g;
}

}  // namespace trainprof::store
