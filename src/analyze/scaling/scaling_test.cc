#include "analyze/scaling/scaling.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "base/check.h"
#include "base/test_dir.h"
#include "store/run_directory.h"

namespace trainprof::analyze::scaling {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kStart = 1'796'040'000LL * 1'000'000'000;

// A run of `ranks` devices on two nodes (ranks split between them), each with 5 slow warm-up
// steps (1 s) then `steps` steps every `period_ms`: throughput 1000 / period_ms steps/s per
// device, by construction.
std::string WriteRun(const std::string& name, int ranks, int64_t period_ms, int steps = 50,
                     bool with_ranks = true) {
  const std::string dir = MakeTestDir("scaling_" + name);
  for (int node = 0; node < 2 && node < ranks; ++node) {
    model::NodeInfo info;
    info.node = "n" + std::to_string(node);
    info.hostname = info.node;
    auto w = store::OpenNodeWriter(dir, info);
    TP_CHECK(w.ok());
    for (int r = node; r < ranks; r += 2) {
      int64_t t = kStart + r * 3 * kMs;  // ranks start a little apart
      auto step = [&](int64_t n, int64_t dur) {
        model::Event e;
        e.name = "step";
        e.category = "step";
        e.mode = "train";
        e.step = n;
        e.start_ns = t;
        e.duration_ns = dur;
        e.rank = with_ranks ? r : model::kMissing;
        e.pid = 100 + r;
        e.tid = e.pid;
        (*w)->AppendEvent(std::move(e));
        t += dur;
      };
      for (int k = 0; k < 5; ++k) step(k, 1000 * kMs);
      for (int k = 0; k < steps; ++k) step(5 + k, period_ms * kMs);
      // an eval step, not counted
      model::Event e;
      e.name = "step";
      e.category = "step";
      e.mode = "eval";
      e.step = 0;
      e.start_ns = t + 10 * kMs;
      e.duration_ns = 1;
      e.rank = with_ranks ? r : model::kMissing;
      e.pid = 100 + r;
      (*w)->AppendEvent(std::move(e));
    }
    TP_CHECK((*w)->Close().ok());
  }
  model::RunMetadata meta;
  meta.run_id = name;
  meta.name = name;
  meta.start_ns = kStart;
  TP_CHECK(store::WriteRunMetadata(dir, meta).ok());
  return dir;
}

RunThroughput Measure(const std::string& dir) {
  auto reader = store::RunReader::Open(dir);
  TP_CHECK(reader.ok());
  auto t = MeasureThroughput(**reader, dir);
  TP_CHECK(t.ok());
  return *t;
}

TEST(ScalingTest, EfficiencyAgainstTheSmallestRunFromKnownThroughput) {
  // 1 device at 10 steps/s, 2 at 1000/110 = 9.0909, 4 at 8: efficiency 1, 0.9091, 0.8;
  // aggregate 10, 18.18, 32: speedup 1.818 and 3.2 against ideal 2 and 4. Given out of order.
  const std::string four = WriteRun("four", 4, 125), one = WriteRun("one", 1, 100, 30, false),
                    two = WriteRun("two", 2, 110);
  ScalingResult r = CompareScaling({Measure(four), Measure(one), Measure(two)});
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.baseline, 0u);
  EXPECT_EQ(r.rows[0].run.run, one);
  EXPECT_EQ(r.rows[1].run.run, two);
  EXPECT_EQ(r.rows[2].run.run, four);
  EXPECT_EQ(r.rows[0].run.devices.size(), 1u);
  EXPECT_EQ(r.rows[2].run.devices.size(), 4u);
  EXPECT_EQ(r.rows[0].run.devices[0].steps, 30);  // the 5 warm-up steps left out
  EXPECT_NEAR(r.rows[0].run.steps_per_s_per_device, 10.0, 1e-9);
  EXPECT_NEAR(r.rows[1].run.steps_per_s_per_device, 1000.0 / 110.0, 1e-9);
  EXPECT_NEAR(r.rows[2].run.steps_per_s_per_device, 8.0, 1e-9);
  EXPECT_NEAR(r.rows[0].efficiency, 1.0, 1e-12);
  EXPECT_NEAR(r.rows[1].efficiency, 100.0 / 110.0, 1e-9);
  EXPECT_NEAR(r.rows[2].efficiency, 0.8, 1e-9);
  EXPECT_NEAR(r.rows[1].speedup, 2 * 100.0 / 110.0, 1e-9);
  EXPECT_NEAR(r.rows[2].speedup, 3.2, 1e-9);
  EXPECT_NEAR(r.rows[2].ideal_speedup, 4.0, 1e-12);

  const nlohmann::json j = ScalingToJson(r, {});
  EXPECT_EQ(j["scaling"]["baseline"], one);
  EXPECT_EQ(j["scaling"]["runs"][2]["devices"], 4);
  EXPECT_NEAR(j["scaling"]["runs"][2]["efficiency"].get<double>(), 0.8, 1e-9);
  EXPECT_EQ(j["scaling"]["runs"][2]["per_device"].size(), 4u);
  EXPECT_TRUE(j["scaling"]["runs"][0]["per_device"][0]["rank"].is_null());
  const std::string text = ScalingText(r);
  EXPECT_NE(text.find("80.0 %"), std::string::npos) << text;
  EXPECT_NE(text.find("90.9 %"), std::string::npos) << text;
}

TEST(ScalingTest, ARunWithoutEnoughTrainingStepsIsAnErrorNamingIt) {
  const std::string dir = WriteRun("short", 1, 100, /*steps=*/1);
  auto reader = store::RunReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  auto t = MeasureThroughput(**reader, dir);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(dir), std::string::npos);
}

}  // namespace
}  // namespace trainprof::analyze::scaling
