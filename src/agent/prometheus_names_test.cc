// What /metrics adds for issue 17: counters accumulated from rates and shares, the job's step
// figures, and the dcgm-exporter / node_exporter names. Inputs are planted with known truth.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "agent/latest_values.h"
#include "agent/prometheus_exporter.h"
#include "agent/step_metrics.h"

namespace trainprof::agent {
namespace {

constexpr int64_t kT0 = 1'764'512'345'000'000'000;
constexpr int64_t kMs = 1'000'000;

constexpr int64_t kMono0 = 86'400'000'000'000;  // CLOCK_MONOTONIC at kT0 (a day of uptime)

// A tick at wall time t; its monotonic reading is `mono`, by default in step with t.
LatestSnapshot Tick(int64_t t, std::vector<MetricValue> values, int64_t mono = -1) {
  LatestSnapshot s;
  s.tick_wall_ns = t;
  s.tick_mono_ns = mono >= 0 ? mono : kMono0 + (t - kT0);
  s.values = std::move(values);
  return s;
}

TEST(IntegratedCountersTest, RatesAndSharesBecomeTotals) {
  LatestValues latest;
  // 1000 B/s for 0.5 s then 3000 B/s for 0.25 s: 500 + 750 bytes after the first sample (its
  // rate covers time before the recording and is not counted).
  latest.Publish(Tick(kT0, {{"network_receive_bytes_per_second", "eth0", 7777},
                            {"cpu_idle_ratio", "cpu0", 0.5},
                            {"cpu_idle_ratio", "total", 0.5},
                            {"cpu_utilization_ratio", "cpu0", 0.5}}));
  latest.Publish(Tick(kT0 + 500 * kMs, {{"network_receive_bytes_per_second", "eth0", 1000},
                                        {"cpu_idle_ratio", "cpu0", 0.25},
                                        {"cpu_idle_ratio", "total", 0.25},
                                        {"cpu_utilization_ratio", "cpu0", 0.75}}));
  // A tick without the network series (carried, not counted again)...
  latest.Publish(Tick(kT0 + 600 * kMs, {{"cpu_idle_ratio", "cpu0", 1.0}}));
  // ... then it comes back: its rate covers the 250 ms since its previous value.
  latest.Publish(Tick(kT0 + 750 * kMs, {{"network_receive_bytes_per_second", "eth0", 3000}}));
  LatestSnapshot s = latest.Get();
  EXPECT_DOUBLE_EQ((s.integrated[{"network_receive_bytes_total", "eth0"}]), 500 + 750);
  EXPECT_DOUBLE_EQ((s.integrated[{"cpu_idle_seconds_total", "cpu0"}]), 0.25 * 0.5 + 1.0 * 0.1);
  EXPECT_DOUBLE_EQ((s.integrated[{"cpu_busy_seconds_total", "cpu0"}]), 0.75 * 0.5);
  // The node-wide mean over cores is not a core's seconds.
  EXPECT_EQ(s.integrated.count({"cpu_idle_seconds_total", "total"}), 0u);
  EXPECT_EQ(IntegratedCounterName("gpu_pcie_receive_bytes_per_second", "gpu0"),
            "gpu_pcie_receive_bytes_total");
  EXPECT_EQ(IntegratedCounterName("gpu_utilization_ratio", "gpu0"), "");
}

// The rates were computed over monotonic intervals; the wall clock stepped back 3 s, then forward
// 10 s, and was slewed 1 % slow. The totals follow the monotonic intervals: the bytes the kernel
// counted, nothing lost or counted twice.
TEST(IntegratedCountersTest, AStepOrSlewOfTheWallClockDoesNotChangeTheTotals) {
  LatestValues latest;
  latest.Publish(Tick(kT0, {{"network_receive_bytes_per_second", "eth0", 1}}, kMono0));
  latest.Publish(Tick(kT0 - 3'000 * kMs, {{"network_receive_bytes_per_second", "eth0", 1000}},
                      kMono0 + 100 * kMs));
  latest.Publish(Tick(kT0 + 10'000 * kMs, {{"network_receive_bytes_per_second", "eth0", 2000}},
                      kMono0 + 200 * kMs));
  latest.Publish(
      Tick(kT0 + 10'099 * kMs,
           {{"network_receive_bytes_per_second", "eth0", 4000}, {"cpu_idle_ratio", "cpu0", 0.5}},
           kMono0 + 300 * kMs));
  LatestSnapshot s = latest.Get();
  EXPECT_DOUBLE_EQ((s.integrated[{"network_receive_bytes_total", "eth0"}]), 100 + 200 + 400);
  // A series not read at the next tick, after the wall clock jumped 20 s, is carried: its value
  // is 100 ms old, not 20 s.
  latest.Publish(Tick(kT0 + 30'000 * kMs, {{"cpu_idle_ratio", "cpu0", 0.25}}, kMono0 + 400 * kMs));
  s = latest.Get();
  ASSERT_EQ(s.values.size(), 2u);
  EXPECT_EQ(s.values[1].metric, "network_receive_bytes_per_second");
  EXPECT_EQ(s.values[1].value, 4000);
}

TEST(StepMetricsTest, CountsHistogramDataWaitAndThroughput) {
  StepMetrics m;
  // 21 steps of 40 ms every 100 ms, each with 10 ms of data wait; then one eval step.
  for (int i = 0; i <= 20; ++i) {
    const int64_t start = kT0 + i * 100 * kMs;
    m.AddDataWait("train", start, 10 * kMs);
    m.AddStep("train", start, 40 * kMs);
  }
  m.AddStep("eval", kT0, 2'000 * kMs);
  auto got = m.Get();
  const StepModeStats& t = got.at("train");
  EXPECT_EQ(t.steps, 21);
  EXPECT_NEAR(t.duration_sum_s, 21 * 0.04, 1e-12);
  EXPECT_NEAR(t.data_wait_sum_s, 21 * 0.01, 1e-12);
  const auto& bounds = StepDurationBuckets();
  for (size_t i = 0; i < bounds.size(); ++i) {
    EXPECT_EQ(t.bucket_counts[i], bounds[i] >= 0.04 ? 21 : 0) << bounds[i];
  }
  EXPECT_NEAR(t.throughput_steps_per_second, 10.0, 1e-9);  // one step per 100 ms
  EXPECT_NEAR(t.data_wait_ratio, 0.25, 1e-9);
  EXPECT_EQ(t.last_end_ns, kT0 + 2'000 * kMs + 40 * kMs);
  const StepModeStats& e = got.at("eval");
  EXPECT_EQ(e.steps, 1);
  EXPECT_TRUE(std::isnan(e.throughput_steps_per_second));
  // Only the last 10 s count for throughput: 101 more steps at 5 per second.
  for (int i = 1; i <= 101; ++i) m.AddStep("train", kT0 + 2'000 * kMs + i * 200 * kMs, kMs);
  EXPECT_NEAR(m.Get().at("train").throughput_steps_per_second, 5.0, 1e-9);
}

model::NodeInfo GpuNode() {
  model::NodeInfo node;
  node.node = "host-a";
  model::GpuInfo gpu;
  gpu.index = 3;
  gpu.name = "NVIDIA H200";
  gpu.uuid = "GPU-abc";
  node.gpus.push_back(gpu);
  return node;
}

TEST(PrometheusNamesTest, DcgmNamesUnitsAndLabels) {
  LatestSnapshot s = Tick(kT0, {{"gpu_utilization_ratio", "gpu3", 0.875},
                                {"gpu_memory_used_bytes", "gpu3", 3.0 * (1 << 20)},
                                {"gpu_sm_clock_hertz", "gpu3", 1'980'000'000},
                                {"gpu_energy_joules_total", "gpu3", 2.5},
                                {"gpu_memory_used_ratio", "gpu3", 0.5}});
  PrometheusNaming dcgm;
  dcgm.dcgm = true;
  const std::string text = RenderPrometheusText(s, GpuNode(), dcgm);
  const std::string labels =
      "{gpu=\"3\",UUID=\"GPU-abc\",device=\"nvidia3\",modelName=\"NVIDIA H200\","
      "Hostname=\"host-a\"}";
  EXPECT_NE(
      text.find("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL" + labels + " 87.5\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_FB_USED" + labels + " 3\n"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_SM_CLOCK" + labels + " 1980\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
                      "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" +
                      labels + " 2500\n"),
            std::string::npos);
  // Renamed, not served twice; no DCGM counterpart: the trainprof name stays.
  EXPECT_EQ(text.find("trainprof_gpu_utilization_ratio"), std::string::npos);
  EXPECT_NE(text.find("trainprof_gpu_memory_used_ratio{"), std::string::npos);
  // Without the option nothing changes.
  EXPECT_EQ(RenderPrometheusText(s, GpuNode()).find("DCGM_"), std::string::npos);
}

TEST(PrometheusNamesTest, NodeExporterNames) {
  LatestSnapshot s = Tick(kT0, {{"memory_total_bytes", "", 16e9},
                                {"memory_used_bytes", "", 10e9},
                                {"load_average_1m", "", 1.5},
                                {"network_receive_errors_total", "eth0", 4},
                                {"network_receive_errors_total", "total", 4}});
  s.integrated[{"cpu_idle_seconds_total", "cpu1"}] = 12.5;
  s.integrated[{"cpu_busy_seconds_total", "cpu1"}] = 2;
  s.integrated[{"network_transmit_bytes_total", "eth0"}] = 4096;
  PrometheusNaming naming;
  naming.node_exporter = true;
  const std::string text = RenderPrometheusText(s, GpuNode(), naming);
  EXPECT_NE(text.find("node_memory_MemTotal_bytes 16000000000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("node_memory_MemAvailable_bytes 6000000000\n"), std::string::npos);
  EXPECT_NE(text.find("node_load1 1.5\n"), std::string::npos);
  EXPECT_NE(text.find("node_network_receive_errs_total{device=\"eth0\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("trainprof_network_receive_errors_total{node=\"host-a\",device=\"total\"}"),
            std::string::npos);
  EXPECT_NE(text.find("node_cpu_seconds_total{cpu=\"1\",mode=\"idle\"} 12.5\n"), std::string::npos);
  EXPECT_NE(text.find("trainprof_cpu_busy_seconds_total{node=\"host-a\",device=\"cpu1\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("node_network_transmit_bytes_total{device=\"eth0\"} 4096\n"),
            std::string::npos);
  // memory_used_bytes has no node_exporter twin and stays.
  EXPECT_NE(text.find("trainprof_memory_used_bytes{"), std::string::npos);
}

TEST(PrometheusNamesTest, ParsesTheOption) {
  EXPECT_FALSE(ParsePrometheusNames("trainprof")->dcgm);
  auto both = ParsePrometheusNames("dcgm,node_exporter");
  ASSERT_TRUE(both.ok());
  EXPECT_TRUE(both->dcgm && both->node_exporter);
  EXPECT_TRUE(ParsePrometheusNames("all")->node_exporter);
  auto bad = ParsePrometheusNames("dcgm,datadog");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'datadog'"), std::string::npos);
}

}  // namespace
}  // namespace trainprof::agent
