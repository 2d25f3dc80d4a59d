#include "collect/meminfo_collector.h"

#include <gtest/gtest.h>

#include "collect/collect_test_util.h"
#include "model/data_quality.h"

namespace trainprof::collect {
namespace {

using testing::RecordingSink;
using testing::TestData;
using testing::TickAt;

TEST(MeminfoCollectorTest, CannedValuesInBytes) {
  MeminfoCollector collector(TestData("procfs/two_cpus/t0"));
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  EXPECT_EQ(sink.Get("memory_total_bytes"), 16000000.0 * 1024);
  EXPECT_EQ(sink.Get("memory_available_bytes"), 10000000.0 * 1024);
  EXPECT_EQ(sink.Get("memory_used_bytes"), 6000000.0 * 1024);
  EXPECT_DOUBLE_EQ(*sink.Get("memory_utilization_ratio"), 0.375);
  EXPECT_EQ(sink.Get("memory_free_bytes"), 4000000.0 * 1024);
  EXPECT_EQ(sink.Get("memory_cached_bytes"), 5000000.0 * 1024);
  EXPECT_EQ(sink.Get("memory_buffers_bytes"), 500000.0 * 1024);
  EXPECT_EQ(sink.Get("swap_total_bytes"), 2000000.0 * 1024);
  EXPECT_EQ(sink.Get("swap_used_bytes"), 500000.0 * 1024);
  EXPECT_TRUE(sink.unknown.empty());
}

TEST(MeminfoCollectorTest, MalformedLinesCountedAndMissingFieldsAbsent) {
  MeminfoCollector collector(TestData("procfs/malformed"));
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  EXPECT_EQ(sink.Counter(model::dq::kParseErrors), 2);
  EXPECT_EQ(sink.Get("memory_used_bytes"), 6000000.0 * 1024);
  EXPECT_FALSE(sink.Has("memory_free_bytes"));  // "lots kB" is not a number
  EXPECT_FALSE(sink.Has("swap_total_bytes"));   // absent, not 0
}

TEST(MeminfoCollectorTest, RealMeminfoIsConsistent) {
  MeminfoCollector collector("/proc");
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  ASSERT_TRUE(sink.Has("memory_total_bytes"));
  EXPECT_GT(*sink.Get("memory_used_bytes"), 0);
  EXPECT_LT(*sink.Get("memory_used_bytes"), *sink.Get("memory_total_bytes"));
  EXPECT_EQ(sink.Get("memory_total_bytes"),
            static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE));
}

}  // namespace
}  // namespace trainprof::collect
