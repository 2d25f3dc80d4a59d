#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <system_error>
#include <thread>

#include "base/files.h"
#include "base/test_child.h"
#include "base/time.h"
#include "store/node_store_reader.h"
#include "store/node_store_writer.h"
#include "store/store_test_util.h"

namespace trainprof::store {
namespace {

using testing::MakeTempDir;
using testing::TestNode;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;

TEST(NodeStoreTest, WritesAndReadsMetricsEventsFindingsCounters) {
  std::string path = MakeTempDir() + "/n/store.sqlite";
  {
    WriterOptions opts;
    opts.seal_values = 100;  // exercise tails and seals
    auto w = NodeStoreWriter::Open(path, TestNode(), opts);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    SeriesId cpu = (*w)->Series("cpu_utilization_ratio", "total");
    SeriesId mem = (*w)->Series("memory_used_bytes", "");
    for (int i = 0; i < 250; ++i) {
      (*w)->Append(cpu, kT0 + i * 100'000'000LL, (i % 100) / 100.0);
      (*w)->Append(mem, kT0 + i * 100'000'000LL, 1e9 + i);
      if (i % 30 == 0) {
        ASSERT_TRUE((*w)->Flush().ok());
      }
    }
    model::Event step;
    step.name = "step";
    step.category = "step";
    step.mode = "train";
    step.start_ns = kT0;
    step.duration_ns = 5'000'000;
    step.step = 1;
    step.pid = 42;
    (*w)->AppendEvent(step);
    model::Event mark;
    mark.kind = model::EventKind::kInstant;
    mark.name = "download_start";
    mark.category = "mark";
    mark.start_ns = kT0 + 1;
    (*w)->AppendEvent(mark);
    model::Finding f;
    f.rule = "StepOutlier";
    f.node = "node0";
    f.start_ns = kT0;
    f.end_ns = kT0 + 10;
    f.message = "step 7 took 3x the median";
    (*w)->AddFinding(f);
    (*w)->AddCounter("parse_errors", 2);
    (*w)->AddCounter("parse_errors", 3);
    (*w)->Annotate(kT0, "note", "hello");
    ASSERT_TRUE((*w)->Close().ok());
    EXPECT_EQ((*w)->stats().values_written, 500);
  }
  EXPECT_FALSE(PathExists(path + "-wal"));  // a closed store is one file
  {
    // ...holding sealed chunks only: every tail was folded into a sealed chunk at close.
    auto db = SqliteDb::Open(path, SqliteDb::Mode::kReadOnly);
    ASSERT_TRUE(db.ok());
    auto stmt = (*db)->Prepare("SELECT count(*) FROM metric_chunks WHERE sealed = 0");
    ASSERT_TRUE(stmt.ok());
    Status st;
    ASSERT_TRUE(stmt->Step(&st));
    EXPECT_EQ(stmt->Int(0), 0);
  }

  auto r = NodeStoreReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->node(), "node0");
  EXPECT_EQ((*r)->info().cpu_cores, 32);
  MetricTable t;
  ReadProblems problems;
  MetricQuery q;
  q.metrics = {"cpu_utilization_ratio"};
  ASSERT_TRUE((*r)->ReadMetrics(q, &t, &problems).ok());
  ASSERT_EQ(t.size(), 250u);
  EXPECT_EQ(problems.corrupt_chunks, 0);
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t.timestamp_ns[i], kT0 + static_cast<int64_t>(i) * 100'000'000LL);
    EXPECT_DOUBLE_EQ(t.value[i], static_cast<double>(i % 100) / 100.0);
  }
  EXPECT_EQ(t.metrics.at(t.metric[0]), "cpu_utilization_ratio");
  EXPECT_EQ(t.devices.at(t.device[0]), "total");

  // Time window: [start, end).
  MetricTable w;
  q.start_ns = kT0 + 10 * 100'000'000LL;
  q.end_ns = kT0 + 20 * 100'000'000LL;
  ASSERT_TRUE((*r)->ReadMetrics(q, &w, &problems).ok());
  EXPECT_EQ(w.size(), 10u);

  EventTable ev;
  ASSERT_TRUE((*r)->ReadEvents({}, &ev, &problems).ok());
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev.names.at(ev.name[0]), "step");
  EXPECT_EQ(ev.step[0], 1);
  EXPECT_EQ(ev.rank[0], model::kMissing);
  EXPECT_EQ(ev.kind[1], static_cast<uint8_t>(model::EventKind::kInstant));

  auto findings = (*r)->Findings();
  ASSERT_TRUE(findings.ok());
  ASSERT_EQ(findings->size(), 1u);
  EXPECT_EQ((*findings)[0].rule, "StepOutlier");
  auto counters = (*r)->Counters();
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ(counters->at("parse_errors"), 5);
  auto latest = (*r)->LatestTimestampNs();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(**latest, kT0 + 249 * 100'000'000LL);
  auto series = (*r)->ListSeries();
  ASSERT_TRUE(series.ok());
  ASSERT_EQ(series->size(), 2u);
  EXPECT_EQ((*series)[0].count, 250);
}

// Flush(2), an import's last flush: a batch that would be one chunk is encoded by two threads
// as two chunks, and reads back as the same events, in the same order, as Flush() stored them.
TEST(NodeStoreTest, TwoThreadFlushStoresTheSameEventsAsOne) {
  const std::string dir = MakeTempDir();
  std::mt19937_64 rng(7);
  std::vector<model::Event> events(20'000);
  for (size_t i = 0; i < events.size(); ++i) {
    model::Event& e = events[i];
    e.name = "op" + std::to_string(rng() % 300);
    e.category = i % 3 == 0 ? "kernel" : "cpu_op";
    e.start_ns = kT0 + static_cast<int64_t>(rng() % 1'000'000'000);  // out of order
    e.duration_ns = static_cast<int64_t>(rng() % 100'000);
    e.pid = 7;
    e.tid = static_cast<int64_t>(i % 5);
    e.step = static_cast<int64_t>(i / 1000);
    e.args = R"({"External id":)" + std::to_string(i) + "}";
  }
  auto write = [&](const std::string& path, int threads, size_t n) {
    auto w = NodeStoreWriter::Open(path, TestNode());
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    for (size_t i = 0; i < n; ++i) (*w)->AppendEvent(events[i]);
    EXPECT_TRUE((*w)->Flush(threads).ok());
    EXPECT_TRUE((*w)->Close().ok());
  };
  auto chunks = [](const std::string& path) {
    auto db = SqliteDb::Open(path, SqliteDb::Mode::kReadOnly);
    EXPECT_TRUE(db.ok());
    auto stmt = (*db)->Prepare("SELECT count(*) FROM event_chunks");
    EXPECT_TRUE(stmt.ok());
    Status st;
    EXPECT_TRUE(stmt->Step(&st));
    return stmt->Int(0);
  };
  auto read = [](const std::string& path) {
    auto r = NodeStoreReader::Open(path);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EventTable ev;
    ReadProblems problems;
    EXPECT_TRUE((*r)->ReadEvents({}, &ev, &problems).ok());
    EXPECT_EQ(problems.corrupt_chunks, 0);
    return ev;
  };
  write(dir + "/one/store.sqlite", 1, events.size());
  write(dir + "/two/store.sqlite", 2, events.size());
  EXPECT_EQ(chunks(dir + "/one/store.sqlite"), 1);
  EXPECT_EQ(chunks(dir + "/two/store.sqlite"), 2);
  const EventTable a = read(dir + "/one/store.sqlite");
  const EventTable b = read(dir + "/two/store.sqlite");
  ASSERT_EQ(a.size(), events.size());
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a.start_ns[i], b.start_ns[i]) << i;
    ASSERT_LE(i == 0 ? a.start_ns[i] : a.start_ns[i - 1], a.start_ns[i]) << i;  // by start
    ASSERT_EQ(a.duration_ns[i], b.duration_ns[i]) << i;
    ASSERT_EQ(a.names.at(a.name[i]), b.names.at(b.name[i])) << i;
    ASSERT_EQ(a.categories.at(a.category[i]), b.categories.at(b.category[i])) << i;
    ASSERT_EQ(a.tid[i], b.tid[i]) << i;
    ASSERT_EQ(a.step[i], b.step[i]) << i;
    ASSERT_EQ(a.args[i], b.args[i]) << i;
  }
  // A batch under twice the smallest half stays one chunk.
  write(dir + "/small/store.sqlite", 2, 2 * NodeStoreWriter::kMinSplitChunkEvents - 1);
  EXPECT_EQ(chunks(dir + "/small/store.sqlite"), 1);
}

// ReleaseBuffers between batches (emptied or not, before one- and two-thread flushes) frees
// what the writer keeps for the next batch and loses nothing: the same events and values as a
// writer that kept them.
TEST(NodeStoreTest, ReleasedBuffersLoseNothing) {
  const std::string dir = MakeTempDir();
  auto write = [&](const std::string& path, bool release) {
    auto w = NodeStoreWriter::Open(path, TestNode());
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    const SeriesId cpu = (*w)->Series("cpu_utilization_ratio", "total");
    for (int batch = 0; batch < 6; ++batch) {
      for (int i = 0; i < 3000; ++i) {
        model::Event e;
        e.name = "op" + std::to_string(i % 17);
        e.category = "cpu_op";
        e.start_ns = kT0 + batch * 1'000'000'000LL + (i * 7919) % 1'000'000;
        e.duration_ns = i;
        e.pid = 7;
        e.tid = batch;
        e.args = R"({"i":)" + std::to_string(i) + "}";
        (*w)->AppendEvent(e);
        (*w)->Append(cpu, kT0 + (batch * 3000 + i) * 1000LL, (i % 100) / 100.0);
        if (release && i == 1500) (*w)->ReleaseBuffers();  // events buffered: kept
      }
      EXPECT_TRUE((*w)->Flush(batch % 2 + 1).ok());
      if (release) (*w)->ReleaseBuffers();
    }
    EXPECT_TRUE((*w)->Close().ok());
  };
  write(dir + "/kept/store.sqlite", false);
  write(dir + "/released/store.sqlite", true);
  auto read = [](const std::string& path) {
    auto r = NodeStoreReader::Open(path);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EventTable ev;
    MetricTable mt;
    ReadProblems problems;
    EXPECT_TRUE((*r)->ReadEvents({}, &ev, &problems).ok());
    EXPECT_TRUE((*r)->ReadMetrics({}, &mt, &problems).ok());
    EXPECT_EQ(problems.corrupt_chunks, 0);
    std::vector<std::string> rows;
    for (size_t i = 0; i < ev.size(); ++i) {
      rows.push_back(ev.names.at(ev.name[i]) + "|" + std::to_string(ev.start_ns[i]) + "|" +
                     std::to_string(ev.duration_ns[i]) + "|" + std::to_string(ev.tid[i]) + "|" +
                     ev.args[i]);
    }
    for (size_t i = 0; i < mt.size(); ++i) {
      rows.push_back(std::to_string(mt.timestamp_ns[i]) + "=" + std::to_string(mt.value[i]));
    }
    std::sort(rows.begin(), rows.end());
    return rows;
  };
  const std::vector<std::string> kept = read(dir + "/kept/store.sqlite");
  EXPECT_EQ(kept.size(), 2u * 6 * 3000);
  EXPECT_EQ(read(dir + "/released/store.sqlite"), kept);
}

// A writer with auto-flush (the agent's) where no thread can be started: Open succeeds without
// its flush thread, and Flush and Close write everything. (Before, std::system_error left
// Open.) In a child at RLIMIT_NPROC 1, as an unprivileged uid when this is root.
TEST(NodeStoreTest, AutoFlushWriterWithNoThreadToBeHadWritesAtFlushAndClose) {
  const std::string dir = MakeTempDir();
  const test_child::AtProcessLimit at = {.uid = 61003, .limit = 1, .threads_ok = 0};
  if (geteuid() == 0) {
    ASSERT_EQ(chown(dir.c_str(), at.uid, at.uid), 0);
  }
  const std::string path = dir + "/n/store.sqlite";
  const int code = test_child::RunAtProcessLimit(at, [&] {
    WriterOptions opts;
    opts.auto_flush_interval_ns = 1'000'000;
    auto w = NodeStoreWriter::Open(path, TestNode(), opts);
    if (!w.ok()) return 13;
    SeriesId cpu = (*w)->Series("cpu_utilization_ratio", "total");
    for (int i = 0; i < 100; ++i) (*w)->Append(cpu, kT0 + i, 0.5);
    if (!(*w)->Flush().ok()) return 14;
    for (int i = 100; i < 200; ++i) (*w)->Append(cpu, kT0 + i, 0.5);
    return (*w)->Close().ok() ? 0 : 15;
  });
  ASSERT_EQ(code, 0) << test_child::Meaning(code) << " (13-15: open, flush or close failed)";
  auto r = NodeStoreReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  MetricTable t;
  ReadProblems problems;
  ASSERT_TRUE((*r)->ReadMetrics({}, &t, &problems).ok());
  EXPECT_EQ(t.size(), 200u);
}

TEST(NodeStoreTest, ReopenAppendsToExistingStore) {
  std::string path = MakeTempDir() + "/store.sqlite";
  for (int round = 0; round < 2; ++round) {
    auto w = NodeStoreWriter::Open(path, TestNode());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    SeriesId s = (*w)->Series(round == 0 ? "a" : "b", "");
    SeriesId a = (*w)->Series("a", "");
    (*w)->Append(a, kT0 + round, 1.0);
    (*w)->Append(s, kT0 + 10 + round, 2.0);
    model::Event e;
    e.name = round == 0 ? "x" : "y";
    (*w)->AppendEvent(e);
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto r = NodeStoreReader::Open(path);
  ASSERT_TRUE(r.ok());
  MetricTable t;
  ReadProblems p;
  ASSERT_TRUE((*r)->ReadMetrics({}, &t, &p).ok());
  EXPECT_EQ(t.size(), 4u);
  EventTable ev;
  ASSERT_TRUE((*r)->ReadEvents({}, &ev, &p).ok());
  ASSERT_EQ(ev.size(), 2u);
}

int64_t QueryInt(const std::string& path, const std::string& sql) {
  auto db = SqliteDb::Open(path, SqliteDb::Mode::kReadOnly);
  if (!db.ok()) return -1;
  auto stmt = (*db)->Prepare(sql);
  Status st;
  if (!stmt.ok() || !stmt->Step(&st)) return -1;
  return stmt->Int(0);
}

// Format 2: the series of one tick (a sampler's, or SageMaker's per metric type) carry the same
// jittered timestamps; they are stored once per flush, in metric_times, and read back exactly,
// live (tails) and after sealing. A timestamp column goes with the last tail referring to it.
TEST(NodeStoreTest, SeriesOfOneTickShareOneTimestampColumn) {
  std::string path = MakeTempDir() + "/store.sqlite";
  std::mt19937_64 rng(16);
  std::vector<int64_t> ticks, lone_ticks;
  for (int i = 0; i < 250; ++i) {
    ticks.push_back(kT0 + i * 500'000'000LL + static_cast<int64_t>(rng() % 900'000));
    lone_ticks.push_back(kT0 + i * 500'000'000LL + static_cast<int64_t>(rng() % 900'000));
  }
  auto value = [](int s, int i) { return static_cast<double>((s * 7 + i * 13) % 101) / 100; };
  constexpr int kSeries = 40;
  WriterOptions opts;
  opts.seal_values = 100;
  auto w = NodeStoreWriter::Open(path, TestNode(), opts);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<SeriesId> ids;
  for (int s = 0; s < kSeries; ++s)
    ids.push_back((*w)->Series("cpu_utilization_ratio", "cpu" + std::to_string(s)));
  SeriesId lone = (*w)->Series("memory_utilization_ratio", "");
  auto reader = NodeStoreReader::Open(path);
  ASSERT_TRUE(reader.ok());
  auto expect_all = [&](size_t n_ticks) {
    MetricTable t;
    ReadProblems p;
    ASSERT_TRUE((*reader)->ReadMetrics({}, &t, &p).ok());
    EXPECT_EQ(p.corrupt_chunks, 0);
    ASSERT_EQ(t.size(), (kSeries + 1) * n_ticks);
    std::map<std::pair<std::string, int64_t>, double> got;
    for (size_t i = 0; i < t.size(); ++i) {
      got[{t.devices.at(t.device[i]) + t.metrics.at(t.metric[i]), t.timestamp_ns[i]}] = t.value[i];
    }
    ASSERT_EQ(got.size(), t.size());
    for (size_t i = 0; i < n_ticks; ++i) {
      for (int s = 0; s < kSeries; ++s) {
        auto it = got.find({"cpu" + std::to_string(s) + "cpu_utilization_ratio", ticks[i]});
        ASSERT_NE(it, got.end()) << s << " " << i;
        ASSERT_EQ(std::bit_cast<uint64_t>(it->second),
                  std::bit_cast<uint64_t>(value(s, static_cast<int>(i))));
      }
      auto it = got.find({"memory_utilization_ratio", lone_ticks[i]});
      ASSERT_NE(it, got.end()) << i;
      ASSERT_EQ(it->second, value(99, static_cast<int>(i)));
    }
  };
  for (size_t i = 0; i < ticks.size(); ++i) {
    for (int s = 0; s < kSeries; ++s) (*w)->Append(ids[s], ticks[i], value(s, static_cast<int>(i)));
    (*w)->Append(lone, lone_ticks[i], value(99, static_cast<int>(i)));
    if (i % 30 == 29) {
      ASSERT_TRUE((*w)->Flush().ok());
      expect_all(i + 1);
      // One column per flush still in tails, one per seal (values since the last seal >= 100:
      // at 120 and 240 ticks): every chunk of a tick's 40 series refers to one.
      const int64_t sealed = static_cast<int64_t>((i + 1) / 120);
      const int64_t tails = static_cast<int64_t>(((i + 1) % 120) / 30);
      EXPECT_EQ(QueryInt(path, "SELECT count(*) FROM metric_times"), sealed + tails) << i;
    }
  }
  ASSERT_TRUE((*w)->Close().ok());
  expect_all(ticks.size());
  // Sealed at 120 and 240 ticks and at close: three columns; the lone series keeps its own.
  EXPECT_EQ(QueryInt(path, "SELECT count(*) FROM metric_times"), 3);
  EXPECT_EQ(QueryInt(path, "SELECT sum(count) FROM metric_times"), 250);
  EXPECT_EQ(QueryInt(path, "SELECT value FROM meta WHERE key = 'format_version'"), 2);
  // Bytes: the columns and chunks together stay within 2 bytes per value where every series
  // keeping its own jittered timestamps took more than 3.
  const int64_t bytes = QueryInt(path, "SELECT sum(length(data)) FROM metric_chunks") +
                        QueryInt(path, "SELECT sum(length(data)) FROM metric_times");
  EXPECT_LT(bytes, 2 * 250 * (kSeries + 1));

  // A damaged column makes the chunks that refer to it unreadable, counted and named; the lone
  // series' chunks still read.
  {
    auto db = SqliteDb::Open(path, SqliteDb::Mode::kReadWriteCreate);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("UPDATE metric_times SET data = x'01ff'").ok());
  }
  auto damaged = NodeStoreReader::Open(path);
  ASSERT_TRUE(damaged.ok());
  MetricTable t;
  ReadProblems p;
  ASSERT_TRUE((*damaged)->ReadMetrics({}, &t, &p).ok());
  EXPECT_EQ(t.size(), 250u);
  EXPECT_EQ(p.corrupt_chunks, 3 * kSeries);
  ASSERT_FALSE(p.messages.empty());
  EXPECT_NE(p.messages[0].find("timestamp column"), std::string::npos) << p.messages[0];
}

// A format 1 store (no metric_times table; chunks with their own timestamps) reads as before,
// and a writer appending to it marks it format 2.
TEST(NodeStoreTest, FormatOneStoreReadsAndTakesAppends) {
  std::string path = MakeTempDir() + "/store.sqlite";
  {
    auto w = NodeStoreWriter::Open(path, TestNode());
    ASSERT_TRUE(w.ok());
    SeriesId a = (*w)->Series("a", "");
    for (int i = 0; i < 3000; ++i) (*w)->Append(a, kT0 + i * 1'000'003LL, i / 100.0);
    ASSERT_TRUE((*w)->Close().ok());
  }
  {
    auto db = SqliteDb::Open(path, SqliteDb::Mode::kReadWriteCreate);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("DROP TABLE metric_times").ok());
    ASSERT_TRUE((*db)->Exec("UPDATE meta SET value = '1' WHERE key = 'format_version'").ok());
  }
  auto read_count = [&]() -> size_t {
    auto r = NodeStoreReader::Open(path);
    if (!r.ok()) return 0;
    MetricTable t;
    ReadProblems p;
    if (!(*r)->ReadMetrics({}, &t, &p).ok() || p.corrupt_chunks != 0) return 0;
    return t.size();
  };
  EXPECT_EQ(read_count(), 3000u);
  {
    auto w = NodeStoreWriter::Open(path, TestNode());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    SeriesId a = (*w)->Series("a", "");
    SeriesId b = (*w)->Series("b", "");
    (*w)->Append(a, kT0 + 4'000'000'000LL, 1.0);
    (*w)->Append(b, kT0 + 4'000'000'000LL, 2.0);
    ASSERT_TRUE((*w)->Close().ok());
  }
  EXPECT_EQ(QueryInt(path, "SELECT value FROM meta WHERE key = 'format_version'"), 2);
  EXPECT_EQ(QueryInt(path, "SELECT count(*) FROM metric_times"), 1);
  EXPECT_EQ(read_count(), 3002u);
}

TEST(NodeStoreTest, LiveReaderSeesDataWithinTwoSeconds) {
  std::string path = MakeTempDir() + "/store.sqlite";
  WriterOptions opts;
  opts.auto_flush_interval_ns = 200 * kNanosPerMilli;
  auto w = NodeStoreWriter::Open(path, TestNode(), opts);
  ASSERT_TRUE(w.ok());
  auto r = NodeStoreReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  SeriesId s = (*w)->Series("m", "");
  int64_t appended_at = MonotonicNowNs();
  (*w)->Append(s, kT0, 3.5);
  model::Event e;
  e.name = "late";
  e.start_ns = kT0;
  (*w)->AppendEvent(e);
  bool seen = false;
  while (MonotonicNowNs() - appended_at < 2 * kNanosPerSecond) {
    MetricTable t;
    EventTable ev;
    ReadProblems p;
    ASSERT_TRUE((*r)->ReadMetrics({}, &t, &p).ok());
    ASSERT_TRUE((*r)->ReadEvents({}, &ev, &p).ok());
    if (t.size() == 1 && ev.size() == 1) {
      EXPECT_EQ(ev.names.at(ev.name[0]), "late");  // strings added after the reader opened
      seen = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(seen);
}

TEST(NodeStoreTest, BadFilesGiveClearErrors) {
  std::string dir = MakeTempDir();
  auto missing = NodeStoreReader::Open(dir + "/nope.sqlite");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.sqlite"), std::string::npos);

  std::string junk = dir + "/junk.sqlite";
  ASSERT_TRUE(WriteFileAtomically(junk, std::string(10000, 'x')).ok());
  auto bad = NodeStoreReader::Open(junk);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("junk.sqlite"), std::string::npos);

  std::string empty = dir + "/empty.sqlite";
  ASSERT_TRUE(WriteFileAtomically(empty, "").ok());
  auto e = NodeStoreReader::Open(empty);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("empty.sqlite"), std::string::npos);
}

TEST(NodeStoreTest, NewerFormatVersionIsRefused) {
  std::string path = MakeTempDir() + "/store.sqlite";
  {
    auto w = NodeStoreWriter::Open(path, TestNode());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  {
    auto db = SqliteDb::Open(path, SqliteDb::Mode::kReadWriteCreate);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("UPDATE meta SET value = '99' WHERE key = 'format_version'").ok());
  }
  auto r = NodeStoreReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("99"), std::string::npos);
  EXPECT_NE(r.status().message().find(path), std::string::npos);
}

TEST(NodeStoreTest, CorruptChunkIsSkippedAndCountedTheRestReads) {
  std::string path = MakeTempDir() + "/store.sqlite";
  {
    auto w = NodeStoreWriter::Open(path, TestNode());
    ASSERT_TRUE(w.ok());
    SeriesId a = (*w)->Series("a", "");
    SeriesId b = (*w)->Series("b", "");
    (*w)->Append(a, kT0, 1.0);
    (*w)->Append(b, kT0, 2.0);
    ASSERT_TRUE((*w)->Close().ok());
  }
  {
    auto db = SqliteDb::Open(path, SqliteDb::Mode::kReadWriteCreate);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(
        (*db)->Exec("UPDATE metric_chunks SET data = x'deadbeef' WHERE series_id = 1").ok());
  }
  auto r = NodeStoreReader::Open(path);
  ASSERT_TRUE(r.ok());
  MetricTable t;
  ReadProblems p;
  ASSERT_TRUE((*r)->ReadMetrics({}, &t, &p).ok());
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(p.corrupt_chunks, 1);
  ASSERT_FALSE(p.messages.empty());
  EXPECT_NE(p.messages[0].find("metric chunk"), std::string::npos);
}

TEST(NodeStoreTest, TruncatedStoreNeverCrashesTheReader) {
  std::string dir = MakeTempDir();
  std::string path = dir + "/store.sqlite";
  {
    WriterOptions opts;
    opts.seal_values = 64;
    auto w = NodeStoreWriter::Open(path, TestNode(), opts);
    ASSERT_TRUE(w.ok());
    for (int s = 0; s < 50; ++s) {
      SeriesId id = (*w)->Series("m" + std::to_string(s), "");
      for (int i = 0; i < 2000; ++i) (*w)->Append(id, kT0 + i, i * 1.37);
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto full = ReadFileToString(path);
  ASSERT_TRUE(full.ok());
  for (double fraction : {0.9, 0.5, 0.1}) {
    std::string cut = dir + "/cut.sqlite";
    ASSERT_TRUE(
        WriteFileAtomically(
            cut, full->substr(0, static_cast<size_t>(static_cast<double>(full->size()) * fraction)))
            .ok());
    auto r = NodeStoreReader::Open(cut);
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("cut.sqlite"), std::string::npos);
      continue;
    }
    MetricTable t;
    ReadProblems p;
    EXPECT_TRUE((*r)->ReadMetrics({}, &t, &p).ok());
    EXPECT_LE(t.size(), 100000u);
  }
}

// The durability contract: a writer killed with SIGKILL loses at most the unflushed interval
// and leaves a store the reader opens. The writer is a separate process (store_crash_writer)
// that reports on stdout how many values each completed flush made durable.
TEST(NodeStoreTest, SurvivesSigkillOfTheWriter) {
  std::string dir = MakeTempDir();
  std::string path = dir + "/nodes/n0/store.sqlite";
  std::string binary = std::string(TRAINPROF_BINARY_DIR) + "/src/store/store_crash_writer";
  int out_pipe[2];
  ASSERT_EQ(pipe(out_pipe), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    close(out_pipe[0]);
    execl(binary.c_str(), binary.c_str(), path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out_pipe[1]);
  FILE* out = fdopen(out_pipe[0], "r");
  long long durable_values = 0, durable_events = 0;
  int flushes = 0;
  char line[256];
  while (flushes < 3 && fgets(line, sizeof line, out)) {
    if (std::sscanf(line, "flushed %lld %lld", &durable_values, &durable_events) == 2) ++flushes;
  }
  ASSERT_EQ(flushes, 3) << "crash writer did not report flushes";
  // Let it write into the next interval, then kill it mid-stream.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  // Drain what it reported before dying: those flushes completed too.
  while (fgets(line, sizeof line, out)) {
    long long v = 0, e = 0;
    if (std::sscanf(line, "flushed %lld %lld", &v, &e) == 2) {
      durable_values = v;
      durable_events = e;
    }
  }
  fclose(out);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  ASSERT_TRUE(WIFSIGNALED(wstatus));
  EXPECT_EQ(WTERMSIG(wstatus), SIGKILL);

  auto r = NodeStoreReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  MetricTable t;
  ReadProblems p;
  ASSERT_TRUE((*r)->ReadMetrics({}, &t, &p).ok());
  EventTable ev;
  ASSERT_TRUE((*r)->ReadEvents({}, &ev, &p).ok());
  EXPECT_EQ(p.corrupt_chunks, 0);
  EXPECT_GE(static_cast<long long>(t.size()), durable_values);
  EXPECT_GE(static_cast<long long>(ev.size()), durable_events);
  // And nothing beyond what was appended: values are 0, 1, 2... per series, in order.
  for (size_t i = 1; i < t.size(); ++i) {
    if (t.metric[i] == t.metric[i - 1]) {
      EXPECT_EQ(t.value[i], t.value[i - 1] + 1);
    }
  }
}

}  // namespace
}  // namespace trainprof::store
