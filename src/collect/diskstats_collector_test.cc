#include "collect/diskstats_collector.h"

#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include "collect/collect_test_util.h"
#include "collect/filesystem_collector.h"
#include "model/data_quality.h"

namespace trainprof::collect {
namespace {

using testing::RecordingSink;
using testing::TempDir;
using testing::TestData;
using testing::TickAt;

TEST(DiskstatsCollectorTest, WholeDisksOnlyWithRates) {
  TempDir dir;
  testing::CopyTree(TestData("procfs/two_cpus/t0"), dir.path());
  DiskstatsCollector collector(dir.path(), TestData("sysfs/basic"));
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  EXPECT_EQ(sink.Get("disk_io_in_progress", "vda"), 2);
  testing::RewriteTree(TestData("procfs/two_cpus/t1"), dir.path());
  sink.Clear();
  collector.Sample(TickAt(1), sink);
  EXPECT_DOUBLE_EQ(*sink.Get("disk_read_bytes_per_second", "vda"), 1024.0 * 1024);
  EXPECT_DOUBLE_EQ(*sink.Get("disk_write_bytes_per_second", "vda"), 2.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*sink.Get("disk_reads_per_second", "vda"), 200);
  EXPECT_DOUBLE_EQ(*sink.Get("disk_writes_per_second", "vda"), 100);
  EXPECT_DOUBLE_EQ(*sink.Get("disk_busy_ratio", "vda"), 0.5);
  EXPECT_DOUBLE_EQ(*sink.Get("disk_average_queue_length", "vda"), 1.5);
  EXPECT_EQ(sink.Get("disk_io_in_progress", "vda"), 4);
  EXPECT_DOUBLE_EQ(*sink.Get("disk_read_bytes_per_second", "nvme0n1"), 0);
  // Partitions (by sysfs for vda1, by name for nvme0n1p1), loop and ram are left out.
  for (const char* dev : {"vda1", "nvme0n1p1", "loop0", "ram0"}) {
    EXPECT_FALSE(sink.Has("disk_io_in_progress", dev)) << dev;
  }
  EXPECT_TRUE(sink.unknown.empty());
}

TEST(DiskstatsCollectorTest, PartitionRules) {
  DiskstatsCollector collector("/nonexistent", "/nonexistent");
  EXPECT_TRUE(collector.IsReported("sda"));
  EXPECT_FALSE(collector.IsReported("sda1"));
  EXPECT_TRUE(collector.IsReported("nvme0n1"));
  EXPECT_FALSE(collector.IsReported("nvme0n1p3"));
  EXPECT_TRUE(collector.IsReported("mmcblk0"));
  EXPECT_FALSE(collector.IsReported("mmcblk0p1"));
  EXPECT_TRUE(collector.IsReported("dm-0"));
  EXPECT_TRUE(collector.IsReported("md127"));
  EXPECT_FALSE(collector.IsReported("loop3"));
  EXPECT_FALSE(collector.IsReported("zram0"));
}

TEST(DiskstatsCollectorTest, MalformedLinesCounted) {
  DiskstatsCollector collector(TestData("procfs/malformed"), "/nonexistent");
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  EXPECT_EQ(sink.Counter(model::dq::kParseErrors), 2);
  EXPECT_TRUE(sink.Has("disk_io_in_progress", "nvme0n1"));
}

TEST(DiskstatsCollectorTest, MissingFileCounted) {
  DiskstatsCollector collector("/nonexistent", "/nonexistent");
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  EXPECT_EQ(sink.Counter(std::string(kReadErrorsCounter)), 1);
  EXPECT_EQ(sink.adds, 0);
}

TEST(FilesystemCollectorTest, MatchesStatvfs) {
  TempDir dir;
  FilesystemCollector collector({dir.path(), "/nonexistent/data"});
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  struct statvfs st;
  ASSERT_EQ(statvfs(dir.path().c_str(), &st), 0);
  EXPECT_EQ(sink.Get("filesystem_size_bytes", dir.path()),
            static_cast<double>(st.f_blocks) * st.f_frsize);
  auto ratio = sink.Get("filesystem_utilization_ratio", dir.path());
  ASSERT_TRUE(ratio.has_value());
  EXPECT_GE(*ratio, 0);
  EXPECT_LE(*ratio, 1);
  EXPECT_FALSE(sink.Has("filesystem_size_bytes", "/nonexistent/data"));
  EXPECT_EQ(sink.Counter(std::string(kReadErrorsCounter)), 1);
}

}  // namespace
}  // namespace trainprof::collect
