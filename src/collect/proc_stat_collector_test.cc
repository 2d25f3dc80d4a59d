#include "collect/proc_stat_collector.h"

#include <gtest/gtest.h>

#include "collect/collect_test_util.h"
#include "model/data_quality.h"

namespace trainprof::collect {
namespace {

using testing::RecordingSink;
using testing::TempDir;
using testing::TestData;
using testing::TickAt;

TEST(ProcStatCollectorTest, RatiosPerCoreAndTotalFromTwoReadings) {
  TempDir dir;
  testing::CopyTree(TestData("procfs/two_cpus/t0"), dir.path());
  ProcStatCollector collector(dir.path());
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  // The first reading has no interval: no ratios yet, but the gauges are there.
  EXPECT_FALSE(sink.Has("cpu_utilization_ratio", "total"));
  EXPECT_EQ(sink.Get("processes_running"), 3);
  EXPECT_EQ(sink.Get("load_average_1m"), 0.52);

  testing::RewriteTree(TestData("procfs/two_cpus/t1"), dir.path());
  sink.Clear();
  collector.Sample(TickAt(1), sink);
  // cpu0: +100 jiffies, all user.
  EXPECT_DOUBLE_EQ(*sink.Get("cpu_utilization_ratio", "cpu0"), 1.0);
  EXPECT_DOUBLE_EQ(*sink.Get("cpu_user_ratio", "cpu0"), 1.0);
  EXPECT_DOUBLE_EQ(*sink.Get("cpu_iowait_ratio", "cpu0"), 0.0);
  // cpu1: +100 = 25 system, 50 idle, 25 iowait.
  EXPECT_DOUBLE_EQ(*sink.Get("cpu_utilization_ratio", "cpu1"), 0.25);
  EXPECT_DOUBLE_EQ(*sink.Get("cpu_system_ratio", "cpu1"), 0.25);
  EXPECT_DOUBLE_EQ(*sink.Get("cpu_idle_ratio", "cpu1"), 0.5);
  EXPECT_DOUBLE_EQ(*sink.Get("cpu_iowait_ratio", "cpu1"), 0.25);
  // Node: 200 jiffies, 125 busy, 25 iowait.
  EXPECT_DOUBLE_EQ(*sink.Get("cpu_utilization_ratio", "total"), 0.625);
  EXPECT_DOUBLE_EQ(*sink.Get("cpu_iowait_ratio", "total"), 0.125);
  EXPECT_DOUBLE_EQ(*sink.Get("cpu_steal_ratio", "total"), 0.0);
  EXPECT_DOUBLE_EQ(*sink.Get("context_switches_per_second"), 2000.0);
  EXPECT_EQ(sink.Get("load_average_1m"), 1.5);
  EXPECT_EQ(sink.Get("load_average_15m"), 0.25);
  EXPECT_TRUE(sink.unknown.empty());
  EXPECT_TRUE(sink.counters.empty());
}

TEST(ProcStatCollectorTest, MalformedLinesAreCountedNotFatal) {
  ProcStatCollector collector(TestData("procfs/malformed"));
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  collector.Sample(TickAt(1), sink);
  // Per sample: cpu0 (too few numbers), cpuX, ctxt and loadavg are bad.
  EXPECT_EQ(sink.Counter(model::dq::kParseErrors), 8);
  EXPECT_EQ(sink.Get("processes_running"), 3);
  // The good "cpu" line still yields a (zero-length interval -> none) reading, no crash.
  EXPECT_FALSE(sink.Has("cpu_utilization_ratio", "cpu0"));
}

TEST(ProcStatCollectorTest, MissingFilesAreCounted) {
  ProcStatCollector collector("/nonexistent/proc");
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  EXPECT_EQ(sink.adds, 0);
  EXPECT_EQ(sink.Counter(std::string(kReadErrorsCounter)), 2);
}

TEST(ProcStatCollectorTest, ReadsTheRealProcStat) {
  ProcStatCollector collector("/proc");
  RecordingSink sink;
  collector.Sample(Tick{.wall_ns = 0, .mono_ns = 1}, sink);
  // Burn some CPU so the interval has jiffies in it.
  volatile double x = 0;
  for (int i = 0; i < 30000000; ++i) x = x + i * 0.5;
  collector.Sample(Tick{.wall_ns = 0, .mono_ns = 1000000001}, sink);
  auto total = sink.Get("cpu_utilization_ratio", "total");
  ASSERT_TRUE(total.has_value());
  EXPECT_GT(*total, 0.0);
  EXPECT_LE(*total, 1.0);
  EXPECT_TRUE(sink.Has("cpu_utilization_ratio", "cpu0"));
  EXPECT_TRUE(sink.counters.empty());
}

}  // namespace
}  // namespace trainprof::collect
