#include "importers/kineto/kineto_importer.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include "base/files.h"
#include "base/platform.h"
#include "base/progress.h"
#include "base/test_child.h"
#include "importers/common/byte_source.h"
#include "importers/common/import_counters.h"
#include "importers/common/test_util.h"
#include "importers/kineto/kineto_parse_pipeline.h"
#include "store/run_reader.h"
#include "store/store_test_util.h"

namespace trainprof::importers::kineto {
namespace {

using testing::SharedData;
using testing::TempDir;

const std::string kHta = "traces/HolisticTraceAnalysis/tests/data/";
const std::string kTb = "traces/kineto/tb_plugin/";

StatusOr<KinetoImportResult> Import(const std::vector<std::string>& rel, std::string* run) {
  *run = TempDir() + "/run";
  KinetoImportOptions o;
  for (const auto& r : rel) o.traces.push_back(SharedData(r));
  o.out = *run;
  o.flush_events = 5000;  // several flushes per file: exercises the batching
  return ImportKineto(o);
}

struct Golden {
  std::string file;
  int64_t events;
  int64_t steps;
  int64_t flows;
  std::map<std::string, int64_t> categories;  // a subset, checked exactly
  std::string timestamp_format;
  int64_t rank;
  std::string node;
  // The first kernel in file order: its name prefix, start and duration (expected values
  // computed independently with Python's Decimal from the JSON text).
  std::string kernel_prefix;
  int64_t kernel_start_ns;
  int64_t kernel_duration_ns;
};

class KinetoGoldenTest : public ::testing::TestWithParam<Golden> {};

TEST_P(KinetoGoldenTest, ImportsWithExactCountsAndTimestamps) {
  const Golden& g = GetParam();
  std::string run;
  auto r = Import({g.file}, &run);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->files.size(), 1u);
  const KinetoFileSummary& f = r->files[0];
  EXPECT_EQ(f.events_stored, g.events);
  EXPECT_EQ(f.steps, g.steps);
  EXPECT_EQ(f.flows, g.flows);
  EXPECT_EQ(f.timestamp_format, g.timestamp_format);
  EXPECT_EQ(f.rank, g.rank);
  EXPECT_EQ(f.node, g.node);
  for (const auto& [cat, n] : g.categories) EXPECT_EQ(f.categories.at(cat), n) << cat;

  auto reader = store::RunReader::Open(run);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_EQ((*reader)->metadata().source, "import kineto");
  auto events = (*reader)->Events({});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(static_cast<int64_t>(events->size()), g.events);
  std::map<std::string, int64_t> cats;
  bool found_kernel = false;
  for (size_t i = 0; i < events->size(); ++i) {
    const std::string& cat = events->categories.at(events->category[i]);
    ++cats[cat];
    EXPECT_EQ(events->rank[i], g.rank);
    const std::string& name = events->names.at(events->name[i]);
    if (cat == "kernel" && name.rfind(g.kernel_prefix, 0) == 0 &&
        events->start_ns[i] == g.kernel_start_ns) {
      EXPECT_EQ(events->duration_ns[i], g.kernel_duration_ns);
      found_kernel = true;
    }
  }
  EXPECT_TRUE(found_kernel) << "no kernel " << g.kernel_prefix << " at " << g.kernel_start_ns;
  for (const auto& [cat, n] : g.categories) EXPECT_EQ(cats[cat], n) << cat;
  auto steps = (*reader)->Steps();
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(static_cast<int64_t>(steps->size()), g.steps);
}

INSTANTIATE_TEST_SUITE_P(
    Files, KinetoGoldenTest,
    ::testing::Values(
        // 2024+: decimal µs relative to baseTimeNanoseconds, which comes after the events.
        Golden{kHta + "triton_example/triton_example.json.gz",
               14,
               1,
               3,
               {{"kernel", 1}, {"cpu_op", 3}, {"ac2g", 3}, {"cuda_driver", 1}},
               "decimal_us",
               model::kMissing,
               "triton_example",
               "triton_poi_fused_add_cos_sin_0",
               1730156791097444592,
               1760},
        // 2021 (tb_plugin sample): integer µs, old category names, "stream 7" tids.
        Golden{kTb + "samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
               75704,
               6,
               18192,
               {{"cpu_op", 23646},
                {"kernel", 8772},
                {"cuda_runtime", 11923},
                {"gpu_memcpy", 12},
                {"gpu_memset", 312},
                {"async", 18192}},
               "integer_us",
               model::kMissing,
               "worker0.1623143089861",
               "cask_cudnn::computeOffsetsKernel",
               1623142623531625000,
               2000},
        // NCCL trace with distributedInfo rank 0, decimal µs + base time.
        Golden{kHta + "nccl_parser_config/nccl_data.json.gz",
               40538,
               3,
               13600,
               {{"kernel", 2700}, {"gpu_memcpy", 960}, {"ac2g", 12514}, {"fwdbwd", 1086}},
               "decimal_us",
               0,
               "rank-0",
               "void cudnn::bn_bw_1C11_kernel_new",
               1716423322983543183,
               41407},
        // ns precision on absolute µs beyond 2^53 ns, and a host_name naming the node.
        Golden{kHta + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
               68661,
               5,
               23234,
               {{"kernel", 4350}, {"cuda_runtime", 15329}},
               "decimal_us",
               0,
               "twshared39868.02.pnb3.facebook.com",
               "void at::native::(anonymous namespace)::CatArrayBa",
               1712195495505582988,
               4928}));

// Every event as one comparable line (names, not dictionary ids).
std::vector<std::string> EventLines(const std::string& run) {
  auto reader = store::RunReader::Open(run);
  EXPECT_TRUE(reader.ok());
  if (!reader.ok()) return {};
  auto ev = (*reader)->Events({});
  EXPECT_TRUE(ev.ok());
  if (!ev.ok()) return {};
  std::vector<std::string> lines;
  for (size_t i = 0; i < ev->size(); ++i) {
    lines.push_back(std::to_string(ev->kind[i]) + "|" + std::to_string(ev->start_ns[i]) + "|" +
                    std::to_string(ev->duration_ns[i]) + "|" + ev->names.at(ev->name[i]) + "|" +
                    ev->categories.at(ev->category[i]) + "|" + ev->modes.at(ev->mode[i]) + "|" +
                    std::to_string(ev->step[i]) + "|" + std::to_string(ev->pid[i]) + "|" +
                    std::to_string(ev->tid[i]) + "|" + std::to_string(ev->rank[i]) + "|" +
                    ev->args[i]);
  }
  return lines;
}

TEST(KinetoImporterTest, TinyReadWindowGivesTheSameRun) {
  // A 64-byte first window: nearly every event straddles a refill, so the fast path's "need
  // more" and the window's growth are exercised on every event of a real trace.
  const std::string file =
      SharedData(kHta + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz");
  std::string runs[2];
  for (int k = 0; k < 2; ++k) {
    runs[k] = TempDir() + "/run";
    KinetoImportOptions o;
    o.traces = {file};
    o.out = runs[k];
    o.read_buffer_bytes = k == 0 ? (1 << 20) : 64;
    auto r = ImportKineto(o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->events_stored, 68661);
  }
  std::vector<std::string> a = EventLines(runs[0]), b = EventLines(runs[1]);
  ASSERT_EQ(a.size(), 68661u);
  EXPECT_TRUE(a == b);
}

TEST(KinetoImporterTest, BatchesWrittenOnASecondThreadGiveTheSameRun) {
  // 4000-event batches: 18 flushes, each written on the second thread while the next batch is
  // parsed (the one-thread parse: on two cores its batches are written on a thread of their
  // own); against batches cut by the file's text only (about 2 MB of it each).
  const std::string file =
      SharedData(kHta + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz");
  std::string runs[2];
  for (int k = 0; k < 2; ++k) {
    runs[k] = TempDir() + "/run";
    KinetoImportOptions o;
    o.traces = {file};
    o.out = runs[k];
    o.flush_events = k == 0 ? (1 << 22) : 4000;
    o.parse_threads = 1;
    auto r = ImportKineto(o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->events_stored, 68661);
  }
  std::vector<std::string> a = EventLines(runs[0]), b = EventLines(runs[1]);
  ASSERT_EQ(a.size(), 68661u);
  // The same events (events starting at the same ns may come in another order across chunks).
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_TRUE(a == b);
  // The finished store is one file that never left rollback-journal mode (the import keeps its
  // journal in memory and syncs once at close): no -wal, -shm or -journal beside it, and the
  // header's read/write format bytes (offsets 18, 19) say "legacy", not WAL (2).
  auto nodes = ListDirectory(runs[1] + "/nodes");
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  const std::string node_dir = runs[1] + "/nodes/" + nodes->front();
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    EXPECT_FALSE(std::ifstream(node_dir + "/store.sqlite" + suffix).good()) << suffix;
  }
  std::ifstream db(node_dir + "/store.sqlite", std::ios::binary);
  char header[20] = {};
  ASSERT_TRUE(db.read(header, sizeof header).good());
  EXPECT_EQ(std::string(header, 15), "SQLite format 3");
  EXPECT_EQ(header[18], 1);
  EXPECT_EQ(header[19], 1);
}

// How many threads the process has, seen each time the import reads from its file (the
// ByteSource advances the progress sink from whichever thread reads).
class ThreadCounter : public ProgressSink {
 public:
  void AddTotal(int64_t) override {}
  void Advance(int64_t) override {
    const int n = platform::ProcessThreadCount();
    std::lock_guard<std::mutex> lock(mu_);
    max_ = std::max(max_, n);
    ++reads_;
  }
  int max() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_;
  }
  int reads() {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_;
  }

 private:
  std::mutex mu_;
  int max_ = 0;
  int reads_ = 0;
};

TEST(KinetoImporterTest, TheTwoThreadParseWritesItsBatchesItselfAndOneCoreStartsNoThread) {
  // A third thread beside the two-thread parse's two (reading, storing) only takes turns with
  // them on two cores: the storing thread writes each batch itself. On one core no thread is
  // started at all (BatchesWrittenOnASecondThreadGiveTheSameRun: the one-thread parse on two
  // cores writes on a thread of its own). 4000-event batches: many are cut while the file is
  // read.
  const std::string file =
      SharedData(kHta + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz");
  const int before = platform::ProcessThreadCount();
  if (before < 0) GTEST_SKIP() << "this system does not say how many threads a process has";
  auto import = [&](int parse_threads, int extra_threads) {
    ThreadCounter counter;
    KinetoImportOptions o;
    o.traces = {file};
    o.out = TempDir() + "/run";
    o.flush_events = 4000;
    o.parse_threads = parse_threads;
    o.progress = &counter;
    auto r = ImportKineto(o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->events_stored, 68661);
    EXPECT_GT(counter.reads(), 3);
    // The two-thread parse reads on its reading thread, so the count sees that one at least.
    EXPECT_EQ(counter.max(), before + extra_threads);
  };
  {
    SCOPED_TRACE("parse_threads 2");
    import(2, 1);
  }
  SCOPED_TRACE("one core");
  ASSERT_TRUE(platform::RunOnOneCpu([&] { import(0, 0); }));
}

// A store's creation time (meta created_ns), the one value two imports of a file differ in.
// Every store file of a run directory (nodes/<node>/store.sqlite...) with its bytes, its
// creation time (text of the same length in both) written as `created_ns`.
std::map<std::string, std::string> StoreFiles(const std::string& run,
                                              const std::string& created_ns) {
  std::map<std::string, std::string> out;
  auto nodes = ListDirectory(run + "/nodes");
  if (!nodes.ok()) return out;
  for (const std::string& node : *nodes) {
    auto files = ListDirectory(run + "/nodes/" + node);
    if (!files.ok()) continue;
    for (const std::string& f : *files) {
      const std::string path = run + "/nodes/" + node + "/" + f;
      auto bytes = ReadFileToString(path);
      std::string b = bytes.ok() ? *bytes : "(unreadable)";
      const std::string own = f == "store.sqlite" ? store::testing::StoreCreatedNs(path) : "";
      if (!own.empty() && own.size() == created_ns.size()) {
        for (size_t k = b.find(own); k != std::string::npos; k = b.find(own, k + 1)) {
          b.replace(k, own.size(), created_ns);
        }
      }
      out[node + "/" + f] = std::move(b);
    }
  }
  return out;
}

// `trace` imported with the one-thread parse and with the two-thread one, in windows of `window`
// bytes: the two runs and results.
struct BothWays {
  std::string runs[2];
  StatusOr<KinetoImportResult> results[2] = {Internal("not run"), Internal("not run")};
};

BothWays ImportBothWays(const std::string& trace, size_t window) {
  BothWays w;
  for (int k = 0; k < 2; ++k) {
    w.runs[k] = TempDir() + "/run";
    KinetoImportOptions o;
    o.traces = {trace};
    o.out = w.runs[k];
    o.parse_threads = k + 1;
    o.read_buffer_bytes = window;
    w.results[k] = ImportKineto(o);
  }
  return w;
}

// Both imports (both ok) have the same summary and the same store files byte for byte but for
// their creation time.
void ExpectSameImports(const BothWays& w, const std::string& label) {
  const KinetoFileSummary &a = w.results[0]->files.at(0), &b = w.results[1]->files.at(0);
  EXPECT_EQ(a.elements, b.elements) << label;
  EXPECT_EQ(a.events_stored, b.events_stored) << label;
  EXPECT_EQ(a.categories, b.categories) << label;
  EXPECT_EQ(a.problems, b.problems) << label;
  const std::string created = "1000000000000000000";
  std::map<std::string, std::string> fa = StoreFiles(w.runs[0], created),
                                     fb = StoreFiles(w.runs[1], created);
  ASSERT_FALSE(fa.empty()) << label;
  ASSERT_EQ(fa.size(), fb.size()) << label;
  for (const auto& [name, bytes] : fa) {
    EXPECT_TRUE(fb.count(name) && fb.at(name) == bytes) << label << ": " << name;
  }
}

// The two-thread parse (a reading thread tokenizes while this one stores) against the
// one-thread parse on every trace under ../shared/data/traces: the same summary and the same
// store files byte for byte but for the creation time (or the same error). A 256 KiB window makes
// several hand-overs even in the small traces.
TEST(KinetoImporterTest, TwoThreadParseGivesTheSameStoreOnEveryTrace) {
  std::vector<std::string> traces;
  const std::string root = SharedData("traces");
  std::vector<std::string> dirs = {root};
  while (!dirs.empty()) {
    const std::string dir = dirs.back();
    dirs.pop_back();
    auto entries = ListDirectory(dir);
    if (!entries.ok()) continue;
    for (const std::string& e : *entries) {
      const std::string path = dir + "/" + e;
      if (IsDirectory(path)) {
        dirs.push_back(path);
      } else if (path.size() > 5 && (path.ends_with(".json") || path.ends_with(".json.gz"))) {
        traces.push_back(path);
      }
    }
  }
  std::sort(traces.begin(), traces.end());
  ASSERT_GE(traces.size(), 30u) << root;
  int imported = 0;
  for (const std::string& trace : traces) {
    const BothWays w = ImportBothWays(trace, 256 << 10);
    ASSERT_EQ(w.results[0].ok(), w.results[1].ok()) << trace;
    if (!w.results[0].ok()) {
      EXPECT_EQ(w.results[0].status().message(), w.results[1].status().message()) << trace;
      continue;
    }
    ++imported;
    ExpectSameImports(w, trace);
  }
  EXPECT_GE(imported, 30) << "of " << traces.size();
}

// Where no thread can be started (a process or user at its limit: RLIMIT_NPROC, a container's
// pids limit), an import that would use three (the reading thread, batches written on another,
// the last one encoded on two) runs on its own thread, as does one of two files that would be
// read at once, and reading the store back (whose
// decoding of large chunks runs ahead on a second thread) works too: the same store as an
// import with threads. Run in a child at RLIMIT_NPROC 1, as an unprivileged user when this is
// root (root is exempt from the limit).
TEST(KinetoImporterTest, WithNoThreadToBeHadTheImportRunsOnItsOwnThread) {
  const std::string trace = SharedData(kHta + "trace_diff/control/control.json.gz");  // 35 MB
  const std::string dir = TempDir();
  const test_child::AtProcessLimit at = {.uid = 61004, .limit = 1, .threads_ok = 0};
  if (geteuid() == 0) {
    ASSERT_EQ(chown(dir.c_str(), at.uid, at.uid), 0);
  }
  const std::string alone = dir + "/alone", threaded = dir + "/threaded";
  const int code = test_child::RunAtProcessLimit(at, [&] {
    KinetoImportOptions o;
    o.traces = {trace};
    o.out = alone;
    o.parse_threads = 2;  // would read and tokenize on a second thread
    auto r = ImportKineto(o);
    if (!r.ok() || r->events_stored < 100'000) return 13;
    auto reader = store::RunReader::Open(alone);
    if (!reader.ok()) return 14;
    auto events = (*reader)->Events(store::EventQuery{});
    if (!events.ok() || static_cast<int64_t>(events->size()) != r->events_stored) return 15;
    // Two files that would be read at once, a thread each: read one after the other.
    o.traces = {trace, SharedData(kHta + "trace_filter/sampled_rank-1.json.gz")};
    o.out = alone + "_two";
    o.file_threads = 2;
    auto two = ImportKineto(o);
    return two.ok() && two->files.size() == 2 && two->events_stored == r->events_stored + 4678 ? 0
                                                                                               : 16;
  });
  ASSERT_EQ(code, 0) << test_child::Meaning(code)
                     << " (13: the import failed; 14/15: reading it back failed; 16: two files "
                        "failed)";
  KinetoImportOptions o;
  o.traces = {trace};
  o.out = threaded;
  o.parse_threads = 2;
  ASSERT_TRUE(ImportKineto(o).ok());
  const std::string created = "1000000000000000000";
  const std::map<std::string, std::string> a = StoreFiles(alone, created),
                                           b = StoreFiles(threaded, created);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, bytes] : a) {
    EXPECT_TRUE(b.count(name) && b.at(name) == bytes) << name;
  }
}

// The two-thread parse on a generated trace of what the hand-over between the threads must
// carry intact: strings holding "}, {", names with escapes (decoded into the batch's arena), an
// escaped key that the fast path leaves to the general one (text items between parsed ones),
// elements larger than the window (a grown window), with windows of 256 KiB and 1 MiB. The same
// summary and store as the one-thread parse.
TEST(KinetoImporterTest, TwoThreadParseOfAGeneratedTraceGivesTheSameStore) {
  const std::string dir = TempDir();
  const std::string trace = dir + "/misleading.json";
  {
    std::ofstream f(trace);
    f << "{\"schemaVersion\": 1, \"traceEvents\": [\n";
    for (int i = 0; i < 40000; ++i) {
      if (i > 0)
        f << (i % 7 == 0 ? ",{" : ",\n  {");
      else
        f << "  {";
      f << "\"ph\": \"X\", \"cat\": \"cpu_op\", \"pid\": 1, \"tid\": " << (i % 3)
        << ", \"ts\": " << 1700000000000000 + i * 10 << "." << (i % 1000) << ", \"dur\": 5";
      if (i % 3 == 0) {
        f << ", \"name\": \"op}, {" << i << "\", \"args\": {\"Input Dims\": [[1, 2], []], "
          << "\"note\": \"x }, { \\\"ph\\\": 1 }\"}";
      } else if (i % 3 == 1) {
        f << ", \"name\": \"esc\\u00e9\\\"q\\\" " << i
          << "\", \"args\": {\n    \"External id\": " << i << "\n  }";
      } else {
        f << ", \"name\": \"aten::mm\"";
      }
      if (i % 997 == 0) f << ", \"n\\u0061me2\": 1";  // an escaped key: the general path
      if (i % 4001 == 0) f << ", \"args\": {\"big\": \"" << std::string(300 << 10, 'z') << "\"}";
      f << "}";
    }
    f << "\n]}\n";
  }
  for (size_t window : {size_t{256} << 10, size_t{1} << 20}) {
    const BothWays w = ImportBothWays(trace, window);
    for (const auto& r : w.results) ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(w.results[0]->files.at(0).elements, 40000);
    ExpectSameImports(w, "window " + std::to_string(window));
  }
}

// The event chunks of a run's one store, in the order they were written: their event counts.
std::vector<int64_t> EventChunkCounts(const std::string& run) {
  std::vector<int64_t> counts;
  auto nodes = ListDirectory(run + "/nodes");
  if (!nodes.ok() || nodes->size() != 1) return counts;
  auto db = store::SqliteDb::Open(run + "/nodes/" + nodes->front() + "/store.sqlite",
                                  store::SqliteDb::Mode::kReadOnly);
  if (!db.ok()) return counts;
  auto st = (*db)->Prepare("SELECT count FROM event_chunks ORDER BY id");
  if (!st.ok()) return counts;
  Status status;
  while (st->Step(&status)) counts.push_back(st->Int(0));
  return counts;
}

// The last batch is encoded after the stream ends, while nothing else runs: the importer cuts
// its batches by the file's text, at most an eighth of it each and shrinking by halves toward
// the end, so that the last holds at most 1 MiB of text. A generated 24 MiB trace of events of
// one length (so a chunk's text is its count times that length and the ",\n" between them),
// below the event count that cuts batches; one way and the other, the same store.
TEST(KinetoImporterTest, BatchesFollowTheFileTextSoTheLastOneIsSmall) {
  const std::string trace = TempDir() + "/even.json";
  const std::string head = "{\"traceEvents\": [\n";
  int64_t stride = 0, events = 0, text_bytes = 0;
  {
    std::ofstream f(trace);
    f << head;
    text_bytes += static_cast<int64_t>(head.size());
    char e[256];
    for (int64_t i = 0; text_bytes < (int64_t{24} << 20); ++i) {
      // Fixed width: every element the same length.
      const int n = std::snprintf(e, sizeof e,
                                  "%s{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", "
                                  "\"pid\": 1, \"tid\": 2, \"ts\": %016lld, \"dur\": 5, "
                                  "\"args\": {\"External id\": %09lld}}",
                                  i == 0 ? "" : ",\n", 1700000000000000LL + i * 10,
                                  static_cast<long long>(i));
      f.write(e, n);
      if (i == 1) stride = n;  // an element and the ",\n" before it
      text_bytes += n;
      ++events;
    }
    f << "\n]}\n";
  }
  const BothWays w = ImportBothWays(trace, size_t{1} << 20);
  for (const auto& r : w.results) ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(w.results[1]->events_stored, events);
  ExpectSameImports(w, "even.json");
  const std::vector<int64_t> counts = EventChunkCounts(w.runs[1]);
  ASSERT_GE(counts.size(), 9u);  // eight eighths, then the halves of the last
  int64_t total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    total += counts[i];
    EXPECT_LE(counts[i] * stride, text_bytes / 8 + stride) << "chunk " << i;
    if (i + 1 < counts.size()) {
      EXPECT_GE(counts[i] * stride, int64_t{1} << 20) << "chunk " << i;
    }
  }
  EXPECT_EQ(total, events);
  EXPECT_LE(counts.back() * stride, (int64_t{1} << 20) + stride);
  // Shrinking toward the end: each of the last three at most the one before.
  for (size_t i = counts.size() - 3; i + 1 < counts.size(); ++i) {
    EXPECT_LE(counts[i + 1], counts[i]) << "chunk " << i + 1;
  }
}

// What the pipeline hands the importer's thread says where each element lies in the text, as
// the streamer does on one thread: a parsed event's end (RawEvent::text_end), and the offset of
// an element cut out as text (OnEvent) or of a top-level member's value (OnTopLevel). Checked
// against the text itself, over windows of 4 KiB and elements that straddle them.
TEST(KinetoImporterTest, ThePipelineSaysWhereEachElementLies) {
  class Where : public ParsedEventSink {
   public:
    Status OnParsedEvent(const RawEvent& e) override {
      ends.push_back(e.text_end);
      return OkStatus();
    }
    Status OnEvent(std::string_view text) override {
      cut.emplace_back(element_offset(), std::string(text));
      return OkStatus();
    }
    Status OnTopLevel(std::string_view key, std::string_view value) override {
      (void)key;
      top.emplace_back(element_offset(), std::string(value));
      return OkStatus();
    }
    std::vector<int64_t> ends;
    std::vector<std::pair<int64_t, std::string>> cut, top;
  };
  std::string text =
      "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0}],\n\"traceEvents\": [";
  std::vector<int64_t> want_ends;
  for (int i = 0; i < 3000; ++i) {
    text += i == 0 ? "\n  " : ",\n  ";
    std::string e = "{\"ph\": \"X\", \"ts\": " + std::to_string(1000 + i) + ", \"dur\": 1";
    if (i % 50 == 7) e += ", \"n\\u0061me\": 1";  // an escaped key: cut out as text
    if (i % 400 == 3) e += ", \"args\": {\"pad\": \"" + std::string(5000, 'p') + "\"}";
    e += "}";
    text += e;
    if (i % 50 != 7) want_ends.push_back(static_cast<int64_t>(text.size()));
  }
  text += "\n], \"baseTimeNanoseconds\": 17}";
  const std::string path = TempDir() + "/where.json";
  testing::WriteFile(path, text);
  auto src = ByteSource::Open(path);
  ASSERT_TRUE(src.ok());
  Where sink;
  StreamOptions options;
  options.initial_buffer_bytes = 4096;
  auto r = StreamTraceParallel(**src, sink, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(sink.ends, want_ends);
  ASSERT_EQ(sink.cut.size(), 60u);
  for (const auto& [offset, element] : sink.cut) {
    EXPECT_EQ(text.substr(static_cast<size_t>(offset), element.size()), element) << offset;
  }
  ASSERT_EQ(sink.top.size(), 3u);
  for (const auto& [offset, value] : sink.top) {
    EXPECT_EQ(text.substr(static_cast<size_t>(offset), value.size()), value) << offset;
  }
}

TEST(KinetoImporterTest, ManyRanksInOneRun) {
  std::string run;
  auto r = Import(
      {kHta + "trace_filter/sampled_rank-0.json.gz", kHta + "trace_filter/sampled_rank-1.json.gz"},
      &run);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->events_stored, 4813 + 4678);
  EXPECT_EQ(r->nodes, (std::vector<std::string>{"rank-0", "rank-1"}));
  auto reader = store::RunReader::Open(run);
  ASSERT_TRUE(reader.ok());
  store::EventQuery q;
  q.ranks = {1};
  auto events = (*reader)->Events(q);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 4678u);
}

TEST(KinetoImporterTest, DuplicatedRankIsRefused) {
  std::string run;
  auto r = Import(
      {kHta + "trace_compare/base/base.json.gz", kHta + "trace_compare/test/test.json.gz"}, &run);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rank 1 (distributedInfo) was already imported"),
            std::string::npos)
      << r.status().message();
}

TEST(KinetoImporterTest, TracesWithoutARankNamedAlikeStayApartAndNoFileIsTakenTwice) {
  // Two traces of two jobs, neither with a rank, both named trace.json.gz: each is a process
  // of its own, not one 19-hour timeline.
  const std::string dir = TempDir();
  const std::vector<std::string> sources = {
      SharedData(kTb + "samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"),
      SharedData(kTb + "samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz")};
  std::vector<std::string> copies;
  std::vector<int64_t> alone;
  for (size_t i = 0; i < sources.size(); ++i) {
    copies.push_back(dir + "/" + std::string(1, static_cast<char>('a' + i)) + "/trace.json.gz");
    std::filesystem::create_directories(std::filesystem::path(copies.back()).parent_path());
    std::filesystem::copy_file(sources[i], copies.back());
    KinetoImportOptions o;
    o.traces = {sources[i]};
    o.out = TempDir() + "/alone";
    auto r = ImportKineto(o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    alone.push_back(r->events_stored);
  }
  KinetoImportOptions o;
  o.traces = copies;
  o.out = dir + "/run";
  auto r = ImportKineto(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->nodes, (std::vector<std::string>{"trace", "trace-2"}));
  ASSERT_EQ(r->files.size(), 2u);
  EXPECT_TRUE(r->files[0].warnings.empty());
  ASSERT_EQ(r->files[1].warnings.size(), 1u);
  EXPECT_NE(r->files[1].warnings[0].find("was taken by " + copies[0]), std::string::npos)
      << r->files[1].warnings[0];
  auto reader = store::RunReader::Open(o.out);
  ASSERT_TRUE(reader.ok());
  auto events = (*reader)->Events({});
  ASSERT_TRUE(events.ok());
  std::map<std::string, int64_t> per_node;
  for (size_t i = 0; i < events->size(); ++i) ++per_node[events->nodes.at(events->node[i])];
  EXPECT_EQ(per_node["trace"], alone[0]);
  EXPECT_EQ(per_node["trace-2"], alone[1]);

  // The same file twice (as given, or by another path to it) would store each event twice.
  for (const std::string& again : {copies[0], dir + "/b/../a/trace.json.gz"}) {
    o.traces = {copies[0], again};
    o.out = TempDir() + "/twice";
    auto twice = ImportKineto(o);
    ASSERT_FALSE(twice.ok());
    EXPECT_NE(twice.status().message().find("given twice"), std::string::npos)
        << twice.status().message();
  }
}

TEST(KinetoImporterTest, RanksOfAHostShareANodeAfterATraceWithoutARankTookItsName) {
  // A trace without a rank from host h1 first, then ranks 0 and 1 of h1: the ranks share one
  // node (not one each: the job would be billed as three instances), and the rankless trace
  // keeps its own.
  std::string dir = TempDir();
  auto trace = [&](const std::string& name, const std::string& rank) {
    testing::WriteFile(dir + "/" + name, R"({"host_name": "h1", )" + rank + R"("traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "op", "ts": 1000, "dur": 5, "pid": 1, "tid": 1}]})");
    return dir + "/" + name;
  };
  KinetoImportOptions o;
  o.traces = {trace("solo.json", ""), trace("r0.json", R"("distributedInfo": {"rank": 0}, )"),
              trace("r1.json", R"("distributedInfo": {"rank": 1}, )")};
  o.out = dir + "/run";
  auto r = ImportKineto(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->nodes, (std::vector<std::string>{"h1", "h1-2"}));
  ASSERT_EQ(r->files.size(), 3u);
  EXPECT_EQ(r->files[0].node, "h1");
  EXPECT_EQ(r->files[1].node, "h1-2");
  EXPECT_EQ(r->files[2].node, "h1-2");
}

TEST(KinetoImporterTest, NonTracesAreRefusedWithAReason) {
  std::string run;
  auto r = Import({kHta + "execution_trace/benchmark_simple_add_et.json.gz"}, &run);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no \"traceEvents\""), std::string::npos);
  r = Import({kHta + "memory_analysis/memory_timeline.raw.gz"}, &run);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("none of its 16845 elements"), std::string::npos);
  r = Import({kTb + "test/result_check_file.txt"}, &run);
  ASSERT_FALSE(r.ok());
}

TEST(KinetoImporterTest, RelativeTimestampsWithoutBaseAreCounted) {
  std::string run;
  auto r =
      Import({kHta + "large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz"}, &run);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->files[0].problems.at(dq::kRelativeTimestamps), 1);
  auto reader = store::RunReader::Open(run);
  ASSERT_TRUE(reader.ok());
  auto counters = (*reader)->Counters();
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ(counters->at(dq::kRelativeTimestamps), 1);
}

TEST(KinetoImporterTest, MemoryEventsAndCountersBecomeMetrics) {
  std::string run;
  auto r = Import({kHta + "df_index_resolver/df_index_resolver.json.gz"}, &run);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->files[0].rank, 1);
  EXPECT_EQ(r->files[0].gpus, 2);
  auto reader = store::RunReader::Open(run);
  ASSERT_TRUE(reader.ok());
  store::MetricQuery q;
  q.metrics = {"torch_memory_allocated_bytes"};
  auto m = (*reader)->SystemMetrics(q);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(static_cast<int64_t>(m->size()) * 2, r->files[0].metric_samples);
  EXPECT_GT(m->size(), 1000u);
  auto infos = (*reader)->node_infos();
  ASSERT_EQ(infos.size(), 1u);
  ASSERT_EQ(infos[0]->gpus.size(), 2u);
  EXPECT_EQ(infos[0]->gpus[0].name, "Tesla V100-SXM2-32GB");

  r = Import({kTb + "test/gpu_metrics_expected.json"}, &run);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->files[0].metric_samples, 78);  // the 78 "ph":"C" samples
}

TEST(KinetoImporterTest, EndArgsJoinTheirSpanAndCounterKeysAreDecoded) {
  // A B/E pair's args are both events' (the begin's value wins a clash); a counter's keys are
  // the series' devices, decoded ("dev\u00e9" -> "devé", "a\/b" -> "a/b"): they were
  // stored with their escapes, and the end's args were dropped.
  std::string dir = TempDir();
  testing::WriteFile(dir + "/t.json", R"({"traceEvents": [
{"ph": "B", "name": "op", "ts": 1000, "pid": 1, "tid": 1, "args": {"a": 1, "c": 0}},
{"ph": "E", "ts": 1005, "pid": 1, "tid": 1, "args": {"b": 2, "c": 3}},
{"ph": "C", "name": "mem", "ts": 1010, "pid": 1, "args": {"dev\u00e9": 5, "a\/b": 6}}
]})");
  KinetoImportOptions o;
  o.traces = {dir + "/t.json"};
  o.out = dir + "/run";
  auto r = ImportKineto(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto reader = store::RunReader::Open(o.out);
  ASSERT_TRUE(reader.ok());
  auto events = (*reader)->Events({});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(events->args[0], R"({"a":1,"c":0,"b":2})");
  auto m = (*reader)->SystemMetrics({});
  ASSERT_TRUE(m.ok());
  std::set<std::string> devices;
  for (size_t i = 0; i < m->size(); ++i) devices.insert(m->devices.at(m->device[i]));
  EXPECT_EQ(devices, (std::set<std::string>{"dev\xc3\xa9", "a/b"}));
}

TEST(KinetoImporterTest, BadEventsAreCountedNotFatal) {
  std::string dir = TempDir();
  testing::WriteFile(dir + "/bad.json", R"({"distributedInfo": {"rank": 5},
    "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 10, "dur": 2},
      {"ph": "X", "cat": "kernel", "name": "no ts", "pid": 0, "tid": 7, "dur": 2},
      {"ph": "X", "cat": "kernel", "name": "neg", "pid": 0, "tid": 7, "ts": 11, "dur": -5},
      {"ph": "X", "cat": "kernel", "name": "huge", "pid": 0, "tid": 7, "ts": 11, "dur": 1e15},
      {"ph": "X", "cat": "kernel", "name": "str ts", "pid": 0, "tid": 7, "ts": "abc", "dur": 1},
      {"ph": "X", "cat": "kernel", "name": [1,2], "pid": 0, "tid": 7, "ts": 12, "dur": 1},
      {"ph": "Q", "cat": "whatever", "name": "x", "ts": 1},
      {"ph": "X", "cat": "brand_new_category", "name": "kept", "pid": 1, "tid": 1, "ts": 13,
       "dur": 1},
      42,
      {"ph": "X", "cat": "kernel", "name": "no dur", "pid": 0, "tid": 7, "ts": 12}
    ]})");
  KinetoImportOptions o;
  o.traces = {dir + "/bad.json"};
  o.out = dir + "/run";
  auto r = ImportKineto(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& f = r->files[0];
  EXPECT_EQ(f.rank, 5);
  EXPECT_EQ(f.events_stored, 2);  // "ok" and "kept"; a name of the wrong type is invalid
  EXPECT_EQ(f.problems.at(dq::kEventsWithoutTimestamp), 2);
  EXPECT_EQ(f.problems.at(dq::kAbsurdDurations), 2);
  EXPECT_EQ(f.problems.at(dq::kUnknownPhases), 1);
  EXPECT_EQ(f.problems.at(dq::kInvalidEvents), 2);  // the array name and the bare 42
  EXPECT_EQ(f.problems.at(dq::kEventsWithoutDuration), 1);
  EXPECT_EQ(f.categories.at("brand_new_category"), 1);
}

// A timestamp that, with the file's base, leaves the int64 range of nanoseconds (UBSan: signed
// overflow, found in the Horovod importer by fuzz_horovod_import) or comes near it: counted as
// import_absurd_timestamps and skipped; the other events are stored, their ends computable.
TEST(KinetoImporterTest, TimestampsBeyondTheRangeAreCountedNotOverflowed) {
  std::string dir = TempDir();
  testing::WriteFile(dir + "/far.json", R"({"baseTimeNanoseconds": 1700000000000000000,
    "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 10, "dur": 2},
      {"ph": "X", "cat": "kernel", "name": "wraps", "pid": 0, "tid": 7, "ts": 9000000000000000,
       "dur": 1},
      {"ph": "X", "cat": "kernel", "name": "near", "pid": 0, "tid": 7, "ts": 3000000000000000,
       "dur": 1},
      {"ph": "i", "cat": "kernel", "name": "wraps too", "pid": 0, "tid": 7,
       "ts": -9000000000000000, "s": "t"}
    ]})");
  KinetoImportOptions o;
  o.traces = {dir + "/far.json"};
  o.out = dir + "/run";
  auto r = ImportKineto(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& f = r->files[0];
  EXPECT_EQ(f.events_stored, 1);
  EXPECT_EQ(f.problems.at(dq::kAbsurdTimestamps), 3);
}

// Found by fuzz_kineto_import: a byte that is not UTF-8 in a device name made the node info's
// JSON throw and aborted the import. Bad bytes are kept as U+FFFD now, everywhere we write JSON.
TEST(KinetoImporterTest, InvalidUtf8InNamesIsReplacedNotFatal) {
  std::string dir = TempDir();
  testing::WriteFile(dir + "/utf8.json",
                     "{\"deviceProperties\": [{\"id\": 0, \"name\": \"GPU \xe1\"}],\n"
                     " \"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": "
                     "\"k\xff\", \"pid\": 0, \"tid\": 7, \"ts\": 10, \"dur\": 2}]}");
  KinetoImportOptions o;
  o.traces = {dir + "/utf8.json"};
  o.out = dir + "/run";
  auto r = ImportKineto(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->files[0].events_stored, 1);
  auto reader = store::RunReader::Open(o.out);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto infos = (*reader)->node_infos();
  ASSERT_EQ(infos.size(), 1u);
  ASSERT_EQ(infos[0]->gpus.size(), 1u);
  EXPECT_EQ(infos[0]->gpus[0].name, "GPU \xef\xbf\xbd");
}

}  // namespace
}  // namespace trainprof::importers::kineto
