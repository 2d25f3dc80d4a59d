// Several traces read at once (KinetoImportOptions::file_threads, a thread a file) against the
// same traces read one after the other: the same nodes, the same file summaries, the same
// events, metrics, counters, warnings and node metadata, and the same error when a file fails.
// Stores of a node that one file fills are the same byte for byte; a node that two files fill
// at once (two ranks of one host) holds the same content in other chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/files.h"
#include "importers/common/test_util.h"
#include "importers/kineto/kineto_importer.h"
#include "store/run_reader.h"
#include "store/store_test_util.h"

namespace trainprof::importers::kineto {
namespace {

using testing::SharedData;
using testing::TempDir;

// A trace of `spans` cpu_op spans from `t0_us` (each `dur` 7 µs), every 97th without a dur (a
// problem, counted), a counter every 40th and a [memory] instant every 60th; a process_name.
// `header`: the top-level members before traceEvents.
std::string WriteTrace(const std::string& path, const std::string& header, int spans,
                       int64_t t0_us) {
  std::string text = "{" + header + "\"traceEvents\": [\n";
  text += R"({"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "train"}})";
  for (int i = 0; i < spans; ++i) {
    const std::string ts = std::to_string(t0_us + 10 * i);
    text += ",\n{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op" + std::to_string(i % 13) +
            "\", \"pid\": 7, \"tid\": " + std::to_string(i % 3) + ", \"ts\": " + ts;
    if (i % 97 != 0) text += ", \"dur\": 7";
    text += ", \"args\": {\"seq\": " + std::to_string(i) + "}}";
    if (i % 40 == 0) {
      text += ",\n{\"ph\": \"C\", \"name\": \"queue\", \"pid\": 7, \"ts\": " + ts +
              ", \"args\": {\"depth\": " + std::to_string(i % 9) + "}}";
    }
    if (i % 60 == 0) {
      text += ",\n{\"ph\": \"i\", \"name\": \"[memory]\", \"pid\": 7, \"tid\": 0, \"ts\": " + ts +
              ", \"args\": {\"Device Type\": 1, \"Device Id\": 0, \"Total Allocated\": " +
              std::to_string(1000 + i) + ", \"Total Reserved\": 4096}}";
    }
  }
  text += "\n]}";
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  testing::WriteFile(path, text);
  return path;
}

std::string Ranked(const std::string& host, int rank, int schema) {
  std::string h = "\"schemaVersion\": " + std::to_string(schema) + ", ";
  if (!host.empty()) h += "\"host_name\": \"" + host + "\", ";
  return h + "\"distributedInfo\": {\"rank\": " + std::to_string(rank) +
         ", \"world_size\": 8, \"backend\": \"nccl\"}, ";
}

// Everything a reader gets from a run, each part in an order of its own (sorted rows).
struct Content {
  std::vector<std::string> events, metrics, annotations;
  std::map<std::string, int64_t> counters;
  std::map<std::string, std::map<std::string, std::string>> node_meta;
  int64_t start_ns = 0;
  std::optional<int64_t> end_ns;
  std::vector<std::string> nodes;
};

Content Read(const std::string& run) {
  Content c;
  auto reader = store::RunReader::Open(run);
  EXPECT_TRUE(reader.ok()) << run;
  if (!reader.ok()) return c;
  store::RunReader& r = **reader;
  auto events = r.Events({});
  EXPECT_TRUE(events.ok());
  for (size_t i = 0; events.ok() && i < events->size(); ++i) {
    c.events.push_back(events->nodes.at(events->node[i]) + "|" + events->names.at(events->name[i]) +
                       "|" + events->categories.at(events->category[i]) + "|" +
                       events->modes.at(events->mode[i]) + "|" + std::to_string(events->kind[i]) +
                       "|" + std::to_string(events->rank[i]) + "|" +
                       std::to_string(events->pid[i]) + "|" + std::to_string(events->tid[i]) + "|" +
                       std::to_string(events->step[i]) + "|" + std::to_string(events->start_ns[i]) +
                       "|" + std::to_string(events->duration_ns[i]) + "|" + events->args[i]);
  }
  auto metrics = r.SystemMetrics({});
  EXPECT_TRUE(metrics.ok());
  for (size_t i = 0; metrics.ok() && i < metrics->size(); ++i) {
    c.metrics.push_back(
        metrics->nodes.at(metrics->node[i]) + "|" + metrics->metrics.at(metrics->metric[i]) + "|" +
        metrics->devices.at(metrics->device[i]) + "|" + std::to_string(metrics->timestamp_ns[i]) +
        "|" + std::to_string(metrics->value[i]));
  }
  auto annotations = r.Annotations();
  EXPECT_TRUE(annotations.ok());
  if (annotations.ok()) {
    for (const auto& [node, a] : *annotations) {
      c.annotations.push_back(node + "|" + std::to_string(a.ts_ns) + "|" + a.key + "|" + a.value);
    }
  }
  auto counters = r.Counters();
  EXPECT_TRUE(counters.ok());
  if (counters.ok()) c.counters = *counters;
  auto meta = r.NodeMeta();
  EXPECT_TRUE(meta.ok());
  if (meta.ok()) c.node_meta = *meta;
  for (auto& [node, m] : c.node_meta) m.erase("created_ns");  // when the store was made
  c.start_ns = r.metadata().start_ns;
  c.end_ns = r.metadata().end_ns;
  c.nodes = r.nodes();
  for (auto* rows : {&c.events, &c.metrics, &c.annotations}) std::sort(rows->begin(), rows->end());
  return c;
}

// A node's store file, its creation time written as a fixed text.
std::string StoreBytes(const std::string& run, const std::string& node) {
  const std::string path = run + "/nodes/" + node + "/store.sqlite";
  auto bytes = ReadFileToString(path);
  if (!bytes.ok()) return "(unreadable)";
  std::string b = *bytes;
  const std::string own = store::testing::StoreCreatedNs(path);
  if (!own.empty()) {
    const std::string fixed(own.size(), '9');
    for (size_t k = b.find(own); k != std::string::npos; k = b.find(own, k + 1)) {
      b.replace(k, own.size(), fixed);
    }
  }
  return b;
}

StatusOr<KinetoImportResult> ImportWith(const std::vector<std::string>& traces, int file_threads,
                                        const std::string& out) {
  KinetoImportOptions o;
  o.traces = traces;
  o.out = out;
  o.file_threads = file_threads;
  o.parse_threads = 1;
  o.flush_events = 2000;  // many batches a file: two files of one node cut theirs in turn
  return ImportKineto(o);
}

TEST(KinetoFilesAtOnceTest, FilesReadAtOnceGiveTheRunOfFilesReadOneAfterTheOther) {
  const std::string dir = TempDir();
  const std::string hta = SharedData("traces/HolisticTraceAnalysis/tests/data/");
  std::vector<std::string> traces = {
      // Ranks 10-12 of host h1: one node, filled by three files (at once when read at once),
      // each with its own schemaVersion: the node keeps the last file's.
      WriteTrace(dir + "/h1/r10.json", Ranked("h1", 10, 1), 30000, 1'700'000'000'000'000),
      WriteTrace(dir + "/h1/r11.json", Ranked("h1", 11, 2), 25000, 1'700'000'000'000'005),
      // Two traces without a rank named alike: the second is stored as "trace-2", warned.
      WriteTrace(dir + "/a/trace.json", "", 8000, 1'700'000'000'100'000),
      WriteTrace(dir + "/b/trace.json", "", 9000, 1'700'000'000'200'000),
      WriteTrace(dir + "/h1/r12.json", Ranked("h1", 12, 3), 20000, 1'700'000'000'000'009),
      // A rankless trace takes host h2's name; then a rank of h2 gets "h2-2".
      WriteTrace(dir + "/h2/solo.json", "\"host_name\": \"h2\", ", 5000, 1'700'000'001'000'000),
      WriteTrace(dir + "/h2/r14.json", Ranked("h2", 14, 1), 12000, 1'700'000'001'000'000),
      WriteTrace(dir + "/r15.json", Ranked("", 15, 1), 4000, 1'700'000'002'000'000),
      // Two real traces: relative timestamps with baseTimeNanoseconds at the end, ns ones.
      hta + "trace_filter/sampled_rank-1.json.gz",
      hta + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
  };
  auto serial = ImportWith(traces, 1, dir + "/serial");
  ASSERT_TRUE(serial.ok()) << serial.status().message();
  // The truth of the generated files: h1 holds the spans with a dur and the [memory] instants
  // of ranks 10-12; the rankless "trace" of b/ became "trace-2", h2's rank "h2-2".
  const Content one = Read(dir + "/serial");
  auto every = [](int n, int m) { return (n - 1) / m + 1; };  // i in [0, n) with i % m == 0
  int64_t h1_events = 0;
  for (const std::string& e : one.events) h1_events += e.starts_with("h1|");
  int64_t expected = 0;
  for (int n : {30000, 25000, 20000}) expected += n - every(n, 97) + every(n, 60);
  EXPECT_EQ(h1_events, expected);
  EXPECT_EQ(one.node_meta.at("h1").at("kineto.schemaVersion"), "3");
  ASSERT_EQ(serial->files.size(), traces.size());
  EXPECT_EQ(serial->files[3].node, "trace-2");
  EXPECT_EQ(serial->files[6].node, "h2-2");

  for (int threads : {2, 3, 8}) {
    SCOPED_TRACE("file_threads " + std::to_string(threads));
    const std::string out = dir + "/at_once_" + std::to_string(threads);
    auto at_once = ImportWith(traces, threads, out);
    ASSERT_TRUE(at_once.ok()) << at_once.status().message();
    EXPECT_EQ(at_once->nodes, serial->nodes);
    EXPECT_EQ(at_once->events_stored, serial->events_stored);
    ASSERT_EQ(at_once->files.size(), serial->files.size());
    for (size_t k = 0; k < serial->files.size(); ++k) {
      const KinetoFileSummary &a = serial->files[k], &b = at_once->files[k];
      EXPECT_EQ(a.path, b.path);
      EXPECT_EQ(a.node, b.node) << a.path;
      EXPECT_EQ(a.rank, b.rank) << a.path;
      EXPECT_EQ(a.elements, b.elements) << a.path;
      EXPECT_EQ(a.events_stored, b.events_stored) << a.path;
      EXPECT_EQ(a.categories, b.categories) << a.path;
      EXPECT_EQ(a.problems, b.problems) << a.path;
      EXPECT_EQ(a.warnings, b.warnings) << a.path;
      EXPECT_EQ(a.start_ns, b.start_ns) << a.path;
      EXPECT_EQ(a.end_ns, b.end_ns) << a.path;
    }
    const Content many = Read(out);
    EXPECT_EQ(many.nodes, one.nodes);
    EXPECT_EQ(many.events, one.events);
    EXPECT_EQ(many.metrics, one.metrics);
    EXPECT_EQ(many.annotations, one.annotations);
    EXPECT_EQ(many.counters, one.counters);
    EXPECT_EQ(many.node_meta, one.node_meta);
    EXPECT_EQ(many.start_ns, one.start_ns);
    EXPECT_EQ(many.end_ns, one.end_ns);
    // A node that one file fills is written by the same calls in the same order.
    for (const std::string& node : one.nodes) {
      if (node == "h1") continue;  // three files at once: the same content, other chunks
      EXPECT_TRUE(StoreBytes(out, node) == StoreBytes(dir + "/serial", node)) << node;
    }
  }
}

// A file that fails stops the import with its error, whichever thread met it first: the same
// error as files read one after the other, and no later file's failure in its place.
TEST(KinetoFilesAtOnceTest, TheFirstFailureInTheListIsTheImportsWhateverTheThreads) {
  const std::string dir = TempDir();
  const std::string good0 =
      WriteTrace(dir + "/g0.json", Ranked("", 0, 1), 40000, 1'700'000'000'000'000);
  const std::string good1 =
      WriteTrace(dir + "/g1.json", Ranked("", 1, 1), 300, 1'700'000'000'000'000);
  const std::string again0 =
      WriteTrace(dir + "/again0.json", Ranked("", 0, 1), 300, 1'700'000'000'000'000);
  const std::string broken = dir + "/broken.json";
  testing::WriteFile(broken, R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": 2}, {"ph": )");
  const std::string not_trace = dir + "/not_trace.json";
  testing::WriteFile(not_trace, R"({"hello": [1, 2, 3]})");
  const std::string missing = dir + "/missing.json";
  const std::vector<std::vector<std::string>> lists = {
      {good0, again0, good1},             // rank 0 twice: the second refused
      {good0, good1, broken},             // cut short
      {good0, broken, good1, not_trace},  // two failures: the first in the list is the import's
      {good0, missing, good1},            // a file that does not open
      {good1, not_trace, broken},
  };
  int k = 0;
  for (const auto& list : lists) {
    auto serial = ImportWith(list, 1, dir + "/serial" + std::to_string(k));
    ASSERT_FALSE(serial.ok()) << k;
    for (int threads : {2, 3}) {
      auto at_once = ImportWith(
          list, threads, dir + "/at_once" + std::to_string(k) + "_" + std::to_string(threads));
      ASSERT_FALSE(at_once.ok()) << k;
      EXPECT_EQ(at_once.status().code(), serial.status().code()) << k;
      EXPECT_EQ(at_once.status().message(), serial.status().message()) << k;
    }
    ++k;
  }
}

}  // namespace
}  // namespace trainprof::importers::kineto
