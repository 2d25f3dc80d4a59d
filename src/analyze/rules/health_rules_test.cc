// Golden scenarios for the training-health rules (LossNaN, LossNotDecreasing, ExplodingGradient,
// VanishingGradient): sampled train_loss / grad_norm instants written through the real store
// writer as the PyTorch instrumentation writes them, read back and judged offline. The trend
// statistics themselves are checked against scipy in src/analyze/stats/trend_test.cc.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "analyze/rules/rules_test_util.h"

namespace trainprof::analyze::rules {
namespace {

using namespace testing;  // NOLINT

constexpr int64_t kPid = 4242;

// One sampled value every `every` steps (steps 0, every, 2 x every, ...), 10 ms a step; the
// value of sample k is value(k) as text ("nan", "inf" or a number).
std::string Write(Scenario& s, const std::string& metric, int samples, int every,
                  const std::function<std::string(int)>& value) {
  auto& w = s.Node("n0", 4, 0);
  for (int k = 0; k < samples; ++k) {
    model::Event e;
    e.name = metric;
    e.category = "metric";
    e.kind = model::EventKind::kInstant;
    e.mode = "train";
    e.step = static_cast<int64_t>(k) * every;
    e.start_ns = kStart + kSec + e.step * 10 * kMs;
    e.duration_ns = 0;
    e.pid = kPid;
    e.tid = kPid;
    e.rank = model::kMissing;
    e.args = "{\"value\":" + value(k) + "}";
    w.AppendEvent(std::move(e));
  }
  return s.Finish();
}

std::string Num(double v) {
  char buf[48];
  snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A deterministic noise in [-1, 1] (no <random>: the same on every standard library).
double Noise(int k) { return static_cast<double>((k * 7919 + 13) % 201) / 100.0 - 1.0; }

TEST(LossNaNTest, NamesTheFirstNonFiniteStep) {
  Scenario s("loss_nan");
  const std::string dir = Write(s, "train_loss", 30, 10, [](int k) {
    if (k < 12) return Num(2.3 - 0.05 * k);
    return std::string(k == 12 ? "\"inf\"" : "\"nan\"");
  });
  RuleResult r = EvaluateOne(dir, "LossNaN");
  ASSERT_EQ(r.findings.size(), 1u);
  const model::Finding& f = r.findings[0];
  EXPECT_EQ(f.severity, model::Severity::kCritical);
  EXPECT_EQ(f.device, "pid4242");
  EXPECT_EQ(f.start_ns, kStart + kSec + 120 * 10 * kMs);
  EXPECT_NE(f.message.find("+inf at step 120"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("sampled every 10 steps"), std::string::npos) << f.message;
  const auto ev = Evidence(f);
  EXPECT_EQ(ev["step"], 120);
  EXPECT_EQ(ev["value"], "inf");
  EXPECT_EQ(ev["last_finite_step"], 110);
  EXPECT_NEAR(ev["last_finite_value"].get<double>(), 2.3 - 0.05 * 11, 1e-12);
  EXPECT_EQ(ev["sample_every_steps"], 10);
  ASSERT_EQ(ev["points"].size(), 13u);  // the 12 finite samples and the infinite one
  EXPECT_EQ(ev["points"][12][1], 120);
  EXPECT_EQ(r.violations, 18);  // every non-finite sample counts; one finding
}

TEST(LossNaNTest, SilentOnFiniteLosses) {
  Scenario s("loss_finite");
  RuleResult r =
      EvaluateOne(Write(s, "train_loss", 40, 10, [](int k) { return Num(1e30 * k); }), "LossNaN");
  EXPECT_SILENT_ON_DATA(r);
}

TEST(LossNotDecreasingTest, FlatLossFiresOnceEnoughSamplesExist) {
  // lr = 0: the loss of random batches around ln(10), no trend.
  Scenario s("loss_flat");
  RuleResult r = EvaluateOne(
      Write(s, "train_loss", 80, 10, [](int k) { return Num(2.3026 + 0.02 * Noise(k)); }),
      "LossNotDecreasing");
  ASSERT_EQ(r.findings.size(), 1u);
  const auto ev = Evidence(r.findings[0]);
  // Judged first at the 50th sample (min_samples), over steps 0-490.
  EXPECT_EQ(ev["first_step"], 0);
  EXPECT_EQ(ev["last_step"], 490);
  EXPECT_EQ(ev["samples"], 50);
  EXPECT_GE(ev["mann_kendall"]["p_decrease"].get<double>(), 0.05);
  EXPECT_GT(ev["relative_change"].get<double>(), -0.01);
  EXPECT_NEAR(ev["median"].get<double>(), 2.3026, 0.02);
  EXPECT_EQ(ev["points"].size(), 50u);
  EXPECT_EQ(r.findings[0].start_ns, kStart + kSec);
}

TEST(LossNotDecreasingTest, ConstantLossFires) {
  Scenario s("loss_const");
  RuleResult r = EvaluateOne(Write(s, "train_loss", 50, 1, [](int) { return Num(0.6931); }),
                             "LossNotDecreasing");
  ASSERT_EQ(r.findings.size(), 1u);
  const auto ev = Evidence(r.findings[0]);
  EXPECT_EQ(ev["mann_kendall"]["s"], 0);
  EXPECT_EQ(ev["theil_sen"]["slope_per_step"], 0.0);
}

TEST(LossNotDecreasingTest, SilentWhileTheLossFalls) {
  // A noisy exponential decay, sampled for 200 samples: the last 50 still fall clearly.
  Scenario s("loss_falls");
  RuleResult r = EvaluateOne(
      Write(s, "train_loss", 200, 10,
            [](int k) { return Num(0.2 + 2.1 * std::exp(-k / 80.0) + 0.01 * Noise(k)); }),
      "LossNotDecreasing");
  EXPECT_SILENT_ON_DATA(r);
}

TEST(LossNotDecreasingTest, APlateauAfterLearningIsConvergenceUnlessAskedFor) {
  // Falls for 100 samples (2.3 -> 0.8), then flat. By default the plateau is below half of
  // the first losses: converged, not judged. With converged_ratio=1 every plateau is judged:
  // it fires once the window holds few enough falling samples to lose significance.
  Scenario s("loss_plateau");
  const std::string dir = Write(s, "train_loss", 300, 10, [](int k) {
    const double base = k < 100 ? 2.3 - 0.015 * k : 0.8;
    return Num(base + 0.01 * Noise(k));
  });
  EXPECT_SILENT_ON_DATA(EvaluateOne(dir, "LossNotDecreasing"));
  RuleResult r = EvaluateOne(dir, "LossNotDecreasing", {"LossNotDecreasing.converged_ratio=1"});
  ASSERT_EQ(r.findings.size(), 1u);
  const auto ev = Evidence(r.findings[0]);
  EXPECT_GT(ev["last_step"].get<int64_t>(), 1000);
  EXPECT_LT(ev["last_step"].get<int64_t>(), 1500);
  EXPECT_NEAR(ev["early_median"].get<double>(), 2.3 - 0.015 * 4.5, 0.02);
}

TEST(LossNotDecreasingTest, APlateauWithoutLearningFires) {
  // Falls a little (2.3 -> 2.0), then flat at 2.0: not converged, fires.
  Scenario s("loss_stuck");
  RuleResult r = EvaluateOne(Write(s, "train_loss", 200, 10,
                                   [](int k) {
                                     const double base = k < 20 ? 2.3 - 0.015 * k : 2.0;
                                     return Num(base + 0.01 * Noise(k));
                                   }),
                             "LossNotDecreasing");
  ASSERT_EQ(r.findings.size(), 1u);
}

TEST(ExplodingGradientTest, FiresWhenTheNormGrowsByTheFactor) {
  // ~1 for 20 samples, then x10 per sample: 10 at step 200, 100 at step 210.
  Scenario s("grad_explodes");
  RuleResult r = EvaluateOne(
      Write(s, "grad_norm", 25, 10,
            [](int k) { return Num(k < 20 ? 1.0 + 0.01 * Noise(k) : std::pow(10.0, k - 19)); }),
      "ExplodingGradient");
  ASSERT_EQ(r.findings.size(), 1u);
  const auto ev = Evidence(r.findings[0]);
  EXPECT_EQ(ev["step"], 210);
  EXPECT_EQ(ev["baseline"]["samples"], 10);
  EXPECT_EQ(ev["baseline"]["last_step"], 90);
  EXPECT_NEAR(ev["ratio_to_baseline"].get<double>(), 100, 2);
  EXPECT_EQ(r.findings[0].severity, model::Severity::kWarning);
  EXPECT_EQ(r.violations, 4);  // steps 210, 220, 230, 240
}

TEST(ExplodingGradientTest, NaNGradientIsCriticalAtOnce) {
  Scenario s("grad_nan");
  RuleResult r = EvaluateOne(
      Write(s, "grad_norm", 5, 1, [](int k) { return k < 3 ? Num(0.5) : std::string("\"nan\""); }),
      "ExplodingGradient");
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].severity, model::Severity::kCritical);
  EXPECT_EQ(Evidence(r.findings[0])["step"], 3);
}

TEST(ExplodingGradientTest, MaxNormIsAnAbsoluteBound) {
  Scenario s("grad_max");
  RuleResult r = EvaluateOne(Write(s, "grad_norm", 30, 10, [](int k) { return Num(5.0 + k); }),
                             "ExplodingGradient", {"ExplodingGradient.max_norm=30"});
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(Evidence(r.findings[0])["step"], 260);  // 5 + 26 = 31 > 30
}

TEST(ExplodingGradientTest, SilentOnANormThatSettles) {
  Scenario s("grad_settles");
  RuleResult r = EvaluateOne(
      Write(s, "grad_norm", 200, 10, [](int k) { return Num(1.0 + 4.0 * std::exp(-k / 30.0)); }),
      "ExplodingGradient");
  EXPECT_SILENT_ON_DATA(r);
}

TEST(VanishingGradientTest, FiresAfterConsecutiveTinyNorms) {
  Scenario s("grad_vanishes");
  RuleResult r =
      EvaluateOne(Write(s, "grad_norm", 40, 10, [](int k) { return Num(k < 20 ? 2.0 : 1e-5); }),
                  "VanishingGradient");
  ASSERT_EQ(r.findings.size(), 1u);
  const auto ev = Evidence(r.findings[0]);
  EXPECT_EQ(ev["since_step"], 200);
  EXPECT_EQ(ev["step"], 240);  // the 5th low sample in a row
  EXPECT_EQ(ev["consecutive_samples"], 5);
  EXPECT_NEAR(ev["ratio_to_baseline"].get<double>(), 5e-6, 1e-12);
  EXPECT_EQ(r.findings[0].start_ns, kStart + kSec + 200 * 10 * kMs);
}

TEST(VanishingGradientTest, ZeroGradientsFromTheStartFire) {
  // Nothing reaches the parameters (everything detached): the norm is 0 throughout.
  Scenario s("grad_zero");
  RuleResult r =
      EvaluateOne(Write(s, "grad_norm", 10, 10, [](int) { return Num(0.0); }), "VanishingGradient");
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(Evidence(r.findings[0])["since_step"], 0);
}

TEST(VanishingGradientTest, SilentOnALowSpikeAndOnSlowDecay) {
  Scenario s("grad_ok");
  RuleResult r = EvaluateOne(Write(s, "grad_norm", 200, 10,
                                   [](int k) {
                                     if (k >= 50 && k < 54) return Num(1e-9);  // 4 < 5 in a row
                                     return Num(3.0 * std::exp(-k / 100.0));
                                   }),
                             "VanishingGradient");
  EXPECT_SILENT_ON_DATA(r);
}

TEST(HealthRulesTest, AnotherMetricNameCanBeJudged) {
  // trainprof.log_metric("loss", v) judged with LossNaN.metric=loss.
  Scenario s("custom_metric");
  const std::string dir =
      Write(s, "loss", 5, 1, [](int k) { return k < 4 ? Num(1.0) : std::string("\"nan\""); });
  EXPECT_FALSE(EvaluateOne(dir, "LossNaN").triggered);
  RuleResult r = EvaluateOne(dir, "LossNaN", {"LossNaN.metric=loss"});
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(Evidence(r.findings[0])["step"], 4);
}

}  // namespace
}  // namespace trainprof::analyze::rules
