// Golden scenarios for trainprof's own rules: a positive and a negative case each.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "analyze/rules/rules_test_util.h"

namespace trainprof::analyze::rules {
namespace {

using namespace testing;  // NOLINT

int64_t Jitter(int64_t step, int64_t base_ms) { return (base_ms + (step * 7919) % 11 - 5) * kMs; }

TEST(DataLoaderStarvationTest, FiresWhenTheLoopWaitsForBatches) {
  Scenario s("starved");
  s.Steps("n0", 0, kStart, kStart + 300 * kSec,
          [](int64_t step, int64_t* wait, int64_t* compute, int64_t*) {
            *wait = Jitter(step, 100);
            *compute = Jitter(step, 150);
          });
  RuleResult r = EvaluateOne(s.Finish(), "DataLoaderStarvation");
  EXPECT_TRUE(r.triggered);
  ASSERT_EQ(r.findings.size(), 1u);  // one long episode, reported once
  EXPECT_GT(r.violations, 10);
  EXPECT_EQ(r.findings[0].device, "rank0");
  EXPECT_NEAR(Evidence(r.findings[0])["data_wait_share"].get<double>(), 0.4, 0.02);
  EXPECT_NE(r.findings[0].recommendation.find("num_workers"), std::string::npos);
  EXPECT_NE(r.findings[0].recommendation.find("pin_memory"), std::string::npos);
}

// The bound recomputed here from the generated steps (not from the rule's sums): clusters of
// `cluster_steps` consecutive steps of the finding's span, the ratio of the sums and the ratio
// estimator's variance over the clusters.
TEST(DataLoaderStarvationTest, DecidedFromTheBoundAfterTwentySteps) {
  auto wait_of = [](int64_t step) { return (60 + (step * 37) % 50) * kMs; };  // 60..109 ms
  const int64_t compute = 150 * kMs;
  Scenario s("starved_bound");
  s.Steps("n0", 0, kStart, kStart + 120 * kSec,
          [&](int64_t step, int64_t* wait, int64_t* c, int64_t*) {
            *wait = wait_of(step);
            *c = compute;
          });
  RuleResult r = EvaluateOne(s.Finish(), "DataLoaderStarvation");
  ASSERT_EQ(r.findings.size(), 1u);
  const nlohmann::json e = Evidence(r.findings[0]);
  // Decided at the first span it may judge: 20 steps after the 5 warm-up steps (0-4).
  EXPECT_EQ(e["last_step"].get<int64_t>(), 24);
  const int64_t first = e["first_step"].get<int64_t>(), last = e["last_step"].get<int64_t>();
  const int64_t cluster = e["cluster_steps"].get<int64_t>();
  ASSERT_EQ(cluster, 5);
  ASSERT_EQ((last - first + 1) % cluster, 0);
  std::vector<double> parts, wholes;
  for (int64_t c0 = first; c0 <= last; c0 += cluster) {
    double p = 0, w = 0;
    for (int64_t i = c0; i < c0 + cluster; ++i) {
      p += static_cast<double>(wait_of(i));
      w += static_cast<double>(wait_of(i) + compute);
    }
    parts.push_back(p);
    wholes.push_back(w);
  }
  double sp = 0, sw = 0;
  for (size_t j = 0; j < parts.size(); ++j) sp += parts[j], sw += wholes[j];
  const double ratio = sp / sw;
  double ss = 0;
  for (size_t j = 0; j < parts.size(); ++j) ss += std::pow(parts[j] - ratio * wholes[j], 2);
  const double jn = static_cast<double>(parts.size());
  const double lower = ratio - 1.6448536 * std::sqrt(jn / (jn - 1) * ss) / sw;
  EXPECT_NEAR(e["data_wait_share"].get<double>(), ratio, 1e-4);
  EXPECT_NEAR(e["share_lower"].get<double>(), lower, 1e-4);
  EXPECT_GT(lower, 0.2);
}

TEST(DataLoaderStarvationTest, SilentOnABurstOfSlowBatches) {
  // Five batches of 400 ms in a fed loop: one or two clusters, not a pattern. (The share of
  // the 50 steps around them is 16 %.)
  Scenario s("burst");
  s.Steps("n0", 0, kStart, kStart + 120 * kSec,
          [](int64_t step, int64_t* wait, int64_t* compute, int64_t*) {
            *wait = step >= 100 && step < 105 ? 400 * kMs : 3 * kMs;
            *compute = 200 * kMs;
          });
  EXPECT_SILENT_ON_DATA(EvaluateOne(s.Finish(), "DataLoaderStarvation"));
}

TEST(DataLoaderStarvationTest, NoGpuAdviceOnACpuOnlyNode) {
  // The same starved loop on a 4-core node without GPUs: the advice fits the machine.
  Scenario s("starved_cpu");
  s.Node("n0", 4, 0);
  s.Steps("n0", 0, kStart, kStart + 300 * kSec,
          [](int64_t step, int64_t* wait, int64_t* compute, int64_t*) {
            *wait = Jitter(step, 100);
            *compute = Jitter(step, 150);
          });
  RuleResult r = EvaluateOne(s.Finish(), "DataLoaderStarvation");
  ASSERT_EQ(r.findings.size(), 1u);
  const std::string& advice = r.findings[0].recommendation;
  EXPECT_NE(advice.find("num_workers"), std::string::npos) << advice;
  EXPECT_NE(advice.find("4 cores"), std::string::npos) << advice;
  for (const char* word : {"GPU", "pin_memory"}) {
    EXPECT_EQ(advice.find(word), std::string::npos) << word << " in: " << advice;
  }
  EXPECT_EQ(Evidence(r.findings[0])["gpu"], false);
}

TEST(DataLoaderStarvationTest, SilentWhenBatchesAreReady) {
  Scenario s("fed");
  s.Steps("n0", 0, kStart, kStart + 300 * kSec,
          [](int64_t step, int64_t* wait, int64_t* compute, int64_t*) {
            *wait = 3 * kMs;
            *compute = Jitter(step, 200);
          });
  RuleResult r = EvaluateOne(s.Finish(), "DataLoaderStarvation");
  EXPECT_SILENT_ON_DATA(r);
  EXPECT_GT(r.datapoints, 1000);
}

TEST(GpuIdleBetweenStepsTest, FiresOnHostSideGaps) {
  Scenario s("gaps");
  s.Steps("n0", 0, kStart, kStart + 300 * kSec,
          [](int64_t step, int64_t*, int64_t* compute, int64_t* gap) {
            *compute = Jitter(step, 200);
            *gap = 80 * kMs;  // logging / .item() after every step
          });
  RuleResult r = EvaluateOne(s.Finish(), "GPUIdleBetweenSteps");
  EXPECT_TRUE(r.triggered);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_NEAR(Evidence(r.findings[0])["mean_gap_ms"].get<double>(), 80, 0.5);
  Scenario neg("no_gaps");
  neg.Steps("n0", 0, kStart, kStart + 300 * kSec,
            [](int64_t step, int64_t*, int64_t* compute, int64_t* gap) {
              *compute = Jitter(step, 200);
              *gap = 2 * kMs;
            });
  EXPECT_SILENT_ON_DATA(EvaluateOne(neg.Finish(), "GPUIdleBetweenSteps"));
}

TEST(HostMemoryGrowthTest, FiresOnASteadyLeak) {
  Scenario s("leak");
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> noise(-30e6, 30e6);
  s.System("n0", 1800, 1000, 4, 0, [&](Scenario::Tick& t) {
    t.rss_bytes = 4e9 + 2.0 * (1 << 30) * t.seconds / 3600 + noise(rng);  // +2 GiB/hour
  });
  RuleResult r = EvaluateOne(s.Finish(), "HostMemoryGrowth");
  EXPECT_TRUE(r.triggered);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_NEAR(Evidence(r.findings[0])["growth_bytes_per_hour"].get<double>(), 2.0 * (1 << 30),
              0.1 * (1 << 30));
  EXPECT_EQ(r.findings[0].device, "tree");
}

TEST(HostMemoryGrowthTest, SilentOnFlatAndSawtoothMemory) {
  Scenario s("no_leak");
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> noise(-50e6, 50e6);
  s.System("flat", 1800, 1000, 4, 0, [&](Scenario::Tick& t) { t.rss_bytes = 4e9 + noise(rng); });
  s.System("sawtooth", 1800, 1000, 4, 0, [&](Scenario::Tick& t) {
    // Caches fill for two minutes, then are freed: busy, but not a leak.
    t.rss_bytes = 4e9 + 5e8 * std::fmod(t.seconds, 120.0) / 120.0;
  });
  EXPECT_SILENT_ON_DATA(EvaluateOne(s.Finish(), "HostMemoryGrowth"));
}

TEST(DataLoaderStarvationTest, AProcessWithoutARankIsNamedByItsPid) {
  // A job that is not distributed records no rank (missing), not rank 0.
  Scenario s("no_rank");
  s.Steps("n0", model::kMissing, kStart, kStart + 60 * kSec,
          [](int64_t, int64_t* wait, int64_t* compute, int64_t*) {
            *wait = 150 * kMs;
            *compute = 50 * kMs;
          });
  RuleResult r = EvaluateOne(s.Finish(), "DataLoaderStarvation");
  ASSERT_TRUE(r.triggered);
  EXPECT_EQ(r.findings[0].device, "pid1000");
  EXPECT_EQ(r.findings[0].message.rfind("Process 1000 on n0 waits", 0), 0u)
      << r.findings[0].message;
}

TEST(GpuIdleBetweenStepsTest, OnlyWhereThereIsAGpu) {
  // The same host-side gaps: judged on a node with GPUs (listed, or only seen in the samples),
  // not on a CPU-only node (tests/python/scenarios/ on a CPU host).
  auto run = [](int gpus, bool gpu_samples) {
    Scenario s("gaps_gpus" + std::to_string(gpus) + (gpu_samples ? "_samples" : ""));
    s.Node("n0", 4, gpus);
    if (gpu_samples) s.System("n0", 300, 1000, 4, 1, [](Scenario::Tick&) {});
    s.Steps("n0", 0, kStart, kStart + 300 * kSec,
            [](int64_t step, int64_t*, int64_t* compute, int64_t* gap) {
              *compute = Jitter(step, 200);
              *gap = 80 * kMs;
            });
    return EvaluateOne(s.Finish(), "GPUIdleBetweenSteps");
  };
  EXPECT_TRUE(run(1, false).triggered);
  EXPECT_TRUE(run(0, true).triggered);
  RuleResult cpu_only = run(0, false);
  // Not judged (no GPU to idle), which is not the same as silent after judging.
  EXPECT_FALSE(cpu_only.triggered);
  EXPECT_EQ(cpu_only.datapoints, 0);
}

// Real jobs (tests/python/scenarios/memory_leak.py): RSS climbs while torch is imported and
// data loaded, then the training loop runs, then teardown frees memory. Only the training
// loop is judged: the trend starts warmup_s after the first step and ends at the last step.
void ImportTrainTeardown(Scenario& s, const std::string& node, double leak_bytes_per_hour) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> noise(-20e6, 20e6);
  s.System(node, 2500, 1000, 4, 0, [&](Scenario::Tick& t) {
    if (t.seconds < 600) {
      t.rss_bytes = 3e9 * t.seconds / 600 + noise(rng);  // importing, loading the dataset
    } else if (t.seconds < 2400) {
      t.rss_bytes = 3e9 + leak_bytes_per_hour * (t.seconds - 600) / 3600 + noise(rng);
    } else {
      t.rss_bytes = 1e9 + noise(rng);  // teardown
    }
  });
  s.Steps(node, 0, kStart + 600 * kSec, kStart + 2400 * kSec,
          [](int64_t, int64_t*, int64_t*, int64_t*) {});
}

TEST(HostMemoryGrowthTest, JudgesTheTrainingLoopNotImportOrTeardown) {
  Scenario s("leak_in_training");
  ImportTrainTeardown(s, "n0", 2.0 * (1 << 30));
  RuleResult r = EvaluateOne(s.Finish(), "HostMemoryGrowth");
  EXPECT_TRUE(r.triggered);
  ASSERT_EQ(r.findings.size(), 1u);
  const auto ev = Evidence(r.findings[0]);
  EXPECT_NEAR(ev["growth_bytes_per_hour"].get<double>(), 2.0 * (1 << 30), 0.1 * (1 << 30));
  EXPECT_GT(ev["first_bytes"].get<double>(), 3e9);  // after the import climb
  // From warmup_s after the first step: the import climb is not part of the trend.
  EXPECT_GE(r.findings[0].start_ns, kStart + 900 * kSec);
}

TEST(HostMemoryGrowthTest, JudgesDataAfterTheLastScan) {
  // The trend's end is its last sample, not the last minutely scan: a leak that lasts less
  // than a scan interval after warm-up is judged at the end (it was not: the duration ended
  // at the last scan).
  Scenario s("short_leak");
  s.System("n0", 50, 100, 2, 0,
           [](Scenario::Tick& t) { t.rss_bytes = 4e8 + 5e7 * t.seconds; });  // +50 MB/s
  s.Steps("n0", 0, kStart, kStart + 50 * kSec, [](int64_t, int64_t*, int64_t*, int64_t*) {});
  RuleResult r = EvaluateOne(s.Finish(), "HostMemoryGrowth",
                             {"HostMemoryGrowth.warmup_s=1", "HostMemoryGrowth.min_duration_s=30"});
  EXPECT_TRUE(r.triggered);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_NEAR(Evidence(r.findings[0])["growth_bytes_per_hour"].get<double>(), 5e7 * 3600, 1e9);
}

TEST(HostMemoryGrowthTest, SilentWhenOnlyImportAndTeardownMoveMemory) {
  Scenario s("flat_training");
  ImportTrainTeardown(s, "n0", 0);
  RuleResult r = EvaluateOne(s.Finish(), "HostMemoryGrowth");
  EXPECT_SILENT_ON_DATA(r);
  // samples read: from settle_s (5 s) after the first step (600 s) up to the last step (2400 s)
  EXPECT_NEAR(static_cast<double>(r.datapoints), 1795, 2);
}

// Recent samples: a leak is named seconds after it starts, with its evidence.
constexpr double kGiB = 1024.0 * 1024 * 1024;

// Least squares over a finding's evidence points ([[ts_ns, value], ...]), two-pass and
// mean-centred (not the rule's one-pass sums): {slope per second, R^2}.
std::pair<double, double> FitPoints(const nlohmann::json& points) {
  const double n = static_cast<double>(points.size());
  const int64_t t0 = points[0][0].get<int64_t>();
  double mx = 0, my = 0;
  for (const auto& p : points) {
    mx += static_cast<double>(p[0].get<int64_t>() - t0) / 1e9 / n;
    my += p[1].get<double>() / n;
  }
  double sxx = 0, sxy = 0, syy = 0;
  for (const auto& p : points) {
    const double dx = static_cast<double>(p[0].get<int64_t>() - t0) / 1e9 - mx;
    const double dy = p[1].get<double>() - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  return {sxy / sxx, sxy * sxy / (sxx * syy)};
}

// The rule's fit equals an independent one over the points it reports (all of them: <= 60).
void ExpectFitOfPoints(const nlohmann::json& ev, const char* rate_key) {
  ASSERT_EQ(ev["points"].size(), ev["samples"].get<size_t>());
  const auto [slope, r2] = FitPoints(ev["points"]);
  EXPECT_NEAR(ev[rate_key].get<double>(), slope, 1e-4 * std::fabs(slope) + 1);
  EXPECT_NEAR(ev["r_squared"].get<double>(), r2, 1e-4);
}

TEST(HostMemoryGrowthTest, AFastLeakIsNamedSecondsAfterItsOnset) {
  // Healthy for 2 minutes of training, then 131 MB/s (4 MiB per 32 ms step) from 120 s on.
  Scenario s("fast_leak");
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(-2e6, 2e6);
  const double onset = 130, rate = 131e6;
  s.System("n0", 200, 500, 4, 0, [&](Scenario::Tick& t) {
    t.rss_bytes = 3e9 + noise(rng) + (t.seconds > onset ? rate * (t.seconds - onset) : 0);
  });
  s.Steps("n0", 0, kStart + 10 * kSec, kStart + 200 * kSec,
          [](int64_t, int64_t*, int64_t*, int64_t*) {});
  RuleResult r = EvaluateOne(s.Finish(), "HostMemoryGrowth");
  ASSERT_EQ(r.findings.size(), 1u);
  const model::Finding& f = r.findings[0];
  const auto ev = Evidence(f);
  EXPECT_EQ(ev["basis"], "recent samples");
  // Decided on data up to at most 10 s after the onset (5 s of points, checks once a second).
  EXPECT_LE(f.end_ns, kStart + static_cast<int64_t>((onset + 10) * kSec));
  // Decided as soon as the evidence sufficed: the fitted span may begin a sample or two before
  // the onset (R^2 still >= 0.9), which lowers the rate a little.
  EXPECT_GE(f.start_ns, kStart + static_cast<int64_t>((onset - 1.5) * kSec));
  EXPECT_NEAR(ev["growth_bytes_per_second"].get<double>(), rate, 0.15 * rate);
  EXPECT_GE(ev["r_squared"].get<double>(), 0.9);
  EXPECT_GE(ev["samples"].get<int64_t>(), 10);
  ExpectFitOfPoints(ev, "growth_bytes_per_second");
  // The node's memory (256 GiB, 64 GiB in use in every tick): (256 - 64) GiB at the fitted rate.
  EXPECT_EQ(ev["limit_bytes"].get<double>(), 256 * kGiB);
  EXPECT_EQ(ev["in_use_bytes"].get<double>(), 64 * kGiB);
  EXPECT_NEAR(ev["seconds_until_limit"].get<double>(),
              192 * kGiB / ev["growth_bytes_per_second"].get<double>(), 1);
  // 1 500 s away: beyond the 900 s horizon, fired for its speed (> 32 MiB/s) as a warning.
  EXPECT_FALSE(ev["projected_oom"].get<bool>());
  EXPECT_EQ(f.severity, model::Severity::kWarning);
  const double fitted = ev["growth_bytes_per_second"].get<double>();
  EXPECT_NE(f.message.find("grows " + std::to_string(std::lround(fitted / 1e6)) + " MB/s"),
            std::string::npos)
      << f.message;
  char minutes[32];
  snprintf(minutes, sizeof minutes, "%.1f min", 192 * kGiB / fitted / 60);
  EXPECT_NE(f.message.find(std::string("runs out of memory in ") + minutes), std::string::npos)
      << f.message;
  // The points it was fitted on travel with it, inside the span, in time order.
  const auto& points = ev["points"];
  ASSERT_GE(points.size(), 10u);
  EXPECT_EQ(points.front()[0].get<int64_t>(), f.start_ns);
  EXPECT_EQ(points.back()[0].get<int64_t>(), f.end_ns);
}

TEST(HostMemoryGrowthTest, ProjectedOomUnderTheCgroupLimitIsCritical) {
  // 20 MB/s: slow enough to be no finding on a 256 GiB node (2.7 h to fill, below 32 MiB/s),
  // but the cgroup allows 8 GiB: (8 GiB - the tree's memory) / 20 MB/s is within 900 s.
  auto run = [](bool limited) {
    Scenario s(limited ? "cgroup_oom" : "no_cgroup");
    s.System("n0", 120, 500, 4, 0, [&](Scenario::Tick& t) {
      t.rss_bytes = 2 * kGiB + (t.seconds > 20 ? 20e6 * (t.seconds - 20) : 0);
      if (limited) s.Value("n0", "cgroup_memory_limit_bytes", "", t.ts_ns, 8 * kGiB);
    });
    s.Steps("n0", 0, kStart, kStart + 120 * kSec, [](int64_t, int64_t*, int64_t*, int64_t*) {});
    return EvaluateOne(s.Finish(), "HostMemoryGrowth");
  };
  RuleResult r = run(true);
  ASSERT_EQ(r.findings.size(), 1u);
  const model::Finding& f = r.findings[0];
  const auto ev = Evidence(f);
  EXPECT_EQ(f.severity, model::Severity::kCritical);
  EXPECT_TRUE(ev["projected_oom"].get<bool>());
  EXPECT_EQ(ev["limit_source"], "the cgroup's memory.max");
  const double last = ev["last_bytes"].get<double>();
  EXPECT_EQ(ev["in_use_bytes"].get<double>(), last);
  const double fitted = ev["growth_bytes_per_second"].get<double>();
  EXPECT_NEAR(fitted, 20e6, 0.15 * 20e6);
  ExpectFitOfPoints(ev, "growth_bytes_per_second");
  EXPECT_NEAR(ev["seconds_until_limit"].get<double>(), (8 * kGiB - last) / fitted, 0.1);
  EXPECT_LE(f.end_ns, kStart + 30 * kSec);
  EXPECT_NE(f.recommendation.find("Checkpoint"), std::string::npos);
  EXPECT_SILENT_ON_DATA(run(false));
}

TEST(HostMemoryGrowthTest, SilentOnAJumpAClimbThatLevelsOffAndNoise) {
  // Near a tight cgroup limit (so that any "growth" would project an OOM soon), memory that
  // jumps once (an evaluation pass, workers starting), climbs and levels off within a few
  // seconds (caches filling) or only jitters is not a leak. (A climb that levels off over much
  // longer than min_window_s is growth for as long as it lasts, and is named.)
  Scenario s("not_leaks");
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> noise(-20e6, 20e6);
  auto node = [&](const std::string& name, const std::function<double(double)>& rss) {
    s.System(name, 300, 500, 4, 0, [&](Scenario::Tick& t) {
      t.rss_bytes = rss(t.seconds);
      s.Value(name, "cgroup_memory_limit_bytes", "", t.ts_ns, 6 * kGiB);
    });
    s.Steps(name, 0, kStart, kStart + 300 * kSec, [](int64_t, int64_t*, int64_t*, int64_t*) {});
  };
  node("jump", [&](double t) { return 4e9 + (t > 100 ? 8e8 : 0) + noise(rng); });
  node("ramp_to_plateau",
       [&](double t) { return 3e9 + 1.5e9 * (1 - std::exp(-std::max(0.0, t - 20) / 1.5)); });
  node("noise", [&](double) { return 4e9 + noise(rng); });
  RuleResult r = EvaluateOne(s.Finish(), "HostMemoryGrowth");
  EXPECT_SILENT_ON_DATA(r);
}

TEST(GpuMemoryGrowthTest, NamesAGpuThatWillFillUpAndNotOneThatSettles) {
  Scenario s("gpu_growth");
  s.System("n0", 180, 500, 4, 2, [&](Scenario::Tick& t) {
    // gpu0: the caching allocator fills to 40 % in the first steps, then 0.5 % more per second
    // from 60 s on (a tensor kept per step). gpu1: 40 %, then one jump to 70 % at 90 s.
    t.gpu_mem[0] = 0.4 + (t.seconds > 60 ? 0.005 * (t.seconds - 60) : 0);
    t.gpu_mem[1] = t.seconds > 90 ? 0.7 : 0.4;
    if (t.seconds < 3) t.gpu_mem[0] = t.gpu_mem[1] = 0.1 * t.seconds;
    s.Value("n0", "gpu_memory_total_bytes", "gpu0", t.ts_ns, 80 * kGiB);
  });
  s.Steps("n0", 0, kStart, kStart + 180 * kSec, [](int64_t, int64_t*, int64_t*, int64_t*) {});
  RuleResult r = EvaluateOne(s.Finish(), "GPUMemoryGrowth");
  ASSERT_EQ(r.findings.size(), 1u);
  const model::Finding& f = r.findings[0];
  const auto ev = Evidence(f);
  EXPECT_EQ(f.device, "gpu0");
  EXPECT_EQ(f.severity, model::Severity::kCritical);
  const double rate = ev["growth_ratio_per_second"].get<double>();
  EXPECT_NEAR(rate, 0.005, 0.15 * 0.005);
  ExpectFitOfPoints(ev, "growth_ratio_per_second");
  EXPECT_NEAR(ev["growth_bytes_per_second"].get<double>(), rate * 80 * kGiB,
              1e-4 * rate * 80 * kGiB);
  EXPECT_NEAR(ev["seconds_until_limit"].get<double>(), (1 - ev["last_ratio"].get<double>()) / rate,
              0.1);
  EXPECT_LE(f.end_ns, kStart + 70 * kSec);
  EXPECT_GT(r.datapoints, 600);  // both GPUs were read
}

TEST(CpuThrottlingTest, FiresOnlyWhenTheContainerIsThrottled) {
  Scenario s("throttled");
  s.System("limited", 600, 500, 4, 0, [](Scenario::Tick& t) { t.throttled = 0.4; });
  s.System("free", 600, 500, 4, 0, [](Scenario::Tick& t) { t.throttled = 0.01; });
  RuleResult r = EvaluateOne(s.Finish(), "CPUThrottling");
  EXPECT_TRUE(r.triggered);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].node, "limited");
  EXPECT_DOUBLE_EQ(Evidence(r.findings[0])["throttled_ratio_mean"].get<double>(), 0.4);
}

TEST(StragglerRankTest, NamesTheSlowRank) {
  Scenario s("straggler");
  for (int64_t rank = 0; rank < 4; ++rank) {
    s.Steps(rank < 2 ? "n0" : "n1", rank, kStart, kStart + 300 * kSec,
            [rank](int64_t step, int64_t*, int64_t* compute, int64_t*) {
              *compute = Jitter(step, rank == 2 ? 300 : 200);
            });
  }
  RuleResult r = EvaluateOne(s.Finish(), "StragglerRank");
  EXPECT_TRUE(r.triggered);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].node, "n1");
  EXPECT_EQ(r.findings[0].device, "rank2");
  EXPECT_NEAR(Evidence(r.findings[0])["ratio"].get<double>(), 1.5, 0.05);
}

// A planted 2-rank DDP job, 300 ms per step for both ranks. Rank 1 loses 100 ms between its
// steps (outside any step span): its step is 5 ms data + 60 ms forward + 115 ms backward (the
// last 20 ms of it in all_reduce) + 20 ms optimizer = 200 ms, then 100 ms of gap. Rank 0 gets
// to all_reduce at 160 ms into its step and waits there until rank 1 arrives (260 ms + the 20 ms
// transfer): a 120 ms all_reduce, a 300 ms step, no gap. Rank 0's steps are the longer ones,
// yet rank 1 is the cause: outside collectives rank 1 spends 200 - 20 + 100 = 280 ms per step,
// rank 0 300 - 120 = 180 ms; the median of the two is 230 ms, so rank 1 is 280 / 230 =
// 1.2174x (> 1.15) and rank 0 0.78x.
TEST(StragglerRankTest, BlamesTheRankOthersWaitFor) {
  Scenario s("ddp_straggler");
  int64_t t = kStart;
  for (int64_t step = 0; t < kStart + 300 * kSec; ++step) {
    s.Step("n0", 0, step, t, 5 * kMs, 60 * kMs, 215 * kMs, 20 * kMs);
    s.Span("n0", "collective", "all_reduce", t + 160 * kMs, 120 * kMs, 0, 1000);
    s.Step("n0", 1, step, t + 100 * kMs, 5 * kMs, 60 * kMs, 115 * kMs, 20 * kMs);
    s.Span("n0", "collective", "all_reduce", t + 260 * kMs, 20 * kMs, 1, 1001);
    t += 300 * kMs;
  }
  RuleResult r = EvaluateOne(s.Finish(), "StragglerRank");
  EXPECT_GT(r.datapoints, 1000);
  ASSERT_EQ(r.findings.size(), 1u);
  const model::Finding& f = r.findings[0];
  EXPECT_EQ(f.device, "rank1");
  nlohmann::json e = Evidence(f);
  EXPECT_NEAR(e["ratio"].get<double>(), 280.0 / 230.0, 1e-4);
  EXPECT_NEAR(e["rank_median_own_ms"].get<double>(), 280.0, 1e-6);
  EXPECT_NEAR(e["median_of_ranks_own_ms"].get<double>(), 230.0, 1e-6);
  EXPECT_NEAR(e["rank_median_step_ms"].get<double>(), 200.0, 1e-6);
  EXPECT_NEAR(e["rank_median_collective_ms"].get<double>(), 20.0, 1e-6);
  EXPECT_NEAR(e["rank_median_gap_ms"].get<double>(), 100.0, 1e-6);
  EXPECT_NEAR(e["others_max_median_collective_ms"].get<double>(), 120.0, 1e-6);
  EXPECT_NE(f.message.find("Rank 1"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("waits least in collectives"), std::string::npos) << f.message;
}

TEST(StragglerRankTest, SilentWhenRanksKeepPace) {
  Scenario s("in_step");
  for (int64_t rank = 0; rank < 4; ++rank) {
    s.Steps("n0", rank, kStart, kStart + 300 * kSec,
            [rank](int64_t step, int64_t*, int64_t* compute, int64_t*) {
              *compute = Jitter(step + rank, 200);
            });
  }
  RuleResult r = EvaluateOne(s.Finish(), "StragglerRank");
  EXPECT_SILENT_ON_DATA(r);
  EXPECT_GT(r.datapoints, 5000);
}

// The open window is checked every 2 s of data: a rank that turns slow in the middle of a
// 60-s window is named from its last 40 steps, seconds after the onset, with the share of its
// steps beyond the threshold and that share's Wilson bound (recomputed here from the evidence's
// own_ms, the rank's own time per step).
TEST(StragglerRankTest, NamedSecondsAfterItsOnsetInsideAWindow) {
  Scenario s("straggler_onset");
  const int64_t onset = kStart + 90 * kSec;
  for (int64_t rank = 0; rank < 2; ++rank) {
    int64_t t = kStart;
    for (int64_t step = 0; t < kStart + 150 * kSec; ++step) {
      const int64_t ms = Jitter(step + rank, rank == 1 && t >= onset ? 300 : 200) / kMs;
      s.Step("n0", rank, step, t, 5 * kMs, ms * kMs * 3 / 10, ms * kMs * 6 / 10,
             ms * kMs / 10 - 5 * kMs);
      t += ms * kMs;
    }
  }
  RuleResult r = EvaluateOne(s.Finish(), "StragglerRank");
  ASSERT_EQ(r.findings.size(), 1u);
  const model::Finding& f = r.findings[0];
  EXPECT_EQ(f.device, "rank1");
  EXPECT_GE(f.end_ns, onset + 6 * kSec);   // 40 steps, most of them slow
  EXPECT_LE(f.end_ns, onset + 16 * kSec);  // not the window's end (kStart + 120 s)
  nlohmann::json e = Evidence(f);
  EXPECT_EQ(e["decided"], "early (open window)");
  const auto own = e["own_ms"].get<std::vector<double>>();
  ASSERT_EQ(own.size(), 40u);
  const double typical = e["median_of_ranks_own_ms"].get<double>();
  double slow = 0;
  for (double v : own) slow += v > 1.15 * typical ? 1 : 0;
  const double p = slow / 40, z = 1.6448536269514722, n = 40;
  const double lower =
      (p + z * z / (2 * n) - z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n))) /
      (1 + z * z / n);
  EXPECT_NEAR(e["slow_step_share"].get<double>(), p, 1e-4);
  EXPECT_NEAR(e["slow_step_share_lower"].get<double>(), lower, 1e-4);
  EXPECT_GT(lower, 0.5);
}

// torch.compile recompiling: steps of 100 ms; the first compile at step 0 and two recompiles
// (a last smaller batch, eval mode) are normal; a third within the window, each 900 ms longer
// than the usual step, fires with the time they cost.
TEST(RecompilationTest, NamesRepeatedRecompilesWithTheirCost) {
  auto run = [](int recompiles) {
    Scenario s("recompile" + std::to_string(recompiles));
    int64_t t = kStart;
    std::vector<int64_t> at = {0, 600, 620, 640, 660};  // steps that compile
    for (int64_t step = 0; step < 1200; ++step) {
      const bool compiles =
          std::find(at.begin(), at.begin() + 1 + recompiles, step) != at.begin() + 1 + recompiles;
      const int64_t dur = (compiles ? 1000 : 100) * kMs;
      s.Step("n0", 0, step, t, 5 * kMs, dur * 3 / 10, dur * 6 / 10, dur / 10 - 5 * kMs);
      if (compiles) {
        const int64_t graphs = 1 + (step == 0 ? 0 : 1 + (step - 600) / 20);
        s.Span("n0", "compile", step == 0 ? "compile" : "recompile", t, dur, 0, 1000,
               "{\"new_graphs\":1,\"graphs\":" + std::to_string(graphs) + "}");
      }
      t += dur;
    }
    return EvaluateOne(s.Finish(), "Recompilation");
  };
  EXPECT_SILENT_ON_DATA(run(2));
  RuleResult r = run(4);
  ASSERT_EQ(r.findings.size(), 1u);
  const model::Finding& f = r.findings[0];
  EXPECT_EQ(f.device, "rank0");
  nlohmann::json e = Evidence(f);
  EXPECT_EQ(e["recompiles_in_window"], 3);  // fired at the third
  EXPECT_NEAR(e["typical_step_ms"].get<double>(), 100.0, 1e-6);
  EXPECT_NEAR(e["excess_ms"].get<double>(), 3 * 900.0, 1e-3);
  // From the first recompile's start (step 600) to the third's end (step 640): steps 600..640,
  // 41 of them, three of 1 000 ms and 38 of 100 ms.
  EXPECT_NEAR(e["since_first_ms"].get<double>(), 38 * 100.0 + 3 * 1000.0, 1e-3);
  EXPECT_NEAR(e["time_share"].get<double>(), 2700.0 / 6800.0, 1e-4);
  EXPECT_EQ(e["recompiles"].size(), 3u);
}

TEST(CommunicationBoundTest, FiresWhenCollectivesDominateSteps) {
  auto run = [](int64_t allreduce_ms) {
    Scenario s("comm" + std::to_string(allreduce_ms));
    int64_t t = kStart;
    for (int64_t step = 0; t < kStart + 300 * kSec; ++step) {
      s.Step("n0", 0, step, t, 5 * kMs, 60 * kMs, 120 * kMs, 15 * kMs);
      s.Span("n0", "collective", "all_reduce", t + 70 * kMs, allreduce_ms * kMs, 0, 1000);
      t += 200 * kMs;
    }
    return EvaluateOne(s.Finish(), "CommunicationBound");
  };
  RuleResult heavy = run(120);
  EXPECT_TRUE(heavy.triggered);
  ASSERT_EQ(heavy.findings.size(), 1u);
  EXPECT_NEAR(Evidence(heavy.findings[0])["collective_share"].get<double>(), 0.6, 0.02);
  EXPECT_TRUE(Evidence(heavy.findings[0])["collectives_ms_by_name"].contains("all_reduce"));
  EXPECT_SILENT_ON_DATA(run(10));
}

TEST(LongPausesTest, NamesTheCheckpointThatStoppedTraining) {
  Scenario s("pause");
  const int64_t pause_at = kStart + 200 * kSec;
  int64_t next =
      s.Steps("n0", 0, kStart, pause_at,
              [](int64_t step, int64_t*, int64_t* c, int64_t*) { *c = Jitter(step, 200); });
  s.Span("n0", "phase", "checkpoint", pause_at + kSec, 118 * kSec);
  s.Steps(
      "n0", 0, pause_at + 120 * kSec, pause_at + 300 * kSec,
      [](int64_t step, int64_t*, int64_t* c, int64_t*) { *c = Jitter(step, 200); }, next);
  RuleResult r = EvaluateOne(s.Finish(), "LongPauses");
  EXPECT_TRUE(r.triggered);
  EXPECT_EQ(r.violations, 1);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_NE(r.findings[0].message.find("checkpointing"), std::string::npos);
  EXPECT_EQ(Evidence(r.findings[0])["overlapping_phases"][0]["phase"], "checkpoint");
  EXPECT_NE(r.findings[0].recommendation.find("async"), std::string::npos);
}

TEST(LongPausesTest, SilentOnShortGaps) {
  Scenario s("short_gaps");
  s.Steps("n0", 0, kStart, kStart + 600 * kSec,
          [](int64_t step, int64_t*, int64_t* c, int64_t* gap) {
            *c = Jitter(step, 200);
            *gap = step % 500 == 499 ? 2 * kSec : 0;  // a 2 s evaluation now and then
          });
  EXPECT_SILENT_ON_DATA(EvaluateOne(s.Finish(), "LongPauses"));
}

TEST(UnderusedInstanceTest, FiresWhenEverythingIdlesDuringTraining) {
  auto run = [](double gpu) {
    Scenario s("idle" + std::to_string(static_cast<int>(gpu * 100)));
    s.System("n0", 1500, 1000, 8, 4, [gpu](Scenario::Tick& t) {
      for (auto& c : t.core) c = 0.05;
      for (auto& g : t.gpu) g = t.seconds < 120 ? 0.0 : gpu;
      for (auto& m : t.gpu_mem) m = 0.1;
    });
    s.Steps("n0", 0, kStart + 120 * kSec, kStart + 1500 * kSec,
            [](int64_t step, int64_t*, int64_t* c, int64_t*) { *c = Jitter(step, 200); });
    return EvaluateOne(s.Finish(), "UnderusedInstance");
  };
  RuleResult idle = run(0.1);
  EXPECT_TRUE(idle.triggered);
  ASSERT_EQ(idle.findings.size(), 1u);
  auto ev = Evidence(idle.findings[0]);
  EXPECT_NEAR(ev["gpu_mean_ratio"].get<double>(), 0.1, 1e-6);
  EXPECT_EQ(ev["instance_type"], "ml.p4d.24xlarge");
  // Judged from the first step: the two idle minutes before it do not count.
  EXPECT_GE(idle.findings[0].start_ns, kStart + 120 * kSec);
  EXPECT_SILENT_ON_DATA(run(0.9));
}

TEST(UnderusedInstanceTest, JudgesGpusSampledApartFromTheCpuAndOnlyWhileTraining) {
  // SageMaker writes a node's CPU and GPU lines at different times: GPU-only snapshots. Busy
  // GPUs (90 %) beside an idle CPU (5 %) are not an idle instance; they were left out, and the
  // rule fired with gpu_mean_ratio null.
  auto run = [](bool steps, double gpu) {
    Scenario s(std::string("apart") + (steps ? "_steps" : "") + std::to_string(gpu));
    s.System("n0", 1500, 1000, 8, 0, [](Scenario::Tick& t) {
      for (auto& c : t.core) c = 0.05;
    });
    for (int64_t t = 0; t < 1500; ++t) {
      for (int g = 0; g < 4; ++g) {
        s.Value("n0", "gpu_utilization_ratio", "gpu" + std::to_string(g),
                kStart + t * kSec + 400 * kMs, gpu);
        s.Value("n0", "gpu_memory_used_ratio", "gpu" + std::to_string(g),
                kStart + t * kSec + 400 * kMs, gpu / 2);
      }
    }
    if (steps) {
      s.Steps("n0", 0, kStart + 120 * kSec, kStart + 1500 * kSec,
              [](int64_t step, int64_t*, int64_t* c, int64_t*) { *c = Jitter(step, 200); });
    }
    return EvaluateOne(s.Finish(), "UnderusedInstance");
  };
  RuleResult busy = run(true, 0.9);
  EXPECT_GT(busy.datapoints, 1500);
  EXPECT_FALSE(busy.triggered);
  // Idle GPUs too: the same run fires...
  RuleResult idle = run(true, 0.05);
  ASSERT_TRUE(idle.triggered);
  EXPECT_NEAR(Evidence(idle.findings[0])["gpu_mean_ratio"].get<double>(), 0.05, 1e-9);
  // ...but not without a step anywhere: nothing says what the instance is for (SageMaker's
  // test_traces: "mostly idle while training" on a node that never trained).
  EXPECT_SILENT_ON_DATA(run(false, 0.05));
}

}  // namespace
}  // namespace trainprof::analyze::rules
