#include "importers/smdebug/smdebug_importer.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "base/files.h"
#include "importers/common/import_counters.h"
#include "importers/common/test_util.h"
#include "model/data_quality.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace trainprof::importers::smdebug {
namespace {

namespace fs = std::filesystem;
using testing::SharedData;
using testing::TempDir;

const std::string kRes = "smdebug/tests/profiler/resources/";

struct Imported {
  std::string out;
  SmdebugImportResult result;
  std::unique_ptr<store::RunReader> reader;
};

Imported Import(const std::string& dir) {
  Imported out;
  SmdebugImportOptions o;
  o.dir = dir;
  o.out = TempDir() + "/run";
  out.out = o.out;
  auto r = ImportSmdebug(o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (r.ok()) out.result = *r;
  auto reader = store::RunReader::Open(o.out);
  EXPECT_TRUE(reader.ok());
  if (reader.ok()) out.reader = std::move(reader).value();
  return out;
}

// A profiler-output folder holding one copied file at `rel` (its smdebug layout path).
std::string Folder(const std::string& src, const std::string& rel) {
  std::string dir = TempDir();
  fs::create_directories(fs::path(dir + "/" + rel).parent_path());
  fs::copy_file(SharedData(src), dir + "/" + rel);
  return dir;
}

// smdebug's framework readers select events overlapping the window, edges included.
int64_t SpansInWindow(const store::EventTable& t, int64_t lo_us, int64_t hi_us) {
  int64_t n = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] != 0) continue;
    int64_t s = t.start_ns[i], e = t.start_ns[i] + t.duration_ns[i];
    if (s <= hi_us * 1000 && e >= lo_us * 1000) ++n;
  }
  return n;
}

int64_t Spans(const store::EventTable& t) {
  int64_t n = 0;
  for (size_t i = 0; i < t.size(); ++i) n += t.kind[i] == 0;
  return n;
}

// The expected values below are smdebug's own test expectations, listed in
// ../shared/data/smdebug/README.md ("Expected values").
TEST(SmdebugImporterTest, SystemMetricsTestTraces) {
  Imported im = Import(SharedData(kRes + "test_traces"));
  EXPECT_EQ(im.result.system_samples, 78);
  EXPECT_EQ(im.result.samples_by_type.at("cpu"), 68);
  store::MetricQuery q;
  q.start_ns = 1591100000LL * 1'000'000'000;
  q.end_ns = 1591167699LL * 1'000'000'000 + 1;
  auto m = im.reader->SystemMetrics(q);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->size(), 10u);
  // Units converted: CPUUtilization 4.76 (percent) -> cpu_utilization_ratio 0.0476, and the
  // timestamp 1591160699.4570894 s kept to the nanosecond from its text.
  bool found = false;
  for (size_t i = 0; i < m->size(); ++i) {
    if (m->metrics.at(m->metric[i]) == "cpu_utilization_ratio" &&
        m->devices.at(m->device[i]) == "cpu0" && m->timestamp_ns[i] == 1591160699457089400) {
      EXPECT_NEAR(m->value[i], 0.0476, 1e-12);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // smdebug selects files by their file-name minute, so its window 1591748165-1600000000 s
  // returns 32 events including whole files; we filter samples by their own timestamps.
  auto events = im.reader->Events({});
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(SpansInWindow(*events, 1589930980000000, 1589930995000000), 4);
  EXPECT_EQ(im.result.framework_files, 4);
}

TEST(SmdebugImporterTest, CorruptLastLineIsSkippedAndCounted) {
  Imported ok = Import(Folder(kRes + "1591160699.algo-1.json",
                              "system/incremental/2020060305/1591160699.algo-1.json"));
  EXPECT_EQ(ok.result.system_samples, 14);
  EXPECT_EQ(ok.result.parse_errors, 0);
  Imported bad = Import(Folder(kRes + "1591160699.algo-1.json.corrupt",
                               "system/incremental/2020060305/1591160699.algo-1.json"));
  EXPECT_EQ(bad.result.system_samples, 13);
  EXPECT_EQ(bad.result.parse_errors, 1);
  auto counters = bad.reader->Counters();
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ(counters->at(model::dq::kParseErrors), 1);
}

TEST(SmdebugImporterTest, ModelTimelineAbsoluteTimes) {
  Imported im = Import(Folder(kRes + "1589314018481947000_1234-testhost_model_timeline.json",
                              "framework/pevents/2020051220/"
                              "1589314018481947000_1234-testhost_model_timeline.json"));
  auto t = im.reader->Events({});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(Spans(*t), 49);
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (size_t i = 0; i < t->size(); ++i) {
    lo = std::min(lo, t->start_ns[i]);
    hi = std::max(hi, t->start_ns[i] + t->duration_ns[i]);
  }
  EXPECT_EQ(lo, 1589314018458743000);
  EXPECT_EQ(hi, 1589314018481947000);
}

TEST(SmdebugImporterTest, FrameworkReaderWindows) {
  Imported mt = Import(SharedData(kRes + "model_timeline_traces"));
  auto t = mt.reader->Events({});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(SpansInWindow(*t, 1590461127873222, 1590461139949971), 54);
  EXPECT_EQ(mt.result.nodes, std::vector<std::string>{"0001"});

  Imported hv = Import(SharedData(kRes + "horovod_timeline_traces"));
  auto h = hv.reader->Events({});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(SpansInWindow(*h, 1593673051472800, 1593673051473100), 15);

  Imported one = Import(Folder(kRes + "horovod_timeline_traces/framework/pevents/2020070206/"
                                      "1593673051473228_88359-8c859046be41.ant.amazon.com_"
                                      "horovod_timeline.json",
                               "framework/pevents/2020070206/"
                               "1593673051473228_88359-8c859046be41.ant.amazon.com_horovod_"
                               "timeline.json"));
  auto o = one.reader->Events({});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(Spans(*o), 19);
  EXPECT_EQ(SpansInWindow(*o, 1593673051473000, 1593673051473228), 12);
  for (size_t i = 0; i < o->size(); ++i) {
    if (o->kind[i] == 0) {
      EXPECT_EQ(o->categories.at(o->category[i]), "horovod");
    }
  }
}

TEST(SmdebugImporterTest, TensorflowProfilerTraceAndCProfile) {
  Imported im = Import(SharedData(kRes + "tfprofiler_timeline_traces"));
  EXPECT_EQ(im.result.tf_events, 798);
  EXPECT_EQ(im.result.python_stats_files, 3);
  store::EventQuery q;
  q.categories = {"tf_op"};
  auto t = im.reader->Events(q);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 798u);
  // Start time from the .metadata file name: 80807-..._1596659864545103_1596659864854168.
  int64_t lo = INT64_MAX;
  for (size_t i = 0; i < t->size(); ++i) lo = std::min(lo, t->start_ns[i]);
  EXPECT_GE(lo, 1596659864545103000);
  EXPECT_LT(lo, 1596659864854168000);
  // The node id 80807-8c859046be41.ant.amazon.com names the host; the trace's own pids (its
  // device tracks) stay.
  EXPECT_EQ(t->nodes.at(t->node[0]), "8c859046be41.ant.amazon.com");
  EXPECT_EQ(std::set<int64_t>(t->pid.begin(), t->pid.end()), std::set<int64_t>{49});
  q.categories = {"python_profile"};
  auto p = im.reader->Events(q);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->size(), 3u);

  Imported missing = Import(SharedData(kRes + "tfprofiler_local_missing_metadata"));
  auto counters = missing.reader->Counters();
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ(counters->at(dq::kRelativeTimestamps), 1);
}

TEST(SmdebugImporterTest, StepsFromPythonTimeline) {
  Imported im = Import(SharedData(kRes + "merge_traces"));
  EXPECT_EQ(im.result.steps, 40);
  auto steps = im.reader->Steps();
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 40u);
  EXPECT_EQ(steps->modes.at(steps->mode[0]), "train");
}

// --- Issue 16: one instance is one node, one vocabulary, exact decimals. ---

// The NodeId smdebug's framework files carry is "<pid or rank>-<host>" (smdebug's
// get_node_id), its system files "<host>": one SageMaker instance, so one node. The number
// becomes the events' pid (a process id) or rank (when the job's numbers are 0..N-1).
TEST(SmdebugImporterTest, FrameworkAndSystemFilesOfOneInstanceAreOneNode) {
  std::string dir = Folder(kRes + "1591160699.algo-1.json",
                           "system/incremental/2020060305/1591160699.algo-1.json");
  const std::string pevents = "framework/pevents/2020071317/";
  fs::create_directories(dir + "/" + pevents);
  fs::copy_file(SharedData(kRes + "merge_traces/" + pevents +
                           "1594662624718694_905-b88ab1bb8259_pythontimeline.json"),
                dir + "/" + pevents + "1594662624718694_1001-algo-1_pythontimeline.json");
  const std::string cprofile =
      "framework/tensorflow/cProfile/1596585376012363.8_1596585376017246.5_151-algo-1_3/";
  fs::create_directories(dir + "/" + cprofile);
  fs::copy_file(SharedData(kRes + "tfprofiler_timeline_traces/" + cprofile + "python_stats"),
                dir + "/" + cprofile + "python_stats");
  Imported im = Import(dir);
  EXPECT_EQ(im.result.nodes, std::vector<std::string>{"algo-1"});
  auto steps = im.reader->Steps();
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 40u);
  for (size_t i = 0; i < steps->size(); ++i) {
    EXPECT_EQ(steps->nodes.at(steps->node[i]), "algo-1");
    EXPECT_EQ(steps->pid[i], 1001);
    EXPECT_EQ(steps->rank[i], model::kMissing);  // 1001 and 151: process ids, not ranks
  }
  store::EventQuery q;
  q.categories = {"python_profile"};
  auto p = im.reader->Events(q);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 1u);
  EXPECT_EQ(p->pid[0], 151);
  EXPECT_EQ(p->nodes.at(p->node[0]), "algo-1");
}

TEST(SmdebugImporterTest, ABareProcessIdIsTheJobsOneInstance) {
  // SageMaker's own test_traces job: framework files named by a bare process id
  // ("1589930988000000_4487_0000_pythontimeline.json"; smdebug's reader gives node_id "4487")
  // and system files by the host (algo-1). One instance: one node, billed once; 4487 is the
  // process.
  Imported im = Import(SharedData(kRes + "test_traces"));
  EXPECT_EQ(im.result.nodes, std::vector<std::string>{"algo-1"});
  auto events = im.reader->Events({});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(Spans(*events), 4);
  for (size_t i = 0; i < events->size(); ++i) {
    EXPECT_EQ(events->nodes.at(events->node[i]), "algo-1");
    EXPECT_EQ(events->pid[i], 4487);
    EXPECT_EQ(events->rank[i], model::kMissing);
  }
  // With two instances in the system files the process's instance is unknown: the number
  // stays a node of its own rather than be given to either.
  std::string dir = Folder(kRes + "1591160699.algo-1.json",
                           "system/incremental/2020060305/1591160699.algo-1.json");
  auto text = ReadFileToString(SharedData(kRes + "1591160699.algo-1.json"));
  ASSERT_TRUE(text.ok());
  std::string algo2 = *text;
  for (size_t at = algo2.find("algo-1"); at != std::string::npos; at = algo2.find("algo-1", at))
    algo2.replace(at, 6, "algo-2");
  std::ofstream(dir + "/system/incremental/2020060305/1591160699.algo-2.json") << algo2;
  const std::string pevents = "framework/pevents/2020051923/";
  fs::create_directories(dir + "/" + pevents);
  fs::copy_file(SharedData(kRes + "test_traces/" + pevents +
                           "1589930988000000_4487_0000_pythontimeline.json"),
                dir + "/" + pevents + "1589930988000000_4487_0000_pythontimeline.json");
  Imported two = Import(dir);
  EXPECT_EQ(two.result.nodes, (std::vector<std::string>{"4487", "algo-1", "algo-2"}));
}

TEST(SmdebugImporterTest, RankPrefixesBecomeRanks) {
  std::string dir = TempDir();
  const std::string pevents = "framework/pevents/2020071317/";
  fs::create_directories(dir + "/" + pevents);
  const std::string src = SharedData(kRes + "merge_traces/" + pevents +
                                     "1594662624718694_905-b88ab1bb8259_pythontimeline.json");
  fs::copy_file(src, dir + "/" + pevents + "1594662624718694_0-algo-1_pythontimeline.json");
  fs::copy_file(src, dir + "/" + pevents + "1594662624718694_1-algo-1_pythontimeline.json");
  fs::copy_file(src, dir + "/" + pevents + "1594662624718694_2-algo-2_pythontimeline.json");
  Imported im = Import(dir);
  EXPECT_EQ(im.result.nodes, (std::vector<std::string>{"algo-1", "algo-2"}));
  auto steps = im.reader->Steps();
  ASSERT_TRUE(steps.ok());
  std::map<std::pair<std::string, int64_t>, int> per_rank;
  for (size_t i = 0; i < steps->size(); ++i) {
    ++per_rank[{steps->nodes.at(steps->node[i]), steps->rank[i]}];
  }
  EXPECT_EQ(per_rank, (std::map<std::pair<std::string, int64_t>, int>{
                          {{"algo-1", 0}, 40}, {{"algo-1", 1}, 40}, {{"algo-2", 2}, 40}}));
}

// Every system metric type SageMaker writes (the lines below have the shape of a real
// ml.m5.large job's system/incremental file: memory and i/o lines have an empty Dimension,
// network lines Dimension Algorithm or Platform) arrives under a sampler's metric and device
// names, or under a name docs/metrics.md documents.
const char* kAllTypes =
    R"({"Type": "memory", "Name": "MemoryUsedPercent", "Dimension": "", "Value": 6.18, "NodeId": "algo-1", "Timestamp": 1733636919.508406}
{"Type": "i/o", "Name": "IOPS", "Dimension": "", "Value": 5357.94, "NodeId": "algo-1", "Timestamp": 1733636920.008990}
{"Type": "i/o", "Name": "ReadThroughputInBytesPerSecond", "Dimension": "", "Value": 8970700.56, "NodeId": "algo-1", "Timestamp": 1733636920.008990}
{"Type": "i/o", "Name": "WriteThroughputInBytesPerSecond", "Dimension": "", "Value": 0.00, "NodeId": "algo-1", "Timestamp": 1733636920.008990}
{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 98.00, "NodeId": "algo-1", "Timestamp": 1733636920.009090}
{"Type": "cpu", "Name": "cpu0", "Dimension": "I/OWaitPercentage", "Value": 14.00, "NodeId": "algo-1", "Timestamp": 1733636920.009090}
{"Type": "network", "Name": "ReceiveBytesPerSecond", "Dimension": "Algorithm", "Value": 0.00, "NodeId": "algo-1", "Timestamp": 1733636920.013693}
{"Type": "network", "Name": "TransmitBytesPerSecond", "Dimension": "Algorithm", "Value": 0.00, "NodeId": "algo-1", "Timestamp": 1733636920.013693}
{"Type": "network", "Name": "ReceiveBytesPerSecond", "Dimension": "Platform", "Value": 66775126.66, "NodeId": "algo-1", "Timestamp": 1733636920.013693}
{"Type": "network", "Name": "TransmitBytesPerSecond", "Dimension": "Platform", "Value": 70864.81, "NodeId": "algo-1", "Timestamp": 1733636920.013693}
{"Type": "gpu", "Name": "gpu0", "Dimension": "GPUUtilization", "Value": 87.00, "NodeId": "algo-1", "Timestamp": 1733636920.013700}
{"Type": "gpu", "Name": "gpu0", "Dimension": "GPUMemoryUtilization", "Value": 41.50, "NodeId": "algo-1", "Timestamp": 1733636920.013700}
)";

std::string ReadText(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << path;
  return text.ok() ? *text : std::string();
}

TEST(SmdebugImporterTest, SystemMetricsUseTheSamplersVocabulary) {
  std::string dir = TempDir();
  fs::create_directories(dir + "/system/incremental/2024120805");
  testing::WriteFile(dir + "/system/incremental/2024120805/1733636880.algo-1.json", kAllTypes);
  Imported im = Import(dir);
  auto m = im.reader->SystemMetrics({});
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->size(), 12u);
  // (metric, device) -> value, with the unit conversion each needs (percent -> ratio 0..1).
  std::map<std::pair<std::string, std::string>, double> got;
  for (size_t i = 0; i < m->size(); ++i) {
    got[{m->metrics.at(m->metric[i]), m->devices.at(m->device[i])}] = m->value[i];
  }
  const std::map<std::pair<std::string, std::string>, double> want = {
      {{"memory_utilization_ratio", ""}, 0.0618},
      {{"disk_operations_per_second", "total"}, 5357.94},
      {{"disk_read_bytes_per_second", "total"}, 8970700.56},
      {{"disk_write_bytes_per_second", "total"}, 0},
      {{"cpu_utilization_ratio", "cpu0"}, 0.98},
      {{"cpu_iowait_ratio", "cpu0"}, 0.14},
      {{"network_receive_bytes_per_second", "algorithm"}, 0},
      {{"network_transmit_bytes_per_second", "algorithm"}, 0},
      {{"network_receive_bytes_per_second", "platform"}, 66775126.66},
      {{"network_transmit_bytes_per_second", "platform"}, 70864.81},
      {{"gpu_utilization_ratio", "gpu0"}, 0.87},
      {{"gpu_memory_used_ratio", "gpu0"}, 0.415},
  };
  EXPECT_EQ(got, want);  // exact: percent / 100 is stored as the double nearest the decimal
  // Every stored name is one docs/metrics.md documents (the samplers' catalog or the table of
  // imported-only names).
  const std::string docs = ReadText(std::string(TRAINPROF_SOURCE_DIR) + "/docs/metrics.md");
  for (const auto& [key, value] : got) {
    EXPECT_NE(docs.find("`" + key.first + "`"), std::string::npos) << key.first;
  }
}

// BatchSize and GPUMemoryIncrease judge GPU memory in use: the engine reads
// gpu_memory_used_ratio (src/analyze/rules/engine.cc), the importer stores SageMaker's
// GPUMemoryUtilization there, and docs/rules.md must name the same series.
TEST(SmdebugImporterTest, RulesDocsAndImporterAgreeOnGpuMemory) {
  EXPECT_EQ(MapSystemMetric("gpu", "GPUMemoryUtilization", "gpu0").metric, "gpu_memory_used_ratio");
  const std::string rules = ReadText(std::string(TRAINPROF_SOURCE_DIR) + "/docs/rules.md");
  size_t begin = rules.find("## Metrics the rules read");
  ASSERT_NE(begin, std::string::npos);
  std::string section = rules.substr(begin, rules.find("\n## ", begin + 1) - begin);
  EXPECT_NE(section.find("`gpu_memory_used_ratio` (gpuN"), std::string::npos) << section;
}

TEST(SmdebugImporterTest, UnknownSystemMetricsGetADocumentedPatternNeverABarePrefix) {
  std::string dir = TempDir();
  fs::create_directories(dir + "/system/incremental/2024120805");
  testing::WriteFile(
      dir + "/system/incremental/2024120805/1733636880.algo-1.json",
      R"({"Type": "process", "Name": "python3", "Dimension": "", "Value": 1.5, "NodeId": "algo-1", "Timestamp": 1733636919.5}
{"Type": "", "Name": "", "Dimension": "", "Value": 2, "NodeId": "algo-1", "Timestamp": 1733636919.5}
{"Type": "gpu", "Name": "gpu3", "Dimension": "GPUPowerDraw", "Value": 250.5, "NodeId": "algo-1", "Timestamp": 1733636919.5}
)");
  Imported im = Import(dir);
  auto m = im.reader->SystemMetrics({});
  ASSERT_TRUE(m.ok());
  std::set<std::pair<std::string, std::string>> got;
  for (size_t i = 0; i < m->size(); ++i) {
    got.insert({m->metrics.at(m->metric[i]), m->devices.at(m->device[i])});
  }
  EXPECT_EQ(
      got, (std::set<std::pair<std::string, std::string>>{{"smdebug_process_python3", ""},
                                                          {"smdebug_unknown", ""},
                                                          {"smdebug_gpu_gpu_power_draw", "gpu3"}}));
}

// Percent -> ratio must keep the exact-decimal encoding of the store: 4.76 % is stored as the
// double nearest 0.0476 (4.76 * 0.01 is 0.047599999999999996, which needs 17 digits and falls
// back to XOR encoding at ~7.5 bytes/value).
TEST(SmdebugImporterTest, PercentBecomesTheExactDecimalRatio) {
  Imported im = Import(Folder(kRes + "1591160699.algo-1.json",
                              "system/incremental/2020060305/1591160699.algo-1.json"));
  auto m = im.reader->SystemMetrics({});
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->size(), 14u);
  // The Value texts of the file, in file order (timestamps are distinct and increasing).
  std::ifstream f(SharedData(kRes + "1591160699.algo-1.json"));
  std::vector<std::string> texts;
  for (std::string line; std::getline(f, line);) {
    size_t a = line.find("\"Value\":") + 8;
    texts.push_back(line.substr(a, line.find(',', a) - a));
  }
  ASSERT_EQ(texts.size(), 14u);
  std::vector<std::pair<int64_t, double>> rows;
  for (size_t i = 0; i < m->size(); ++i) rows.push_back({m->timestamp_ns[i], m->value[i]});
  std::sort(rows.begin(), rows.end());
  for (size_t i = 0; i < rows.size(); ++i) {
    // strtod of "<text>e-2" is the correctly rounded ratio, independent of our parser.
    EXPECT_EQ(rows[i].second, std::strtod((texts[i] + "e-2").c_str(), nullptr)) << texts[i];
  }
  // Every value of every real system file is a short decimal, the condition under which the
  // store's exact-decimal encoding applies (src/store/codec.cc: v == m / 10^e, e <= 18; here
  // e <= 4 for percents with 2 decimals).
  Imported all = Import(SharedData(kRes + "test_traces"));
  auto t = all.reader->SystemMetrics({});
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 78u);
  for (double v : t->value) {
    EXPECT_EQ(static_cast<double>(std::llround(v * 1e4)) / 1e4, v) << v;
  }
}

// A 10-minute job sampled every 500 ms (SageMaker's default) in SageMaker's format: per-core
// CPU and iowait percent with 2 decimals from about 50 jiffies per interval, GPU percent,
// memory percent, network and disk rates with 2 decimals. It must store in <= 2 bytes per
// value, like recorded data.
TEST(SmdebugImporterTest, ImportedSystemMetricsStoreInAtMostTwoBytesPerValue) {
  std::string dir = TempDir();
  fs::create_directories(dir + "/system/incremental/2026010100");
  std::mt19937_64 rng(7);
  auto binom = [&](int n, double p) { return std::binomial_distribution<int>(n, p)(rng); };
  const int64_t t0_s = 1767225600;
  int64_t values = 0;
  for (int minute = 0; minute < 10; ++minute) {
    std::ofstream out(dir + "/system/incremental/2026010100/" + std::to_string(t0_s + minute * 60) +
                      ".algo-1.json");
    char line[320];
    auto emit = [&](const char* type, const std::string& name, const char* dim, double v,
                    int64_t tick) {
      std::snprintf(line, sizeof line,
                    "{\"Type\": \"%s\", \"Name\": \"%s\", \"Dimension\": \"%s\", \"Value\": "
                    "%.2f, \"NodeId\": \"algo-1\", \"Timestamp\": %" PRId64 ".%06" PRId64 "}\n",
                    type, name.c_str(), dim, v, t0_s + tick / 2, (tick % 2) * 500000);
      out << line;
      ++values;
    };
    for (int64_t tick = minute * 120; tick < (minute + 1) * 120; ++tick) {
      const bool busy = tick % 60 < 56;
      for (int c = 0; c < 32; ++c) {
        int total = 49 + static_cast<int>(rng() % 3);
        int b = binom(total, c < 8 ? (busy ? 0.85 : 0.3) : 0.05);
        int io = b < total ? binom(total - b, 0.02) : 0;
        emit("cpu", "cpu" + std::to_string(c), "CPUUtilization", 100.0 * b / total, tick);
        emit("cpu", "cpu" + std::to_string(c), "I/OWaitPercentage", 100.0 * io / total, tick);
      }
      for (int g = 0; g < 8; ++g) {
        int pct = busy ? 80 + static_cast<int>(rng() % 21) : static_cast<int>(rng() % 16);
        emit("gpu", "gpu" + std::to_string(g), "GPUUtilization", pct, tick);
        emit("gpu", "gpu" + std::to_string(g), "GPUMemoryUtilization", 40 + (tick / 120), tick);
      }
      emit("memory", "MemoryUsedPercent", "", 20 + 0.01 * static_cast<double>(tick / 10), tick);
      emit("network", "ReceiveBytesPerSecond", "Algorithm",
           tick % 5 == 0 ? 1e9 + static_cast<double>(rng() % 200000000) : 1e5, tick);
      emit("i/o", "ReadThroughputInBytesPerSecond", "", 512.0 * 10 * binom(20000, 0.4), tick);
    }
  }
  Imported im = Import(dir);
  ASSERT_EQ(im.result.system_samples, values);
  im.reader.reset();
  const double bytes = static_cast<double>(fs::file_size(store::NodeStorePath(im.out, "algo-1")));
  std::printf("imported SageMaker system metrics: %.0f bytes for %" PRId64
              " values = %.2f bytes/value\n",
              bytes, values, bytes / static_cast<double>(values));
  EXPECT_LE(bytes / static_cast<double>(values), 2.0);
}

TEST(SmdebugImporterTest, NotADirectoryIsAClearError) {
  SmdebugImportOptions o;
  o.dir = SharedData(kRes + "1591160699.algo-1.json");
  o.out = TempDir() + "/run";
  auto r = ImportSmdebug(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a directory"), std::string::npos);
}

}  // namespace
}  // namespace trainprof::importers::smdebug
