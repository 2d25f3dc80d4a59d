#include "agent/sampling_loop.h"

#include <gtest/gtest.h>

#include <cmath>

#include "agent/agent_test_util.h"
#include "base/time.h"
#include "store/run_directory.h"

namespace trainprof::agent {
namespace {

using testing::FakeCollector;

struct Fixture {
  std::string dir = testing::TempDir();
  std::unique_ptr<store::NodeStoreWriter> writer;
  Fixture() {
    model::RunMetadata meta;
    meta.name = "t";
    meta.start_ns = WallNowNs();
    EXPECT_TRUE(store::WriteRunMetadata(dir, meta).ok());
    model::NodeInfo node;
    node.node = "n0";
    auto w = store::OpenNodeWriter(dir, node);
    EXPECT_TRUE(w.ok());
    writer = std::move(*w);
  }
};

TEST(IntervalTest, ParsesTheAllowedSet) {
  EXPECT_EQ(*ParseInterval("100ms"), 100 * kNanosPerMilli);
  EXPECT_EQ(*ParseInterval("200ms"), 200 * kNanosPerMilli);
  EXPECT_EQ(*ParseInterval("0.5s"), 500 * kNanosPerMilli);
  EXPECT_EQ(*ParseInterval("500ms"), 500 * kNanosPerMilli);
  EXPECT_EQ(*ParseInterval("1s"), kNanosPerSecond);
  EXPECT_EQ(*ParseInterval("5s"), 5 * kNanosPerSecond);
  EXPECT_EQ(*ParseInterval("1min"), 60 * kNanosPerSecond);
  EXPECT_EQ(*ParseInterval("60s"), 60 * kNanosPerSecond);
  for (const char* bad : {"", "10ms", "3s", "fast", "1h", "-1s", "ms"}) {
    auto r = ParseInterval(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(SamplingLoopTest, OneTimestampPerTickForEveryValue) {
  Fixture f;
  std::vector<std::unique_ptr<collect::Collector>> collectors;
  collectors.push_back(std::make_unique<FakeCollector>());
  collectors.push_back(std::make_unique<FakeCollector>());
  LatestValues latest;
  SamplingLoop loop(std::move(collectors), f.writer.get(), &latest, nullptr, {});
  loop.RunTick({1000, 5});
  loop.RunTick({2000, 6});
  ASSERT_TRUE(f.writer->Close().ok());
  auto ticks = testing::ReadSeries(f.dir, "fake_ticks", "");
  // Two collectors x two ticks, all stamped with their tick's wall time.
  ASSERT_EQ(ticks.size(), 4u);
  EXPECT_EQ(ticks[0].first, 1000);
  EXPECT_EQ(ticks[1].first, 1000);
  EXPECT_EQ(ticks[2].first, 2000);
  EXPECT_EQ(ticks[3].first, 2000);
  LatestSnapshot snap = latest.Get();
  EXPECT_EQ(snap.tick_wall_ns, 2000);
  EXPECT_EQ(snap.tick_mono_ns, 6);
  EXPECT_EQ(snap.ticks, 2);
  EXPECT_EQ(snap.values.size(), 4u);
}

TEST(SamplingLoopTest, KeepsAFixedScheduleWithoutDrift) {
  Fixture f;
  auto fake = std::make_unique<FakeCollector>();
  FakeCollector* raw = fake.get();
  raw->sleep_ms = 30;  // a third of the interval: the schedule must not stretch by it
  std::vector<std::unique_ptr<collect::Collector>> collectors;
  collectors.push_back(std::move(fake));
  SamplingOptions options;
  options.interval_ns = 100 * kNanosPerMilli;
  SamplingLoop loop(std::move(collectors), f.writer.get(), nullptr, nullptr, options);
  int64_t start = MonotonicNowNs();
  ASSERT_TRUE(loop.Start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1050));
  loop.Stop();
  double elapsed_s = static_cast<double>(MonotonicNowNs() - start) / 1e9;
  SamplingStats stats = loop.stats();
  // Ticks at 0, 100, ..., 1000 ms: 11 (a drifting loop would manage ~8 with 30 ms ticks).
  // A loaded CI machine may lose a slot; then it is counted as an overrun.
  EXPECT_GE(stats.ticks + stats.overruns, static_cast<int64_t>(elapsed_s * 10) - 1);
  EXPECT_LE(stats.ticks, 12);
  ASSERT_TRUE(f.writer->Close().ok());
  auto ticks = testing::ReadSeries(f.dir, "fake_ticks", "");
  ASSERT_EQ(static_cast<int64_t>(ticks.size()), stats.ticks);
  for (size_t i = 1; i < ticks.size(); ++i) {
    EXPECT_GT(ticks[i].first, ticks[i - 1].first);
  }
}

TEST(SamplingLoopTest, CountsOverrunsInsteadOfSkippingSilently) {
  Fixture f;
  auto fake = std::make_unique<FakeCollector>();
  fake->sleep_ms = 250;  // each tick eats 2.5 intervals of 100 ms
  std::vector<std::unique_ptr<collect::Collector>> collectors;
  collectors.push_back(std::move(fake));
  SamplingOptions options;
  options.interval_ns = 100 * kNanosPerMilli;
  SamplingLoop loop(std::move(collectors), f.writer.get(), nullptr, nullptr, options);
  ASSERT_TRUE(loop.Start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  loop.Stop();
  SamplingStats stats = loop.stats();
  EXPECT_GE(stats.ticks, 3);
  EXPECT_LE(stats.ticks, 5);
  // Every 100 ms slot is either sampled or counted.
  EXPECT_GE(stats.ticks + stats.overruns, 10);
  EXPECT_GE(stats.overruns, 2 * (stats.ticks - 1));
  ASSERT_TRUE(f.writer->Close().ok());
  auto counters = testing::ReadCounters(f.dir);
  EXPECT_EQ(counters["sampling_overruns"], stats.overruns);
}

TEST(SamplingLoopTest, AFailingCollectorIsCountedAndTheOthersGoOn) {
  Fixture f;
  auto bad = std::make_unique<FakeCollector>();
  bad->throw_every = 1;
  auto good = std::make_unique<FakeCollector>();
  good->add_nan = true;
  good->count_problem = true;
  std::vector<std::unique_ptr<collect::Collector>> collectors;
  collectors.push_back(std::move(bad));
  collectors.push_back(std::move(good));
  SummaryStats summary;
  SamplingLoop loop(std::move(collectors), f.writer.get(), nullptr, &summary, {});
  for (int i = 1; i <= 3; ++i) loop.RunTick({i * 1000, i});
  EXPECT_EQ(loop.stats().collector_errors, 3);
  EXPECT_EQ(loop.stats().invalid_values, 3);
  ASSERT_TRUE(f.writer->Close().ok());
  EXPECT_EQ(testing::ReadSeries(f.dir, "fake_ticks", "").size(), 3u);  // the good one only
  EXPECT_TRUE(testing::ReadSeries(f.dir, "fake_nan", "").empty());     // missing, not 0
  auto counters = testing::ReadCounters(f.dir);
  EXPECT_EQ(counters["collector_errors"], 3);
  EXPECT_EQ(counters["invalid_values"], 3);
  EXPECT_EQ(counters["parse_errors"], 3);
  auto s = summary.Summarize();
  ASSERT_EQ(s.size(), 1u);  // cpu_utilization_ratio/total is a headline series
  EXPECT_DOUBLE_EQ(s[0].p50, 0.25);
}

TEST(SummaryStatsTest, QuantilesStayUniformPastTheCap) {
  SummaryStats stats(/*max_values=*/64);
  for (int i = 1; i <= 1000; ++i) stats.Observe("process_cpu_utilization_ratio", "tree", i);
  stats.Observe("not_headline", "", 5);
  auto s = stats.Summarize();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].count, 1000);
  EXPECT_DOUBLE_EQ(s[0].max, 1000);
  EXPECT_NEAR(s[0].p50, 500, 40);
  EXPECT_NEAR(s[0].p95, 950, 40);
  std::vector<double> v = {3, 1, 2, 4};
  EXPECT_DOUBLE_EQ(Quantile(v, 0.5), 2);
  EXPECT_DOUBLE_EQ(Quantile(v, 1.0), 4);
}

// A day at 100 ms on an 8-GPU node: the summary's memory is reserved at each series' first value
// and does not grow after it (the soak's heap growth, issue 20).
TEST(SummaryStatsTest, MemoryIsReservedOnceAndNeverGrows) {
  SummaryStats stats;
  auto tick = [&](int64_t i) {
    for (int g = 0; g < 8; ++g) {
      const std::string gpu = "gpu" + std::to_string(g);
      stats.Observe("gpu_utilization_ratio", gpu, static_cast<double>(i % 999) / 999);
      stats.Observe("gpu_memory_used_bytes", gpu, static_cast<double>(i));
    }
    stats.Observe("cpu_utilization_ratio", "total", 0.5);
  };
  tick(0);
  const size_t held = stats.HeldBytes();
  EXPECT_EQ(held, 17u * 16384 * sizeof(double));
  for (int64_t i = 1; i < 864'000; ++i) tick(i);
  EXPECT_EQ(stats.HeldBytes(), held);
  auto s = stats.Summarize();
  ASSERT_EQ(s.size(), 17u);
  for (const auto& one : s) {
    EXPECT_EQ(one.count, 864'000);
    if (one.metric == "gpu_utilization_ratio") {
      EXPECT_NEAR(one.p50, 0.5, 0.01);  // a uniform cycle (odd: no aliasing with the stride)
      EXPECT_NEAR(one.p95, 0.95, 0.01);
    }
  }
}

}  // namespace
}  // namespace trainprof::agent
