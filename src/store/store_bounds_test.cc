// Hostile store content (issue 20, item 3): every count and id read from a store is bounded by
// what the store could honestly hold, so a small file cannot make a reader allocate gigabytes.
// Each case runs the reader in a child process under an address-space limit and checks the
// child's peak resident memory and the message that names the problem.

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "base/files.h"
#include "store/codec.h"
#include "store/node_store_reader.h"
#include "store/node_store_writer.h"
#include "store/sqlite_db.h"
#include "store/store_test_util.h"

namespace trainprof::store {
namespace {

using testing::MakeTempDir;
using testing::TestNode;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;

struct ChildResult {
  int exit_code = -1;  // -1: killed by a signal
  int signal = 0;
  long max_rss_kb = 0;
  std::string message;
};

// Runs `fn` in a forked child limited to 1 GiB of address space (a reader that trusts a count
// fails there instead of taking the machine), returning its exit code, peak RSS and message.
ChildResult RunInChild(const std::function<bool(std::string*)>& fn) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
#if !defined(__SANITIZE_ADDRESS__)
    rlimit lim{size_t{1} << 30, size_t{1} << 30};
    setrlimit(RLIMIT_AS, &lim);
#endif
    std::string msg;
    int code = 1;
    try {
      code = fn(&msg) ? 0 : 1;
    } catch (const std::exception& e) {
      msg = std::string("exception: ") + e.what();
      code = 2;
    }
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(code);
  }
  close(fds[1]);
  ChildResult r;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.message.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  r.max_rss_kb = ru.ru_maxrss;
  std::cout << "child: peak RSS " << r.max_rss_kb / 1024 << " MiB\n";
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

// A genuine zstd frame (content size in its header) of literal bytes and runs of zeros: a few
// KiB that really decompress to hundreds of MB, as a hostile chunk would be.
std::string ZeroFrame(const std::vector<std::pair<std::string, size_t>>& parts) {
  size_t total = 0;
  for (const auto& [text, zeros] : parts) total += text.size() + zeros;
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setPledgedSrcSize(c, total);
  std::string out;
  std::string obuf(ZSTD_CStreamOutSize(), '\0');
  auto feed = [&](const char* p, size_t n, ZSTD_EndDirective end) {
    ZSTD_inBuffer in{p, n, 0};
    while (true) {
      ZSTD_outBuffer o{obuf.data(), obuf.size(), 0};
      size_t left = ZSTD_compressStream2(c, &o, &in, end);
      EXPECT_FALSE(ZSTD_isError(left));
      out.append(obuf.data(), o.pos);
      if (end == ZSTD_e_end ? left == 0 : in.pos == in.size) break;
    }
  };
  std::string block(size_t{1} << 20, '\0');
  for (const auto& [text, zeros] : parts) {
    feed(text.data(), text.size(), ZSTD_e_continue);
    for (size_t done = 0; done < zeros; done += block.size()) {
      feed(block.data(), std::min(block.size(), zeros - done), ZSTD_e_continue);
    }
  }
  feed(nullptr, 0, ZSTD_e_end);
  ZSTD_freeCCtx(c);
  return out;
}

std::string Messages(const ReadProblems& p) {
  std::string out;
  for (const auto& m : p.messages) out += m + "\n";
  return out;
}

// A store with one metric series (10 samples) and one event, closed.
std::string SmallStore() {
  std::string path = MakeTempDir() + "/n/store.sqlite";
  auto w = NodeStoreWriter::Open(path, TestNode());
  EXPECT_TRUE(w.ok());
  SeriesId s = (*w)->Series("cpu_utilization_ratio", "total");
  for (int i = 0; i < 10; ++i) (*w)->Append(s, kT0 + i * 1'000'000, 0.5);
  model::Event e;
  e.name = "step";
  e.category = "step";
  e.start_ns = kT0;
  e.duration_ns = 5;
  (*w)->AppendEvent(e);
  EXPECT_TRUE((*w)->Close().ok());
  return path;
}

void Exec(const std::string& path, const std::string& sql, const std::string& blob = "") {
  auto db = SqliteDb::Open(path, SqliteDb::Mode::kReadWriteCreate);
  ASSERT_TRUE(db.ok());
  auto stmt = (*db)->Prepare(sql);
  ASSERT_TRUE(stmt.ok()) << stmt.status().message();
  if (!blob.empty()) stmt->BindBlob(1, blob);
  ASSERT_TRUE(stmt->Run().ok());
}

TEST(StoreBoundsTest, MetricChunkClaimingMillionsOfValuesIsRefusedInSmallMemory) {
  std::string path = SmallStore();
  // 120 M values claimed; the frame is genuine: 240 MB of (almost) zeros in a few KiB.
  const size_t n = 120'000'000;
  std::string head(1, '\1');
  PutVarint(&head, n);
  PutVarint(&head, ZigZag(kT0));
  // Zero delta-of-deltas, then kDecimal, e = 0, the delta layout and zero deltas.
  std::string blob = ZeroFrame({{head, n - 1}, {"", 3 + n}});
  ASSERT_LT(blob.size(), 200'000u);
  Exec(path, "UPDATE metric_chunks SET count = 120000000, data = ?", blob);
  ChildResult r = RunInChild([&](std::string* msg) {
    auto reader = NodeStoreReader::Open(path);
    if (!reader.ok()) {
      *msg = reader.status().message();
      return false;
    }
    MetricTable t;
    ReadProblems problems;
    Status s = (*reader)->ReadMetrics({}, &t, &problems);
    *msg = (s.ok() ? Messages(problems) : s.message()) + " (" + std::to_string(t.size()) + " read)";
    return s.ok() && t.size() == 0;
  });
  EXPECT_EQ(r.exit_code, 0) << "signal " << r.signal << ": " << r.message;
  EXPECT_NE(r.message.find("claims 120000000 values"), std::string::npos) << r.message;
  EXPECT_LT(r.max_rss_kb, 200 * 1024) << r.message;
}

TEST(StoreBoundsTest, EventChunkClaimingMillionsOfEventsIsRefusedInSmallMemory) {
  std::string path = SmallStore();
  const size_t n = 50'000'000;
  std::string head(1, '\1');
  PutVarint(&head, n);
  std::string blob = ZeroFrame({{head, n * 11}});  // every column zero, args empty
  ASSERT_LT(blob.size(), 200'000u);
  Exec(path, "UPDATE event_chunks SET count = 50000000, data = ?", blob);
  ChildResult r = RunInChild([&](std::string* msg) {
    auto reader = NodeStoreReader::Open(path);
    if (!reader.ok()) {
      *msg = reader.status().message();
      return false;
    }
    EventTable t;
    ReadProblems problems;
    Status s = (*reader)->ReadEvents({}, &t, &problems);
    *msg = (s.ok() ? Messages(problems) : s.message()) + " (" + std::to_string(t.size()) + " read)";
    return s.ok() && t.size() == 0;
  });
  EXPECT_EQ(r.exit_code, 0) << "signal " << r.signal << ": " << r.message;
  EXPECT_NE(r.message.find("claims 50000000 events"), std::string::npos) << r.message;
  EXPECT_LT(r.max_rss_kb, 200 * 1024) << r.message;
}

TEST(StoreBoundsTest, ChunkCountsAboveWhatTheBytesHoldAreRefused) {
  // Within the per-chunk limit, but more values than the decompressed bytes could encode.
  std::string blob = EncodeMetricChunk(std::vector<int64_t>{kT0}, std::vector<double>{1.0}, 3);
  std::vector<int64_t> ts;
  std::vector<double> v;
  Status s = DecodeMetricChunk(blob, 1'000'000, &ts, &v);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("1000000 values"), std::string::npos) << s.message();
  EXPECT_TRUE(ts.empty());
  std::vector<EncodedEvent> events(1);
  std::string eblob = EncodeEventChunk(events, 3);
  std::vector<EncodedEvent> out;
  s = DecodeEventChunk(eblob, 100'000, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("100000 events"), std::string::npos) << s.message();
  EXPECT_TRUE(out.empty());
}

TEST(StoreBoundsTest, SparseStringIdIsRefusedInSmallMemory) {
  std::string path = SmallStore();
  Exec(path, "INSERT INTO strings(id, text) VALUES(4000000000, 'far away')");
  ChildResult r = RunInChild([&](std::string* msg) {
    auto reader = NodeStoreReader::Open(path);
    *msg = reader.ok() ? "opened" : reader.status().message();
    return !reader.ok();
  });
  EXPECT_EQ(r.exit_code, 0) << "signal " << r.signal << ": " << r.message;
  EXPECT_NE(r.message.find("string id 4000000000"), std::string::npos) << r.message;
  EXPECT_LT(r.max_rss_kb, 200 * 1024) << r.message;
}

TEST(StoreBoundsTest, TheWriterSplitsLongSeriesIntoChunksTheReaderAccepts) {
  // A series appended in one go (an import) is sealed in chunks of at most
  // kMaxMetricChunkValues, so everything the writer writes stays readable.
  std::string path = MakeTempDir() + "/n/store.sqlite";
  const int64_t n = static_cast<int64_t>(kMaxMetricChunkValues) * 2 + 5;
  {
    auto w = NodeStoreWriter::Open(path, TestNode());
    ASSERT_TRUE(w.ok());
    SeriesId s = (*w)->Series("m", "");
    for (int64_t i = 0; i < n; ++i) (*w)->Append(s, kT0 + i, static_cast<double>(i % 7));
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto reader = NodeStoreReader::Open(path);
  ASSERT_TRUE(reader.ok());
  MetricTable t;
  ReadProblems problems;
  ASSERT_TRUE((*reader)->ReadMetrics({}, &t, &problems).ok());
  EXPECT_EQ(problems.corrupt_chunks, 0) << Messages(problems);
  ASSERT_EQ(static_cast<int64_t>(t.size()), n);
  for (int64_t i = 0; i < n; i += 99'991) {
    EXPECT_EQ(t.timestamp_ns[static_cast<size_t>(i)], kT0 + i);
    EXPECT_EQ(t.value[static_cast<size_t>(i)], static_cast<double>(i % 7));
  }
  auto db = SqliteDb::Open(path, SqliteDb::Mode::kReadOnly);
  auto stmt = (*db)->Prepare("SELECT count(*), max(count) FROM metric_chunks");
  Status st;
  ASSERT_TRUE(stmt->Step(&st));
  EXPECT_EQ(stmt->Int(0), 3);
  EXPECT_EQ(stmt->Int(1), static_cast<int64_t>(kMaxMetricChunkValues));
}

}  // namespace
}  // namespace trainprof::store

namespace trainprof::store {
namespace {

// Found by fuzz_store_chunks: a chunk refused late (an unknown value layout after the
// timestamps were decoded) left its partial rows in the caller's columns, where a reader
// kept them as samples of the series.
TEST(StoreBoundsTest, ARefusedChunkLeavesNoRowsBehind) {
  for (uint8_t bad : {uint8_t{7}, uint8_t{99}}) {
    std::string raw(1, '\1');
    PutVarint(&raw, 2);
    PutVarint(&raw, ZigZag(kT0));
    PutVarint(&raw, ZigZag(1000));
    raw += std::string("\0\0", 2);          // kDecimal, e = 0
    raw.push_back(static_cast<char>(bad));  // no such layout
    raw += std::string(4, '\0');
    std::vector<int64_t> ts = {42};
    std::vector<double> values = {4.2};
    Status s = DecodeMetricChunk(ZstdCompress(raw, 1), 2, &ts, &values);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(ts, std::vector<int64_t>{42});
    EXPECT_EQ(values, std::vector<double>{4.2});
  }
  // The same for an unknown event kind.
  std::string raw(1, '\1');
  PutVarint(&raw, 1);
  raw.push_back('\7');
  raw += std::string(10, '\0');
  std::vector<EncodedEvent> events(1);
  ASSERT_FALSE(DecodeEventChunk(ZstdCompress(raw, 1), 1, &events).ok());
  EXPECT_EQ(events.size(), 1u);
}

}  // namespace
}  // namespace trainprof::store
