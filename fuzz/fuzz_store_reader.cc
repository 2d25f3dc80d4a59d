// libFuzzer target: the whole store reader over a hostile SQLite file (issue 20). A genuine run
// (one node: three metric series over several chunks, step/phase spans with args, instants,
// findings, counters, annotations) is written once; each input then becomes that node's
// store.sqlite in one of three ways, chosen by byte 0:
//   0: the input's bytes are the file (SQLite's header and pages are the attacker's);
//   1: the genuine file with byte patches (3 bytes of offset, 1 byte xor each);
//   2: the genuine file with rows rewritten through SQL: each operation sets one column of one
//      row of any table to a fuzzed integer, real, text, blob or NULL, or deletes rows, or
//      drops/recreates a table (chunk headers, counts, codecs, string ids, meta, schema).
// The run is then opened with RunReader and everything is read: metrics (all and since a
// cursor), events (all and since), steps, findings, series, counters, annotations, node meta,
// latest timestamp, event count; and the node's store directly with NodeStoreReader.
// Invariants: no crash, no allocation beyond ASan's limit, tables whose columns agree in size.
#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "analyze/trace/rank_trace.h"
#include "model/event.h"
#include "model/finding.h"
#include "model/run_metadata.h"
#include "store/node_store_reader.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace {

using namespace trainprof;
using namespace trainprof::store;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;

void Check(bool ok) {
  if (!ok) std::abort();
}

std::string ReadAll(const std::string& path) {
  std::string bytes;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return bytes;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  std::fclose(f);
  return bytes;
}

void WriteAll(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Genuine {
  std::string dir;    // the run directory the inputs are read in
  std::string store;  // its node store's path
  std::string bytes;  // the genuine store file
};

const Genuine& MakeGenuine() {
  static Genuine g = [] {
    Genuine out;
    // tmpfs when there is one: every input is a SQLite write or two, and their fsyncs
    // on a disk would bound the fuzzer to a few dozen inputs a second.
    std::string tmpl = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    tmpl += "/tp_fuzz_store_reader_XXXXXX";
    out.dir = mkdtemp(tmpl.data());
    static std::string made = out.dir;
    std::atexit([] {  // tmpfs is memory: leave nothing behind
      std::error_code ec;
      std::filesystem::remove_all(made, ec);
    });
    model::RunMetadata m;
    m.run_id = "fuzz";
    m.name = "fuzz";
    m.start_ns = kT0;
    m.end_ns = kT0 + 60'000'000'000;
    Check(WriteRunMetadata(out.dir, m).ok());
    model::NodeInfo node;
    node.node = "node0";
    node.hostname = "node0.local";
    auto w = OpenNodeWriter(out.dir, node);
    Check(w.ok());
    SeriesId cpu = (*w)->Series("cpu_utilization_ratio", "total");
    SeriesId gpu = (*w)->Series("gpu_utilization_ratio", "gpu0");
    SeriesId mem = (*w)->Series("gpu_memory_used_bytes", "gpu0");
    for (int flush = 0; flush < 3; ++flush) {
      for (int i = 0; i < 40; ++i) {
        const int64_t t = kT0 + (flush * 40 + i) * 100'000'000LL;
        (*w)->Append(cpu, t, 0.01 * (i % 100));
        (*w)->Append(gpu, t, i % 2 ? 0.5 : 0.25);
        (*w)->Append(mem, t, 1e9 + i * 4096.0);
      }
      for (int s = 0; s < 4; ++s) {
        const int64_t step = flush * 4 + s;
        const int64_t t = kT0 + step * 1'000'000'000LL;
        model::Event e;
        e.start_ns = t;
        e.duration_ns = 900'000'000;
        e.name = "step";
        e.category = model::kCategoryStep;
        e.mode = "train";
        e.step = step;
        e.pid = 7;
        e.tid = 7;
        e.rank = 0;
        e.args = "{\"batch\":" + std::to_string(step) + "}";
        (*w)->AppendEvent(e);
        e.name = "forward";
        e.category = model::kCategoryForward;
        e.duration_ns = 300'000'000;
        e.args = "";
        (*w)->AppendEvent(e);
        e.name = "backward";
        e.category = model::kCategoryBackward;
        e.start_ns = t + 300'000'000;
        e.duration_ns = 500'000'000;
        (*w)->AppendEvent(e);
        e.kind = model::EventKind::kInstant;
        e.name = "mark";
        e.category = "user";
        e.duration_ns = 0;
        (*w)->AppendEvent(e);
      }
      Check((*w)->Flush().ok());
    }
    model::Finding f;
    f.rule = "low_gpu_utilization";
    f.node = "node0";
    f.device = "gpu0";
    f.start_ns = kT0;
    f.end_ns = kT0 + 10'000'000'000;
    f.message = "GPU 0 idle";
    f.recommendation = "feed it";
    f.evidence_json = "{\"mean\":0.3}";
    (*w)->AddFinding(f);
    (*w)->AddCounter("import_args_too_deep", 2);
    (*w)->Annotate(kT0, "note", "hello");
    (*w)->SetMeta("source", "fuzz");
    Check((*w)->Close().ok());
    out.store = NodeStorePath(out.dir, "node0");
    out.bytes = ReadAll(out.store);
    Check(out.bytes.size() > 4096);
    return out;
  }();
  return g;
}

// One column of one table that operations may rewrite; `key` selects rows by position.
struct Target {
  const char* table;
  const char* column;
  const char* key;
};
constexpr Target kTargets[] = {
    {"meta", "value", "key"},
    {"meta", "key", "key"},
    {"strings", "id", "id"},
    {"strings", "text", "id"},
    {"series", "id", "id"},
    {"series", "metric", "id"},
    {"series", "device", "id"},
    {"metric_chunks", "series_id", "id"},
    {"metric_chunks", "first_ns", "id"},
    {"metric_chunks", "last_ns", "id"},
    {"metric_chunks", "count", "id"},
    {"metric_chunks", "sealed", "id"},
    {"metric_chunks", "data", "id"},
    {"metric_chunks", "id", "id"},
    {"metric_times", "count", "id"},
    {"metric_times", "data", "id"},
    {"event_chunks", "first_start_ns", "id"},
    {"event_chunks", "last_start_ns", "id"},
    {"event_chunks", "max_end_ns", "id"},
    {"event_chunks", "count", "id"},
    {"event_chunks", "data", "id"},
    {"event_chunks", "id", "id"},
    {"findings", "severity", "id"},
    {"findings", "start_ns", "id"},
    {"findings", "end_ns", "id"},
    {"findings", "evidence", "id"},
    {"findings", "rule", "id"},
    {"counters", "value", "name"},
    {"annotations", "ts_ns", "id"},
    {"annotations", "value", "id"},
};
constexpr size_t kTargetCount = sizeof(kTargets) / sizeof(kTargets[0]);

// Reads a byte from the input (0 past its end).
struct Input {
  const uint8_t* data;
  size_t size;
  size_t at = 0;
  bool done() const { return at >= size; }
  uint8_t Byte() { return at < size ? data[at++] : 0; }
  int64_t Int64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | Byte();
    return static_cast<int64_t>(v);
  }
  std::string_view Bytes(size_t n) {
    n = std::min(n, size - std::min(at, size));
    std::string_view s(reinterpret_cast<const char*>(data) + at, n);
    at += n;
    return s;
  }
};

void Rewrite(const std::string& path, Input& in) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return;
  }
  for (int ops = 0; ops < 16 && !in.done(); ++ops) {
    const uint8_t op = in.Byte();
    const Target& t = kTargets[in.Byte() % kTargetCount];
    const int row = in.Byte() % 16;
    std::string sql;
    if (op % 16 == 15) {
      sql = std::string("DELETE FROM ") + t.table + " WHERE " + t.key + " IN (SELECT " + t.key +
            " FROM " + t.table + " LIMIT 1 OFFSET " + std::to_string(row) + ")";
    } else if (op % 16 == 14) {
      // A table replaced by one of the same name with loose columns (any types, no keys).
      sqlite3_exec(db, (std::string("DROP TABLE IF EXISTS ") + t.table).c_str(), nullptr, nullptr,
                   nullptr);
      if (row % 2) {
        sql = std::string("CREATE TABLE ") + t.table + "(" + t.key + ", " + t.column + ")";
      }
    } else {
      sql = std::string("UPDATE ") + t.table + " SET " + t.column + " = ?1 WHERE " + t.key +
            " IN (SELECT " + t.key + " FROM " + t.table + " LIMIT 1 OFFSET " + std::to_string(row) +
            ")";
    }
    if (sql.empty()) continue;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      sqlite3_finalize(stmt);
      continue;
    }
    if (sqlite3_bind_parameter_count(stmt) == 1) {
      switch (op % 8) {
        case 0:
          sqlite3_bind_int64(stmt, 1, in.Int64());
          break;
        case 1:
          sqlite3_bind_int64(stmt, 1, static_cast<int8_t>(in.Byte()));
          break;
        case 2: {
          const int64_t bits = in.Int64();
          double d;
          std::memcpy(&d, &bits, sizeof d);
          sqlite3_bind_double(stmt, 1, d);
          break;
        }
        case 3: {
          std::string_view s = in.Bytes(in.Byte());
          sqlite3_bind_text(stmt, 1, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
          break;
        }
        case 4:
          sqlite3_bind_null(stmt, 1);
          break;
        default: {
          std::string_view s = in.Bytes(in.Byte() * 4);
          sqlite3_bind_blob(stmt, 1, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
          break;
        }
      }
    }
    sqlite3_step(stmt);
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
}

void CheckMetrics(const MetricTable& t) {
  const size_t n = t.timestamp_ns.size();
  Check(t.value.size() == n && t.node.size() == n && t.metric.size() == n && t.device.size() == n);
}

void CheckEvents(const EventTable& t) {
  const size_t n = t.start_ns.size();
  Check(t.duration_ns.size() == n && t.name.size() == n && t.category.size() == n &&
        t.kind.size() == n && t.args.size() == n && t.node.size() == n && t.step.size() == n);
}

void ReadEverything(const std::string& dir, const std::string& store) {
  if (auto r = RunReader::Open(dir); r.ok()) {
    RunReader& run = **r;
    if (auto m = run.SystemMetrics({}); m.ok()) CheckMetrics(*m);
    if (auto e = run.Events({}); e.ok()) CheckEvents(*e);
    ChunkCursor metric_cursor;
    if (auto m = run.SystemMetricsSince(&metric_cursor); m.ok()) CheckMetrics(*m);
    EventCursor event_cursor;
    if (auto e = run.EventsSince(&event_cursor); e.ok()) CheckEvents(*e);
    if (auto s = run.Steps(); s.ok()) {
      Check(s->duration_ns.size() == s->start_ns.size() && s->step.size() == s->start_ns.size());
    }
    (void)run.Findings();
    (void)run.ListSeries();
    (void)run.Counters();
    (void)run.Annotations();
    (void)run.NodeMeta();
    (void)run.LatestTimestampNs();
    (void)run.EventCount();
    (void)run.Refresh();
  }
  if (auto r = NodeStoreReader::Open(store); r.ok()) {
    NodeStoreReader& node = **r;
    (void)node.ListSeries();
    MetricTable metrics;
    ReadProblems problems;
    if (node.ReadMetrics({}, &metrics, &problems).ok()) CheckMetrics(metrics);
    EventTable events;
    if (node.ReadEvents({}, &events, &problems).ok()) CheckEvents(events);
    // analyze's read: the chunks split by rank as they are decoded.
    analyze::trace::StoreSplit split;
    if (analyze::trace::SplitStoreByRank(node, &problems, &split).ok()) {
      for (const analyze::trace::RankTrace& t : split.ranks) {
        for (const auto& a : t.gpu) Check(static_cast<size_t>(a.name) < t.names->values().size());
        for (const auto& c : t.cpu) Check(static_cast<size_t>(c.name) < t.names->values().size());
      }
      CheckEvents(split.step_events);
    }
    (void)node.Findings();
    (void)node.Counters();
    (void)node.Annotations();
    (void)node.Meta();
    (void)node.LatestTimestampNs();
    (void)node.EventCount();
    (void)node.EventGeneration();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Genuine& g = MakeGenuine();
  std::error_code ec;
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    std::filesystem::remove(g.store + suffix, ec);
  }
  Input in{data, size, 1};
  switch (data[0] % 3) {
    case 0:
      WriteAll(g.store, in.Bytes(size));
      break;
    case 1: {
      std::string bytes = g.bytes;
      while (in.size - in.at >= 4) {
        size_t offset = 0;
        for (int i = 0; i < 3; ++i) offset = (offset << 8) | in.Byte();
        bytes[offset % bytes.size()] ^= static_cast<char>(in.Byte() | 1);
      }
      WriteAll(g.store, bytes);
      break;
    }
    default:
      WriteAll(g.store, g.bytes);
      Rewrite(g.store, in);
      break;
  }
  ReadEverything(g.dir, g.store);
  return 0;
}
