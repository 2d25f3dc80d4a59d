// Golden scenarios for trainprof's own rules: a positive and a negative case each.

#include <gtest/gtest.h>

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
  // samples in the judged trend: from 300 s after the first step up to the last step
  EXPECT_NEAR(static_cast<double>(r.datapoints), 1500, 2);
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

}  // namespace
}  // namespace trainprof::analyze::rules
