#include "collect/nvml/nvml_collector.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/time.h"
#include "collect/collect_test_util.h"
#include "collect/collector_factory.h"

namespace trainprof::collect::nvml {
namespace {

using testing::RecordingSink;
using testing::TestData;
using testing::TickAt;

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::unique_ptr<NvmlCollector> Replay(const std::string& file, int timeout_ms = 1000) {
  setenv("TRAINPROF_NVML_REPLAY", TestData("nvml/" + file).c_str(), 1);
  NvmlCollector::Options options;
  options.library = NVML_REPLAY_LIBRARY;
  options.call_timeout = std::chrono::milliseconds(timeout_ms);
  auto collector = NvmlCollector::Create(options);
  EXPECT_TRUE(collector.ok()) << collector.status().ToString();
  return collector.ok() ? std::move(*collector) : nullptr;
}

TEST(NvmlCollectorTest, TwoGpusThroughTheRealDlopenPath) {
  auto collector = Replay("two_gpus.json");
  ASSERT_NE(collector, nullptr);
  EXPECT_EQ(collector->gpu_count(), 2u);
  model::NodeInfo node;
  collector->Describe(&node);
  ASSERT_EQ(node.gpus.size(), 2u);
  EXPECT_EQ(node.gpus[1].index, 1);
  EXPECT_EQ(node.gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(node.gpus[1].uuid, "GPU-55555555-6666-7777-8888-999999999999");
  EXPECT_EQ(node.gpus[0].memory_total_bytes, static_cast<int64_t>(80 * kGiB));

  RecordingSink sink;
  collector->Sample(TickAt(0), sink);
  for (const char* gpu : {"gpu0", "gpu1"}) {
    EXPECT_DOUBLE_EQ(*sink.Get("gpu_utilization_ratio", gpu), 0.5);
    EXPECT_DOUBLE_EQ(*sink.Get("gpu_memory_utilization_ratio", gpu), 0.2);
    EXPECT_EQ(sink.Get("gpu_memory_used_bytes", gpu), 11 * kGiB);  // init read sample 0
    EXPECT_DOUBLE_EQ(*sink.Get("gpu_memory_used_ratio", gpu), 11.0 / 80);
    EXPECT_EQ(sink.Get("gpu_memory_total_bytes", gpu), 80 * kGiB);
    EXPECT_DOUBLE_EQ(*sink.Get("gpu_power_watts", gpu), 300.0);
    EXPECT_DOUBLE_EQ(*sink.Get("gpu_energy_joules_total", gpu), 1000.0);
    EXPECT_EQ(sink.Get("gpu_temperature_celsius", gpu), 60);
    EXPECT_EQ(sink.Get("gpu_sm_clock_hertz", gpu), 1980e6);
    EXPECT_EQ(sink.Get("gpu_memory_clock_hertz", gpu), 2619e6);
    EXPECT_EQ(sink.Get("gpu_clock_event_reasons", gpu), 0);
    EXPECT_EQ(sink.Get("gpu_throttle_power", gpu), 0);
    EXPECT_EQ(sink.Get("gpu_ecc_corrected_errors_total", gpu), 2);
    EXPECT_EQ(sink.Get("gpu_ecc_uncorrected_errors_total", gpu), 0);
    EXPECT_FALSE(sink.Has("gpu_pcie_transmit_bytes_per_second", gpu));  // needs two readings
  }
  EXPECT_EQ(sink.Get("gpu_process_memory_used_bytes", "gpu0/pid1234"), 4 * kGiB);
  EXPECT_EQ(sink.Get("gpu_process_memory_used_bytes", "gpu1/pid5679"), 2 * kGiB);

  sink.Clear();
  collector->Sample(TickAt(1), sink);
  EXPECT_DOUBLE_EQ(*sink.Get("gpu_utilization_ratio", "gpu1"), 0.6);
  EXPECT_DOUBLE_EQ(*sink.Get("gpu_pcie_transmit_bytes_per_second", "gpu0"), 5e8);
  EXPECT_DOUBLE_EQ(*sink.Get("gpu_pcie_receive_bytes_per_second", "gpu0"), 2.5e8);
  EXPECT_DOUBLE_EQ(*sink.Get("gpu_nvlink_transmit_bytes_per_second", "gpu0"), 1048576.0);
  EXPECT_DOUBLE_EQ(*sink.Get("gpu_nvlink_receive_bytes_per_second", "gpu1"), 2097152.0);
  EXPECT_EQ(sink.Get("gpu_clock_event_reasons", "gpu0"), 4);  // SW power cap
  EXPECT_EQ(sink.Get("gpu_throttle_power", "gpu0"), 1);
  EXPECT_EQ(sink.Get("gpu_throttle_thermal", "gpu0"), 0);
  EXPECT_TRUE(sink.unknown.empty());
  EXPECT_TRUE(sink.counters.empty());
}

// A recording from a real H200 (driver 580.159.04) taken by an independent reader (nvidia-ml-py,
// bench/gpu/nvml_dump.py) during a CUDA training run, replayed through the real dlopen path:
// every value the collector reports is the recorded one in our units, memory leaves out the
// driver's reservation as nvidia-smi does (v2 query), and NVLink, unsupported there, is absent.
TEST(NvmlCollectorTest, RealH200RecordingReplaysExactly) {
  std::ifstream in(TestData("nvml/h200_real.json"));
  const nlohmann::json doc = nlohmann::json::parse(in);
  const nlohmann::json& dev = doc["devices"][0];
  const nlohmann::json& samples = dev["samples"];
  const double reserved = dev["memory_reserved"].get<double>();
  ASSERT_GT(samples.size(), 200u);

  auto collector = Replay("h200_real.json");
  ASSERT_NE(collector, nullptr);
  model::NodeInfo node;
  collector->Describe(&node);
  ASSERT_EQ(node.gpus.size(), 1u);
  EXPECT_EQ(node.gpus[0].name, "NVIDIA H200");
  EXPECT_EQ(node.gpus[0].memory_total_bytes, 150754820096);

  const size_t ticks = samples.size() - 1;  // memory's samples start one call earlier (init)
  double max_util = 0, max_power = 0;
  for (size_t k = 0; k < ticks; ++k) {
    RecordingSink sink;
    collector->Sample(TickAt(static_cast<double>(k)), sink);
    const nlohmann::json& s = samples[k];
    SCOPED_TRACE("tick " + std::to_string(k));
    EXPECT_DOUBLE_EQ(*sink.Get("gpu_utilization_ratio", "gpu0"),
                     s["utilization"][0].get<double>() / 100);
    EXPECT_DOUBLE_EQ(*sink.Get("gpu_power_watts", "gpu0"), s["power_mw"].get<double>() / 1000);
    EXPECT_DOUBLE_EQ(*sink.Get("gpu_energy_joules_total", "gpu0"),
                     s["energy_mj"].get<double>() / 1000);
    EXPECT_EQ(sink.Get("gpu_temperature_celsius", "gpu0"), s["temperature_c"].get<double>());
    EXPECT_EQ(sink.Get("gpu_sm_clock_hertz", "gpu0"), s["clock_sm_mhz"].get<double>() * 1e6);
    EXPECT_EQ(sink.Get("gpu_clock_event_reasons", "gpu0"), s["clock_event_reasons"].get<double>());
    const double used_v1 = samples[k + 1]["memory"][0].get<double>();
    EXPECT_EQ(sink.Get("gpu_memory_used_bytes", "gpu0"), used_v1 - reserved);
    EXPECT_FALSE(sink.Has("gpu_nvlink_transmit_bytes_per_second", "gpu0"));
    if (k > 0) {  // rates from the cumulative PCIe counters, one second apart here
      const double tx =
          samples[k]["fields"]["197"].get<double>() - samples[k - 1]["fields"]["197"].get<double>();
      EXPECT_DOUBLE_EQ(*sink.Get("gpu_pcie_transmit_bytes_per_second", "gpu0"), tx);
    }
    max_util = std::max(max_util, *sink.Get("gpu_utilization_ratio", "gpu0"));
    max_power = std::max(max_power, *sink.Get("gpu_power_watts", "gpu0"));
  }
  EXPECT_DOUBLE_EQ(max_util, 0.84);  // the training burst
  EXPECT_NEAR(max_power, 454.576, 1e-9);
}

TEST(NvmlCollectorTest, UnsupportedFieldsAreAbsentNeverZero) {
  auto collector = Replay("unsupported.json");
  ASSERT_NE(collector, nullptr);
  RecordingSink sink;
  collector->Sample(TickAt(0), sink);
  collector->Sample(TickAt(1), sink);
  EXPECT_DOUBLE_EQ(*sink.Get("gpu_utilization_ratio", "gpu0"), 0.3);
  EXPECT_DOUBLE_EQ(*sink.Get("gpu_power_watts", "gpu0"), 70.0);
  for (const char* absent : {"gpu_energy_joules_total", "gpu_ecc_corrected_errors_total",
                             "gpu_pcie_transmit_bytes_per_second", "gpu_clock_event_reasons",
                             "gpu_nvlink_receive_bytes_per_second"}) {
    EXPECT_FALSE(sink.Has(absent, "gpu0")) << absent;
  }
  // The memory-only GPU: memory and nothing else.
  EXPECT_EQ(sink.Get("gpu_memory_total_bytes", "gpu1"), 8 * kGiB);
  EXPECT_FALSE(sink.Has("gpu_utilization_ratio", "gpu1"));
  EXPECT_FALSE(sink.Has("gpu_power_watts", "gpu1"));
  EXPECT_FALSE(sink.Has("gpu_temperature_celsius", "gpu1"));
  // Not supported is not an error.
  EXPECT_TRUE(sink.counters.empty());
}

TEST(NvmlCollectorTest, GpuFallingOffTheBusStopsOnlyThatGpu) {
  auto collector = Replay("lost_gpu.json");
  ASSERT_NE(collector, nullptr);
  RecordingSink sink;
  collector->Sample(TickAt(0), sink);
  EXPECT_TRUE(sink.Has("gpu_power_watts", "gpu1"));
  sink.Clear();
  collector->Sample(TickAt(1), sink);  // gpu1 is lost during this tick
  EXPECT_EQ(sink.Counter("gpu_lost"), 1);
  EXPECT_FALSE(sink.Has("gpu_power_watts", "gpu1"));
  EXPECT_TRUE(sink.Has("gpu_power_watts", "gpu0"));
  sink.Clear();
  collector->Sample(TickAt(2), sink);
  EXPECT_EQ(sink.Counter("gpu_lost"), 0);  // counted once
  EXPECT_FALSE(sink.Has("gpu_utilization_ratio", "gpu1"));
  EXPECT_DOUBLE_EQ(*sink.Get("gpu_utilization_ratio", "gpu0"), 0.7);
  model::NodeInfo node;
  collector->Describe(&node);
  EXPECT_EQ(node.gpus.size(), 2u);  // still described: it was part of the node
}

TEST(NvmlCollectorTest, HangingCallIsTimeBoxed) {
  auto collector = Replay("hang.json", /*timeout_ms=*/100);
  ASSERT_NE(collector, nullptr);
  RecordingSink sink;
  collector->Sample(TickAt(0), sink);  // call 0 does not hang
  EXPECT_TRUE(sink.Has("gpu_utilization_ratio", "gpu0"));
  sink.Clear();
  int64_t start = MonotonicNowNs();
  collector->Sample(TickAt(1), sink);  // hangs 700 ms inside NVML
  int64_t waited = MonotonicNowNs() - start;
  EXPECT_LT(waited, 400 * kNanosPerMilli);
  EXPECT_EQ(sink.Counter("nvml_timeouts"), 1);
  EXPECT_EQ(sink.adds, 0);
  // The worker is still stuck: the next tick returns at once, counted again.
  start = MonotonicNowNs();
  collector->Sample(TickAt(2), sink);
  EXPECT_LT(MonotonicNowNs() - start, 50 * kNanosPerMilli);
  EXPECT_EQ(sink.Counter("nvml_timeouts"), 2);
  // Destroying the collector while the worker is stuck must not block either.
  start = MonotonicNowNs();
  collector.reset();
  EXPECT_LT(MonotonicNowNs() - start, 50 * kNanosPerMilli);
}

TEST(NvmlCollectorTest, MigInstancesReportTheirMemory) {
  auto collector = Replay("mig.json");
  ASSERT_NE(collector, nullptr);
  RecordingSink sink;
  collector->Sample(TickAt(0), sink);
  EXPECT_EQ(sink.Get("gpu_memory_used_bytes", "gpu0/mig0"), 5 * kGiB);
  EXPECT_EQ(sink.Get("gpu_memory_total_bytes", "gpu0/mig1"), 20 * kGiB);
  EXPECT_EQ(sink.Get("gpu_memory_used_bytes", "gpu0"), 20 * kGiB);
  EXPECT_FALSE(sink.Has("gpu_utilization_ratio", "gpu0"));  // not supported under MIG
}

TEST(NvmlCollectorTest, MissingLibraryIsAClearNote) {
  NvmlCollector::Options options;
  options.library = "/nonexistent/libnvidia-ml.so.1";
  auto collector = NvmlCollector::Create(options);
  ASSERT_FALSE(collector.ok());
  EXPECT_EQ(collector.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(collector.status().message().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
}

TEST(NvmlCollectorTest, NotAnNvmlLibrary) {
  NvmlCollector::Options options;
  options.library = "libz.so.1";
  auto collector = NvmlCollector::Create(options);
  ASSERT_FALSE(collector.ok());
  EXPECT_NE(collector.status().message().find("not an NVML library"), std::string::npos);
}

TEST(NvmlCollectorTest, DriverNotLoaded) {
  setenv("TRAINPROF_NVML_REPLAY", TestData("nvml/driver_not_loaded.json").c_str(), 1);
  NvmlCollector::Options options;
  options.library = NVML_REPLAY_LIBRARY;
  auto collector = NvmlCollector::Create(options);
  ASSERT_FALSE(collector.ok());
  EXPECT_NE(collector.status().message().find("nvmlInit failed"), std::string::npos);
}

TEST(CollectorFactoryTest, NoNvmlMeansNoGpuMetricsAndOneNote) {
  CollectorContext ctx;
  ctx.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  ctx.root_pids = {getpid()};
  ctx.fs_paths = {"/"};
  CollectorSet set = BuildCollectors(ctx);
  std::vector<std::string_view> names;
  for (const auto& c : set.collectors) names.push_back(c->name());
  EXPECT_EQ(std::count(names.begin(), names.end(), "nvml"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "process_tree"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "filesystem"), 1);
  bool nvml_note = false;
  for (const auto& note : set.notes) {
    nvml_note |= note.find("cannot load NVML") != std::string::npos &&
                 note.find("no GPU metrics") != std::string::npos;
  }
  EXPECT_TRUE(nvml_note);
  // Everything else still samples.
  RecordingSink sink;
  for (auto& c : set.collectors) c->Sample(TickAt(0), sink);
  usleep(50 * 1000);  // let /proc/stat's jiffies move (10 ms each)
  for (auto& c : set.collectors) c->Sample(TickAt(1), sink);
  EXPECT_TRUE(sink.Has("memory_total_bytes"));
  EXPECT_TRUE(sink.Has("cpu_utilization_ratio", "total"));
  EXPECT_TRUE(sink.Has("process_cpu_utilization_ratio", "tree"));
  EXPECT_TRUE(sink.unknown.empty());
}

TEST(CollectorFactoryTest, WithReplayedGpus) {
  setenv("TRAINPROF_NVML_REPLAY", TestData("nvml/two_gpus.json").c_str(), 1);
  CollectorContext ctx;
  ctx.nvml_library = NVML_REPLAY_LIBRARY;
  CollectorSet set = BuildCollectors(ctx);
  model::NodeInfo node;
  for (const auto& c : set.collectors) c->Describe(&node);
  EXPECT_EQ(node.gpus.size(), 2u);
  ctx.gpus = false;  // --no-gpu
  CollectorSet without = BuildCollectors(ctx);
  for (const auto& c : without.collectors) EXPECT_NE(c->name(), "nvml");
}

}  // namespace
}  // namespace trainprof::collect::nvml
