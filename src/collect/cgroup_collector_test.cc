#include "collect/cgroup_collector.h"

#include <gtest/gtest.h>

#include "base/files.h"
#include "collect/collect_test_util.h"

namespace trainprof::collect {
namespace {

using testing::RecordingSink;
using testing::TempDir;
using testing::TestData;
using testing::TickAt;

CollectorContext CannedContext(const std::string& root) {
  CollectorContext ctx;
  ctx.proc_root = root + "/proc";
  ctx.cgroup_root = root + "/root";
  return ctx;
}

TEST(CgroupCollectorTest, FindsTheCgroupOfTheRootPidAndReportsAgainstLimits) {
  TempDir dir;
  testing::CopyTree(TestData("cgroup/v2_limited"), dir.path());
  CollectorContext ctx = CannedContext(dir.path());
  ctx.root_pids = {1234};
  auto collector = CgroupCollector::Create(ctx);
  ASSERT_TRUE(collector.ok()) << collector.status().ToString();
  EXPECT_EQ((*collector)->dir(), dir.path() + "/root/job.slice");
  RecordingSink sink;
  (*collector)->Sample(TickAt(0), sink);
  EXPECT_EQ(sink.Get("cgroup_memory_used_bytes"), 4294967296.0);
  EXPECT_EQ(sink.Get("cgroup_memory_limit_bytes"), 8589934592.0);
  EXPECT_DOUBLE_EQ(*sink.Get("cgroup_memory_utilization_ratio"), 0.5);
  EXPECT_EQ(sink.Get("cgroup_memory_oom_kills_total"), 1);
  EXPECT_EQ(sink.Get("cgroup_cpu_limit_cores"), 2.0);  // quota wins over the 8-CPU cpuset
  EXPECT_FALSE(sink.Has("cgroup_cpu_usage_cores"));    // needs two readings

  const std::string job = dir.path() + "/root/job.slice";
  // One second later: 1.5 s of CPU (1.5 cores of the 2-core quota), 10 more periods of which
  // 5 throttled for 0.25 s in all, 1 MiB read and 2 MiB written.
  testing::WriteText(job + "/cpu.stat",
                     "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"
                     "nr_periods 110\nnr_throttled 15\nthrottled_usec 300000\n");
  testing::WriteText(job + "/io.stat",
                     "8:0 rbytes=1049576 wbytes=2099152 rios=30 wios=40 dbytes=0 dios=0\n"
                     "259:0 rbytes=500 wbytes=500 rios=5 wios=5 dbytes=0 dios=0\n");
  sink.Clear();
  (*collector)->Sample(TickAt(1), sink);
  EXPECT_DOUBLE_EQ(*sink.Get("cgroup_cpu_usage_cores"), 1.5);
  EXPECT_DOUBLE_EQ(*sink.Get("cgroup_cpu_utilization_ratio"), 0.75);
  EXPECT_DOUBLE_EQ(*sink.Get("cgroup_cpu_throttled_periods_ratio"), 0.5);
  EXPECT_DOUBLE_EQ(*sink.Get("cgroup_cpu_throttled_seconds_per_second"), 0.25);
  EXPECT_DOUBLE_EQ(*sink.Get("cgroup_io_read_bytes_per_second"), 1048576.0);
  EXPECT_DOUBLE_EQ(*sink.Get("cgroup_io_write_bytes_per_second"), 2097152.0);
  EXPECT_DOUBLE_EQ(*sink.Get("cgroup_io_reads_per_second"), 20.0);
  EXPECT_TRUE(sink.unknown.empty());
  EXPECT_TRUE(sink.counters.empty());
}

TEST(CgroupCollectorTest, UnlimitedCgroupHasNoLimitAndUsesTheCpuset) {
  TempDir dir;
  testing::CopyTree(TestData("cgroup/v2_unlimited"), dir.path());
  auto collector = CgroupCollector::Create(CannedContext(dir.path()));  // from /proc/self
  ASSERT_TRUE(collector.ok()) << collector.status().ToString();
  RecordingSink sink;
  (*collector)->Sample(TickAt(0), sink);
  EXPECT_EQ(sink.Get("cgroup_memory_used_bytes"), 1073741824.0);
  // memory.max "max": no limit and no ratio (absent, not 0 or infinity).
  EXPECT_FALSE(sink.Has("cgroup_memory_limit_bytes"));
  EXPECT_FALSE(sink.Has("cgroup_memory_utilization_ratio"));
  EXPECT_EQ(sink.Get("cgroup_cpu_limit_cores"), 6.0);  // cpuset 0-3,8-9
  testing::WriteText(dir.path() + "/root/job/cpu.stat", "usage_usec 8000000\n");
  (*collector)->Sample(TickAt(1), sink);
  EXPECT_DOUBLE_EQ(*sink.Get("cgroup_cpu_usage_cores"), 3.0);
  EXPECT_DOUBLE_EQ(*sink.Get("cgroup_cpu_utilization_ratio"), 0.5);
  EXPECT_FALSE(sink.Has("cgroup_cpu_throttled_periods_ratio"));
  EXPECT_FALSE(sink.Has("cgroup_io_read_bytes_per_second"));  // no io.stat
}

TEST(CgroupCollectorTest, ExplicitPathRelativeToRoot) {
  CollectorContext ctx = CannedContext(TestData("cgroup/v2_limited"));
  ctx.cgroup_path = "/job.slice";
  auto collector = CgroupCollector::Create(ctx);
  ASSERT_TRUE(collector.ok());
  ctx.cgroup_path = "/no/such/job";
  auto missing = CgroupCollector::Create(ctx);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(CgroupCollectorTest, CgroupV1HostGivesAClearNote) {
  auto collector = CgroupCollector::Create(CannedContext(TestData("cgroup/v1_host")));
  ASSERT_FALSE(collector.ok());
  EXPECT_EQ(collector.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(collector.status().message().find("cgroup v1"), std::string::npos);
}

TEST(CgroupCollectorTest, MalformedValuesCounted) {
  TempDir dir;
  testing::CopyTree(TestData("cgroup/v2_limited"), dir.path());
  const std::string job = dir.path() + "/root/job.slice";
  testing::WriteText(job + "/memory.current", "lots\n");
  testing::WriteText(job + "/cpu.max", "fast 100000\n");
  testing::WriteText(job + "/io.stat", "8:0 rbytes=x wbytes=1\n");
  CgroupCollector collector(job);
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  EXPECT_EQ(sink.Counter("parse_errors"), 3);
  EXPECT_FALSE(sink.Has("cgroup_memory_used_bytes"));
  EXPECT_EQ(sink.Get("cgroup_cpu_limit_cores"), 8.0);  // falls back to the cpuset
}

TEST(CgroupCollectorTest, CpuListCounting) {
  EXPECT_EQ(CountCpuList("0-3,8,10-11\n"), 7);
  EXPECT_EQ(CountCpuList("5"), 1);
  EXPECT_EQ(CountCpuList(""), -1);
  EXPECT_EQ(CountCpuList("3-1"), -1);
  EXPECT_EQ(CountCpuList("a-b"), -1);
}

TEST(CgroupCollectorTest, ThisHost) {
  // Whatever this machine is: v2 gives a collector, v1/hybrid a FailedPrecondition note.
  CollectorContext ctx;
  auto collector = CgroupCollector::Create(ctx);
  if (PathExists("/sys/fs/cgroup/cgroup.controllers")) {
    ASSERT_TRUE(collector.ok()) << collector.status().ToString();
  } else {
    ASSERT_FALSE(collector.ok());
    EXPECT_EQ(collector.status().code(), StatusCode::kFailedPrecondition);
  }
}

}  // namespace
}  // namespace trainprof::collect
