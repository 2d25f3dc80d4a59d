#include "importers/smdebug/smdebug_importer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "importers/common/import_counters.h"
#include "importers/common/test_util.h"
#include "model/data_quality.h"
#include "store/run_reader.h"

namespace trainprof::importers::smdebug {
namespace {

namespace fs = std::filesystem;
using testing::SharedData;
using testing::TempDir;

const std::string kRes = "smdebug/tests/profiler/resources/";

struct Imported {
  SmdebugImportResult result;
  std::unique_ptr<store::RunReader> reader;
};

Imported Import(const std::string& dir) {
  Imported out;
  SmdebugImportOptions o;
  o.dir = dir;
  o.out = TempDir() + "/run";
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
