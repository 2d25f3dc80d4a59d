// A finding's cost impact, hand-checked to the cent from the catalog's prices
// (data/catalog/instances.csv, storage.csv). The findings carry the evidence the rules write;
// the end-to-end path (rules -> cli -> JSON) is tested in src/cli/cost_command_test.cc.

#include "analyze/cost/finding_cost.h"

#include <gtest/gtest.h>

#include "analyze/cost/cost_test_util.h"

namespace trainprof::cost {
namespace {

using namespace testing;  // NOLINT

constexpr double kCent = 0.005;

model::Finding Make(const std::string& rule, const std::string& device, double start_s,
                    double end_s, const std::string& evidence) {
  model::Finding f;
  f.rule = rule;
  f.node = "algo-1";
  f.device = device;
  f.start_ns = At(start_s);
  f.end_ns = At(end_s);
  f.evidence_json = evidence;
  return f;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ml.p3.8xlarge: 4 x V100, 14.688 $/h (2021-11-29), EBS-only: 30 GB x 0.14 $/GB-month / 730 h
// = 0.0057534 $/h of ML storage. 2 h run, all training, one rank (rank 0) with steps.
class P3FindingCost : public ::testing::Test {
 protected:
  void SetUp() override {
    NodeSpec n;
    n.info = Node("algo-1");
    for (int i = 0; i < 100; ++i) n.steps.push_back({100.0 + i, 0.9, 0.1});
    report_ = Cost(WriteRun(Meta("ml.p3.8xlarge", 7200), {n}));
    ASSERT_EQ(report_.nodes.size(), 1u);
    ASSERT_EQ(report_.nodes[0].ranks, 1);
  }
  FindingCost Price(const model::Finding& f) { return CostOfFinding(report_, nullptr, f); }
  CostReport report_;
};

TEST_F(P3FindingCost, LowGpuUtilizationIdleShareOfOneGpu) {
  // gpu1, 600 s window, mean utilisation 25 %: one GPU = 14.688 / 4 = 3.672 $/h;
  // 3.672 x 600/3600 x 0.75 = 0.459 -> $0.46.
  auto c = Price(Make("LowGPUUtilization", "gpu1", 1000, 1600,
                      R"({"p95_percent": 40, "p5_percent": 10, "mean_percent": 25})"));
  ASSERT_TRUE(c.cost_usd.has_value());
  EXPECT_NEAR(*c.cost_usd, 0.46, kCent);
  EXPECT_NEAR(*c.cost_usd, 0.459, 1e-9);
  EXPECT_TRUE(Has(c.basis, "gpu1 idle share 75.0 %")) << c.basis;
  EXPECT_TRUE(Has(c.basis, "$14.688/h")) << c.basis;
  EXPECT_TRUE(Has(c.basis, "2021-11-29")) << c.basis;  // the price's date
  EXPECT_TRUE(Has(c.basis, "goerlitz")) << c.basis;    // and its source
  EXPECT_TRUE(Has(c.basis, "$3.672/h per GPU")) << c.basis;
}

TEST_F(P3FindingCost, CpuBottleneckPricesIdleGpuTime) {
  // 1201 samples over 1200 s: 1 s apart; 600 idle GPU-samples = 600 GPU-s;
  // 600 x 3.672 / 3600 = 0.612 -> $0.61.
  auto c = Price(Make("CPUBottleneck", "", 0, 1200,
                      R"({"idle_gpu_samples": 600, "datapoints": 1201, "gpus": 4,
                          "first_sample_ns": )" +
                          std::to_string(At(0)) + R"(, "last_sample_ns": )" +
                          std::to_string(At(1200)) + "}"));
  ASSERT_TRUE(c.cost_usd.has_value());
  EXPECT_NEAR(*c.cost_usd, 0.61, kCent);
  EXPECT_NEAR(*c.cost_usd, 0.612, 1e-9);
  EXPECT_TRUE(Has(c.basis, "1.000 s sampling interval")) << c.basis;
}

TEST_F(P3FindingCost, StepTimeRulesPriceTheRanksShareOfTheInstance) {
  // One rank on the node: the whole instance, (14.688 + 0.0057534) $/h = 14.6937534 $/h.
  const double rate = (14.688 + 30 * 0.14 / 730) / 3600;
  // DataLoaderStarvation: 500 steps x 720 ms = 360 s -> 360 x rate = 1.46938 -> $1.47.
  auto d = Price(Make("DataLoaderStarvation", "rank0", 100, 600,
                      R"({"data_wait_share": 0.72, "mean_data_wait_ms": 720, "steps": 500})"));
  ASSERT_TRUE(d.cost_usd.has_value());
  EXPECT_NEAR(*d.cost_usd, 1.47, kCent);
  EXPECT_NEAR(*d.cost_usd, 360 * rate, 1e-9);
  EXPECT_TRUE(Has(d.basis, "the only rank on the node")) << d.basis;
  // LongPauses: 300 s pause -> 300 x rate = 1.22448 -> $1.22.
  auto p = Price(Make("LongPauses", "rank0", 2000, 2300, R"({"pause_ms": 300000})"));
  EXPECT_NEAR(*p.cost_usd, 1.22, kCent);
  // StepOutlier: (61 - 1) + (31 - 1) = 90 s beyond the mean -> 90 x rate = 0.36734 -> $0.37.
  auto o = Price(Make("StepOutlier", "rank0", 100, 3000, R"({"outlier_steps": [
      {"step": 10, "duration_ms": 61000, "mean_ms": 1000, "threshold_ms": 1500},
      {"step": 20, "duration_ms": 31000, "mean_ms": 1000, "threshold_ms": 1500}]})"));
  EXPECT_NEAR(*o.cost_usd, 0.37, kCent);
  // StragglerRank: 3 other ranks wait 500 ms per step for 120 steps = 180 s -> $0.73.
  auto s = Price(Make("StragglerRank", "rank0", 100, 400,
                      R"({"rank_median_step_ms": 1500, "median_of_ranks_ms": 1000,
                          "ranks_compared": 4, "steps_in_window": 120})"));
  EXPECT_NEAR(*s.cost_usd, 0.73, kCent);
  EXPECT_NEAR(*s.cost_usd, 180 * rate, 1e-9);
  // The same from the own-time evidence StragglerRank writes now (the step medians there are
  // the straggler's shorter steps and do not enter the price).
  auto own = Price(Make("StragglerRank", "rank0", 100, 400,
                        R"({"rank_median_own_ms": 1500, "median_of_ranks_own_ms": 1000,
                            "rank_median_step_ms": 900, "ranks_compared": 4,
                            "steps_in_window": 120})"));
  EXPECT_NEAR(*own.cost_usd, 180 * rate, 1e-9);
  // GPUIdleBetweenSteps: 50 steps x 2000 ms = 100 s -> 0.40816 -> $0.41.
  auto g = Price(
      Make("GPUIdleBetweenSteps", "rank0", 100, 400, R"({"mean_gap_ms": 2000, "steps": 50})"));
  EXPECT_NEAR(*g.cost_usd, 0.41, kCent);
  // Recompilation: 3 recompiles costing 2 700 ms beyond the usual step, the rank's share.
  auto rc = Price(Make("Recompilation", "rank0", 100, 400,
                       R"({"excess_ms": 2700, "recompiles_in_window": 3})"));
  EXPECT_NEAR(*rc.cost_usd, 2.7 * rate, 1e-9);
}

TEST_F(P3FindingCost, MaxInitializationTimeIsTheClusterBilledUntilTheFirstStep) {
  // 30 min x 14.6937534 $/h = 7.34688 -> $7.35.
  auto c = Price(Make("MaxInitializationTime", "", 0, 1800, R"({"waited_ms": 1800000})"));
  ASSERT_TRUE(c.cost_usd.has_value());
  EXPECT_NEAR(*c.cost_usd, 7.35, kCent);
  EXPECT_TRUE(Has(c.basis, "1800.0 s x 1 instance(s)")) << c.basis;
}

TEST_F(P3FindingCost, NoCostModelMeansNoFigureNotZero) {
  auto m = Price(Make("GPUMemoryIncrease", "gpu0", 0, 100, "{}"));
  EXPECT_FALSE(m.cost_usd.has_value());
  EXPECT_TRUE(Has(m.basis, "out-of-memory")) << m.basis;
  for (const char* health :
       {"LossNaN", "LossNotDecreasing", "ExplodingGradient", "VanishingGradient"}) {
    auto h = Price(Make(health, "pid7", 0, 100, "{}"));
    EXPECT_FALSE(h.cost_usd.has_value()) << health;
    EXPECT_TRUE(Has(h.basis, "training health")) << h.basis;
  }
  auto custom = Price(Make("MyCustomRule", "", 0, 100, "{}"));
  EXPECT_FALSE(custom.cost_usd.has_value());
  EXPECT_TRUE(Has(custom.basis, "no cost model for rule MyCustomRule"));
  // Evidence without the values the price needs: said, not guessed.
  auto old = Price(Make("LowGPUUtilization", "gpu0", 0, 100, R"({"p95_percent": 40})"));
  EXPECT_FALSE(old.cost_usd.has_value());
  EXPECT_TRUE(Has(old.basis, "mean_percent"));
  // The finding shows it that way.
  model::Finding f = Make("GPUMemoryIncrease", "gpu0", 0, 100, "{}");
  PriceFinding(report_, nullptr, &f);
  EXPECT_EQ(model::FormatCostImpact(f).rfind("cost n/a (memory growth", 0), 0u);
  MarkUnpriced("no instance type", &f);
  EXPECT_FALSE(f.cost_usd.has_value());
  EXPECT_EQ(model::FormatCostImpact(f), "cost n/a (no instance type)");
}

TEST(FindingCostTest, UnderusedInstanceInDollars) {
  // ml.g5.48xlarge 20.36 $/h, 1 h, 8 x A10G at 30 % (what_if_test: UnderUsedGpusPackIntoFewer):
  // the fewer-GPUs what-if is ml.g5.12xlarge at 7.09 $/h -> $7.09, saving $13.27.
  NodeSpec n;
  n.info = Node("algo-1");
  n.gpus = 8;
  n.samples_until_s = 3600;
  n.gpu_util = [](int, double) { return 0.3; };
  n.gpu_memory_used_bytes = [](int, double) { return 10.0 * (1LL << 30); };
  n.cpu_total = [](double) { return 0.10; };
  n.memory_used_bytes = [](double) { return 100.0 * (1LL << 30); };
  CostReport r = Cost(WriteRun(Meta("ml.g5.48xlarge", 3600), {n}));
  model::Finding f =
      Make("UnderusedInstance", "", 600, 3600, R"({"cpu_mean_ratio": 0.1, "gpu_mean_ratio": 0.3})");
  f.node = "algo-1";
  PriceFinding(r, &ShippedCatalog(), &f);
  ASSERT_TRUE(f.cost_usd.has_value());
  EXPECT_NEAR(*f.cost_usd, 13.27, kCent);
  EXPECT_TRUE(Has(f.cost_basis, "the run cost $20.36")) << f.cost_basis;
  EXPECT_TRUE(Has(f.cost_basis, "would cost $7.09, saving $13.27")) << f.cost_basis;
  EXPECT_TRUE(Has(f.cost_basis, "ml.g5.12xlarge at $7.09/h list price")) << f.cost_basis;
  EXPECT_TRUE(Has(f.cost_basis, "as of 20")) << f.cost_basis;  // dated
  EXPECT_EQ(model::FormatCostImpact(f).rfind("≈ $13.27 (the run cost $20.36", 0), 0u);
}

}  // namespace
}  // namespace trainprof::cost
