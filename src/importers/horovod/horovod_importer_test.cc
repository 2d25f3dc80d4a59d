#include "importers/horovod/horovod_importer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "importers/common/import_counters.h"
#include "importers/common/test_util.h"
#include "store/run_reader.h"

namespace trainprof::importers::horovod {
namespace {

TEST(HorovodImporterTest, RawTimelinePairsBeginEnd) {
  // Expected counts computed independently (Python json on the closed array): the larger
  // historical raw timeline from smdebug's tests.
  HorovodImportOptions o;
  o.timelines = {testing::SharedData(
      "smdebug/_history/1e5f8e0c270e/tests/profiler/horovod_timeline_small.json")};
  o.out = testing::TempDir() + "/run";
  o.base_time_ns = 1'600'000'000'000'000'000;
  auto r = ImportHorovod(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // 198 X events + 108 B/E pairs; 11 instants (CYCLE_START).
  EXPECT_EQ(r->spans, 198 + 108);
  EXPECT_EQ(r->instants, 11);
  auto reader = store::RunReader::Open(o.out);
  ASSERT_TRUE(reader.ok());
  auto t = (*reader)->Events({});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(static_cast<int64_t>(t->size()), r->spans + r->instants);
  for (size_t i = 0; i < t->size(); ++i) {
    EXPECT_GE(t->start_ns[i], 1'600'000'000'000'000'000);
    EXPECT_EQ(t->categories.at(t->category[i]), "horovod");
  }
}

// Found by fuzz_horovod_import (UBSan: signed overflow): a timestamp that, with the base, leaves
// the int64 range of nanoseconds is counted as import_absurd_timestamps and skipped.
TEST(HorovodImporterTest, TimestampsBeyondTheRangeAreCountedNotOverflowed) {
  const std::string dir = testing::TempDir();
  testing::WriteFile(dir + "/timeline.json", R"([
{"ph": "X", "name": "ok", "ts": 100, "pid": 13, "dur": 5},
{"ph": "X", "name": "wraps", "ts": 7757677575718047, "pid": 13, "dur": 5},
{"ph": "B", "name": "NEGOTIATE", "ts": 200, "pid": 13},
{"ph": "E", "ts": 300, "pid": 13}
])");
  HorovodImportOptions o;
  o.timelines = {dir + "/timeline.json"};
  o.out = dir + "/run";
  o.base_time_ns = 1'600'000'000'000'000'000;
  auto r = ImportHorovod(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spans, 2);  // "ok" and the B/E pair
  auto reader = store::RunReader::Open(o.out);
  ASSERT_TRUE(reader.ok());
  auto counters = (*reader)->Counters();
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ((*counters)[dq::kAbsurdTimestamps], 1);
}

TEST(HorovodImporterTest, EndArgsJoinTheSpan) {
  // Horovod writes a tensor's dtype and shape on the E event only (its timeline.cc); in the
  // historical timeline two ALLREDUCE ends carry {"dtype": "float32", "shape": "[10]"} and
  // {"dtype": "float32", "shape": "[256, 10]"} (read with Python's json). They were dropped.
  HorovodImportOptions o;
  o.timelines = {testing::SharedData(
      "smdebug/_history/1e5f8e0c270e/tests/profiler/horovod_timeline_small.json")};
  o.out = testing::TempDir() + "/run";
  o.base_time_ns = 0;
  auto r = ImportHorovod(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto reader = store::RunReader::Open(o.out);
  ASSERT_TRUE(reader.ok());
  auto t = (*reader)->Events({});
  ASSERT_TRUE(t.ok());
  std::map<int64_t, std::string> ends;  // end ns -> args
  for (size_t i = 0; i < t->size(); ++i) {
    if (t->args[i].find("dtype") != std::string::npos) {
      ends[t->start_ns[i] + t->duration_ns[i]] = t->args[i];
    }
  }
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_NE(ends[77576573103000].find(R"("dtype":"float32","shape":"[10]")"), std::string::npos)
      << ends[77576573103000];
  EXPECT_NE(ends[77576573143000].find(R"("shape":"[256, 10]")"), std::string::npos);
  EXPECT_NE(ends[77576573103000].find(R"("tensor":)"), std::string::npos);  // and its own
}

TEST(HorovodImporterTest, EachTimelineIsANodeOfItsOwnAndNoneIsTakenTwice) {
  const std::string dir = testing::TempDir();
  const std::string text = R"([
{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "grad_a"}},
{"ph": "X", "name": "ALLREDUCE", "ts": 100, "pid": 1, "dur": 5}
])";
  std::filesystem::create_directories(dir + "/a");
  std::filesystem::create_directories(dir + "/b");
  testing::WriteFile(dir + "/a/timeline.json", text);
  testing::WriteFile(dir + "/b/timeline.json", text);
  HorovodImportOptions o;
  o.timelines = {dir + "/a/timeline.json", dir + "/b/timeline.json"};
  o.out = dir + "/run";
  o.base_time_ns = 1'600'000'000'000'000'000;
  auto r = ImportHorovod(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->nodes, (std::vector<std::string>{"timeline", "timeline-2"}));
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("stored as node timeline-2"), std::string::npos);
  o.timelines = {dir + "/a/timeline.json", dir + "/b/../a/timeline.json"};
  o.out = dir + "/twice";
  auto twice = ImportHorovod(o);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("given twice"), std::string::npos);
}

TEST(HorovodImporterTest, ABaseTimeTheTimelineOverridesIsAWarning) {
  const std::string dir = testing::TempDir();
  testing::WriteFile(dir + "/timeline.json", R"([
{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": 1592860696000000}},
{"ph": "X", "name": "ALLREDUCE", "ts": 100, "pid": 0, "dur": 5}
])");
  HorovodImportOptions o;
  o.timelines = {dir + "/timeline.json"};
  o.out = dir + "/run";
  o.base_time_ns = 1'000'000'000'000'000'000;
  auto r = ImportHorovod(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("--base-time-us not used"), std::string::npos);
}

TEST(HorovodImporterTest, MissingFileIsAClearError) {
  HorovodImportOptions o;
  o.timelines = {"/nonexistent/timeline.json"};
  o.out = testing::TempDir() + "/run";
  auto r = ImportHorovod(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no such file"), std::string::npos);
}

}  // namespace
}  // namespace trainprof::importers::horovod
