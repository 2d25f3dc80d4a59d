#include "importers/horovod/horovod_importer.h"

#include <gtest/gtest.h>

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
