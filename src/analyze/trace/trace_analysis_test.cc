#include "analyze/trace/trace_analysis.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "importers/common/test_util.h"
#include "importers/kineto/kineto_importer.h"
#include "store/run_reader.h"

namespace trainprof::analyze::trace {
namespace {

namespace it = importers::testing;

// A run imported from Kineto files, with its rank traces (kept alive together).
struct Run {
  std::unique_ptr<store::RunReader> reader;
  store::EventTable events;
  std::vector<RankTrace> ranks;
};

std::unique_ptr<Run> ImportRun(const std::vector<std::string>& files) {
  auto run = std::make_unique<Run>();
  importers::kineto::KinetoImportOptions o;
  o.traces = files;
  o.out = it::TempDir() + "/run";
  auto r = importers::kineto::ImportKineto(o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  auto reader = store::RunReader::Open(o.out);
  EXPECT_TRUE(reader.ok());
  run->reader = std::move(reader).value();
  auto events = run->reader->Events({});
  EXPECT_TRUE(events.ok());
  run->events = std::move(events).value();
  run->ranks = SplitByRank(run->events);
  return run;
}

// One synthetic Kineto trace: `events` is the traceEvents body.
std::string WriteTrace(const std::string& events, int rank = 0) {
  std::string path = it::TempDir() + "/trace.json";
  it::WriteFile(path, "{\"distributedInfo\": {\"rank\": " + std::to_string(rank) +
                          "}, \"traceEvents\": [" + events + "]}");
  return path;
}

std::string Kernel(const std::string& name, int ts, int dur, int corr, const char* cat = "kernel",
                   int stream = 7) {
  return "{\"ph\":\"X\",\"cat\":\"" + std::string(cat) + "\",\"name\":\"" + name +
         "\",\"pid\":0,\"tid\":" + std::to_string(stream) + ",\"ts\":" + std::to_string(ts) +
         ",\"dur\":" + std::to_string(dur) + ",\"args\":{\"correlation\":" + std::to_string(corr) +
         ",\"stream\":" + std::to_string(stream) + "}}";
}

std::string Launch(int ts, int dur, int corr) {
  return "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,"
         "\"tid\":1,\"ts\":" +
         std::to_string(ts) + ",\"dur\":" + std::to_string(dur) +
         ",\"args\":{\"correlation\":" + std::to_string(corr) + "}}";
}

// TensorBoard profiler's overview rows for the tb_plugin sample traces, from the plugin's own
// test expectations (result_check_file.txt: line 1 = num_workers_0, line 6 = num_workers_4).
void CheckAgainstTensorBoard(const std::string& trace, int line_no) {
  auto run = ImportRun({it::SharedData("traces/kineto/tb_plugin/samples/" + trace)});
  ASSERT_EQ(run->ranks.size(), 1u);
  RankAnalysis a = AnalyzeRank(run->ranks[0], {});
  std::ifstream f(it::SharedData("traces/kineto/tb_plugin/test/result_check_file.txt"));
  std::string line;
  for (int i = 0; i < line_no; ++i) std::getline(f, line);
  auto golden = nlohmann::json::parse(line);
  const auto& rows = golden["steps"]["rows"];
  ASSERT_EQ(rows.size(), a.steps.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const StepBreakdown& s = a.steps[i];
    EXPECT_EQ(row[0].get<std::string>(), std::to_string(s.step));
    // Columns: step, Kernel, tip, Memcpy, tip, Memset, tip, Runtime, tip, DataLoader, tip,
    // CPU Exec, tip, Other, tip (integer µs, rounded).
    int64_t ours[7] = {s.kernel_ns,     s.memcpy_ns,   s.memset_ns, s.runtime_ns,
                       s.dataloader_ns, s.cpu_exec_ns, s.other_ns};
    for (int k = 0; k < 7; ++k) {
      EXPECT_NEAR(static_cast<double>(ours[k]) / 1000.0, row[1 + 2 * k].get<double>(), 1.0)
          << "step " << s.step << " column " << k;
    }
    EXPECT_EQ(s.kernel_ns + s.memcpy_ns + s.memset_ns + s.communication_ns + s.runtime_ns +
                  s.dataloader_ns + s.cpu_exec_ns + s.other_ns,
              s.step_ns);
  }
  const auto& perf = golden["performance"][0];
  EXPECT_NEAR(static_cast<double>(a.step_average->step_ns) / 1000.0, perf["value"].get<double>(),
              1.0);
}

TEST(TraceAnalysisTest, StepBreakdownMatchesTensorBoardNumWorkers0) {
  CheckAgainstTensorBoard("resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz", 1);
}

TEST(TraceAnalysisTest, StepBreakdownMatchesTensorBoardNumWorkers4) {
  CheckAgainstTensorBoard("resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz", 6);
}

TEST(TraceAnalysisTest, RecommendsWorkersWhenDataLoadingDominates) {
  auto run = ImportRun({it::SharedData(
      "traces/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace."
      "json.gz")});
  RankAnalysis a = AnalyzeRank(run->ranks[0], {});
  ASSERT_FALSE(a.recommendations.empty());
  // TensorBoard says "33.4% of the step time is in DataLoader" for this trace.
  EXPECT_NE(a.recommendations[0].find("33.4% of the step time is in DataLoader"), std::string::npos)
      << a.recommendations[0];
}

// HTA's tests/test_trace_analysis.py::test_mtia_temporal_breakdown golden values. HTA drops
// events after the last profiler step's start; we keep the whole trace, so the span is
// 0.06% longer and the idle/non-compute shares differ by < 0.2 points (docs/trace-analysis.md).
TEST(TraceAnalysisTest, TemporalBreakdownCloseToHtaGoldenOnMtia) {
  auto run = ImportRun({it::SharedData(
      "traces/HolisticTraceAnalysis/tests/data/mtia_trace_single_rank/mtia_rank_0.json.gz")});
  ASSERT_EQ(run->ranks.size(), 1u);
  RankAnalysis a = AnalyzeRank(run->ranks[0], {});
  ASSERT_TRUE(a.temporal.has_value());
  EXPECT_NEAR(a.temporal->compute_pct, 7305596.0 * 100 / 13328347, 0.05);
  EXPECT_NEAR(a.temporal->idle_pct, 5648827.0 * 100 / 13328347, 0.2);
  EXPECT_NEAR(a.temporal->non_compute_pct, 373924.0 * 100 / 13328347, 0.2);
  EXPECT_NEAR(static_cast<double>(a.temporal->kernel_ns) / 1000.0, 13328347, 13328347 * 0.001);
  EXPECT_NEAR(a.temporal->idle_pct + a.temporal->compute_pct + a.temporal->non_compute_pct, 100.0,
              0.02);  // each share is rounded to 2 decimals, like HTA
}

TEST(TraceAnalysisTest, IdleCategoriesFollowLaunchTimesAndThreshold) {
  // K1 [0,10) launched at 0; K2 [20,30) launched at 5 (<K1 end): 10 µs gap, kernel_wait;
  // K3 [50,60) launched at 40 (>K2 end): host_wait 20 µs; K4 [160,170) launched at 45:
  // 100 µs gap, other.
  std::string path =
      WriteTrace(Launch(1000000000, 2, 1) + "," + Kernel("k1", 1000000000, 10, 1) + "," +
                 Launch(1000000005, 2, 2) + "," + Kernel("k2", 1000000020, 10, 2) + "," +
                 Launch(1000000040, 2, 3) + "," + Kernel("k3", 1000000050, 10, 3) + "," +
                 Launch(1000000045, 2, 4) + "," + Kernel("k4", 1000000160, 10, 4));
  auto run = ImportRun({path});
  ASSERT_EQ(run->ranks.size(), 1u);
  RankAnalysis a = AnalyzeRank(run->ranks[0], {});
  ASSERT_EQ(a.idle.size(), 3u);
  EXPECT_EQ(a.idle[0].category, "host_wait");
  EXPECT_EQ(a.idle[0].time_ns, 20000);
  EXPECT_EQ(a.idle[1].category, "kernel_wait");
  EXPECT_EQ(a.idle[1].time_ns, 10000);
  EXPECT_EQ(a.idle[2].category, "other");
  EXPECT_EQ(a.idle[2].time_ns, 100000);
  EXPECT_NEAR(a.idle[2].ratio, 100.0 / 130.0, 1e-4);
  // The temporal idle time is the same 130 µs of the 170 µs span.
  EXPECT_EQ(a.temporal->idle_ns, 130000);
  EXPECT_EQ(a.temporal->kernel_ns, 170000);
  EXPECT_EQ(a.launch.correlated, 4);
  EXPECT_EQ(a.launch.launch_delay_max_ns, 115000);

  // The threshold is in explicit units: at 5 µs the 10 µs gap is no longer kernel_wait.
  AnalysisOptions strict;
  strict.kernel_wait_threshold_ns = 5000;
  RankAnalysis b = AnalyzeRank(run->ranks[0], strict);
  EXPECT_EQ(b.idle[1].time_ns, 0);
  EXPECT_EQ(b.idle[2].time_ns, 110000);
}

TEST(TraceAnalysisTest, CudaSyncIsNotBusyUnlessHtaCompat) {
  std::string path = WriteTrace(Kernel("k1", 1000000000, 10, 1) + "," +
                                Kernel("cudaStreamSynchronize", 1000000010, 80, 2, "cuda_sync") +
                                "," + Kernel("k2", 1000000090, 10, 3));
  auto run = ImportRun({path});
  RankAnalysis a = AnalyzeRank(run->ranks[0], {});
  EXPECT_EQ(a.temporal->idle_ns, 80000);  // waiting in a sync is not GPU work
  EXPECT_EQ(a.temporal->compute_ns, 20000);
  AnalysisOptions hta;
  hta.hta_count_sync_as_busy = true;
  RankAnalysis b = AnalyzeRank(run->ranks[0], hta);
  EXPECT_EQ(b.temporal->idle_ns, 0);  // HTA: the sync counts as a busy computation kernel
  EXPECT_EQ(b.temporal->compute_ns, 100000);
}

TEST(TraceAnalysisTest, NcclDevKernelsAreCommunication) {
  std::string path =
      WriteTrace(Kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                        1000000000, 100, 1, "kernel", 20) +
                 "," + Kernel("gemm", 1000000050, 100, 2) + "," +
                 Kernel("Memcpy HtoD (Pageable -> Device)", 1000000200, 10, 3, "gpu_memcpy"));
  auto run = ImportRun({path});
  RankAnalysis a = AnalyzeRank(run->ranks[0], {});
  ASSERT_TRUE(a.comm_comp_overlap_pct.has_value());
  EXPECT_DOUBLE_EQ(*a.comm_comp_overlap_pct, 50.0);
  std::map<std::string, int64_t> types;
  for (const auto& k : a.kernel_types) types[k.type] = k.time_ns;
  EXPECT_EQ(types["COMMUNICATION"], 50000);
  EXPECT_EQ(types["COMPUTATION overlapping COMMUNICATION"], 50000);
  EXPECT_EQ(types["COMPUTATION"], 50000);
  EXPECT_EQ(types["MEMORY"], 10000);
  EXPECT_EQ(a.temporal->non_compute_ns, 60000);  // comm alone + memory

  AnalysisOptions hta;
  hta.hta_comm_by_ncclkernel_only = true;  // old HTA: only "ncclKernel" names
  RankAnalysis b = AnalyzeRank(run->ranks[0], hta);
  EXPECT_FALSE(b.comm_comp_overlap_pct.has_value());
}

// The kernel-type sweep with its truth by hand: three types overlapping in a chain, an empty
// kernel (its edges in one order in its own list, the other after sorting) and a kernel that
// touches the previous one of its type. In microseconds from the trace's start:
// computation [0,10) and an empty one at 30, communication [5,15), memory [12,20) and
// [20,30) touching, and [30,40).
TEST(TraceAnalysisTest, KernelTypeSweepOverChainedOverlaps) {
  constexpr int kT = 1000000000;
  std::string path =
      WriteTrace(Kernel("gemm", kT, 10, 1) + "," +
                 Kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", kT + 5, 10, 2, "kernel", 20) +
                 "," + Kernel("Memcpy HtoD (Pageable -> Device)", kT + 12, 8, 3, "gpu_memcpy", 9) +
                 "," + Kernel("Memset (Device)", kT + 20, 10, 4, "gpu_memset", 9) + "," +
                 Kernel("empty", kT + 30, 0, 5) + "," +
                 Kernel("Memcpy DtoH (Device -> Pageable)", kT + 30, 10, 6, "gpu_memcpy", 9));
  auto run = ImportRun({path});
  ASSERT_EQ(run->ranks.size(), 1u);
  RankAnalysis a = AnalyzeRank(run->ranks[0], {});
  std::map<std::string, int64_t> types;
  for (const auto& k : a.kernel_types) types[k.type] = k.time_ns;
  EXPECT_EQ(types.size(), 5u);
  EXPECT_EQ(types["COMPUTATION"], 5000);
  EXPECT_EQ(types["COMPUTATION overlapping COMMUNICATION"], 5000);
  EXPECT_EQ(types["COMMUNICATION"], 2000);
  EXPECT_EQ(types["COMMUNICATION overlapping MEMORY"], 3000);
  EXPECT_EQ(types["MEMORY"], 25000);
  ASSERT_TRUE(a.temporal.has_value());
  EXPECT_EQ(a.temporal->kernel_ns, 40000);
  EXPECT_EQ(a.temporal->idle_ns, 0);
}

// Kernels find their launch by correlation id among many (ids spread over the whole int range
// so that they collide in any small table), and an id launched twice counts its last launch.
// Truth by construction: kernel i starts 3 us after its (last) launch; 4 000 kernels, one id
// launched twice (first 20 us earlier, which would make that kernel's delay 23 us), one kernel
// whose id was never launched.
TEST(TraceAnalysisTest, LaunchesFoundByCorrelationAmongMany) {
  constexpr int kKernels = 4000;
  std::string events;
  for (int i = 0; i < kKernels; ++i) {
    const int ts = 1000000000 + i * 10;
    const int corr = i == kKernels - 1 ? 2147483000 : (i * 524287) % 2147483000;  // spread out
    if (i == 7) events += Launch(ts - 20, 1, corr) + ",";
    if (i != kKernels - 1) events += Launch(ts, 1, corr) + ",";
    events += Kernel("k", ts + 3, 2, corr) + (i + 1 < kKernels ? "," : "");
  }
  auto run = ImportRun({WriteTrace(events)});
  ASSERT_EQ(run->ranks.size(), 1u);
  RankAnalysis a = AnalyzeRank(run->ranks[0], {});
  EXPECT_EQ(a.launch.kernels, kKernels);
  EXPECT_EQ(a.launch.correlated, kKernels - 1);
  EXPECT_EQ(a.launch.launch_delay_p50_ns, 3000);
  EXPECT_EQ(a.launch.launch_delay_max_ns, 3000);
}

TEST(TraceAnalysisTest, LaunchDelayPercentilesInterpolateAsNumpyDoes) {
  // Four kernels launched 1, 2, 4 and 8 us before they start: numpy.percentile gives the
  // median 3 us (the mean of the middle two; nearest rank gave 4) and p90 6.8 us.
  const int delays_us[] = {1, 2, 4, 8};
  std::string events;
  for (int i = 0; i < 4; ++i) {
    const int ts = 1000000000 + i * 100;
    events += Launch(ts, 1, i + 1) + "," + Kernel("k", ts + delays_us[i], 2, i + 1) +
              (i + 1 < 4 ? "," : "");
  }
  auto run = ImportRun({WriteTrace(events)});
  ASSERT_EQ(run->ranks.size(), 1u);
  RankAnalysis a = AnalyzeRank(run->ranks[0], {});
  ASSERT_EQ(a.launch.correlated, 4);
  EXPECT_EQ(a.launch.launch_delay_p50_ns, 3000);
  EXPECT_EQ(a.launch.launch_delay_p90_ns, 6800);
  EXPECT_EQ(a.launch.launch_delay_max_ns, 8000);
}

TEST(TraceAnalysisTest, StragglersAndDiff) {
  auto step = [](int rank, int ts, int dur) {
    return "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#" +
           std::to_string(rank) + "\",\"pid\":1,\"tid\":1,\"ts\":" + std::to_string(ts) +
           ",\"dur\":" + std::to_string(dur) + "}";
  };
  std::string r0 =
      WriteTrace(step(1, 1000000000, 100) + "," + Kernel("gemm", 1000000000, 50, 1), 0);
  std::string r1 =
      WriteTrace(step(1, 1000000000, 100) + "," + Kernel("gemm", 1000000000, 50, 1), 1);
  std::string r2 =
      WriteTrace(step(1, 1000000000, 150) + "," + Kernel("gemm", 1000000000, 90, 1), 2);
  auto run = ImportRun({r0, r1, r2});
  ASSERT_EQ(run->ranks.size(), 3u);
  std::vector<RankAnalysis> all;
  for (const auto& t : run->ranks) all.push_back(AnalyzeRank(t, {}));
  auto s = FindStragglers(all);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].label, "2");
  EXPECT_DOUBLE_EQ(s[0].excess_pct, 50.0);

  // Synchronous data parallelism: both ranks' steps last 100 us, but rank 0 waits 40 us in the
  // all-reduce for rank 1, which computes 95 us. Rank 1 is the straggler, not the waiting rank.
  const char* nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  std::string w0 = WriteTrace(step(1, 1000000000, 100) + "," + Kernel("gemm", 1000000000, 55, 1) +
                                  "," + Kernel(nccl, 1000000057, 40, 2),
                              0);
  std::string w1 = WriteTrace(step(1, 1000000000, 100) + "," + Kernel("gemm", 1000000000, 93, 1) +
                                  "," + Kernel(nccl, 1000000094, 5, 2),
                              1);
  auto ddp = ImportRun({w0, w1});
  std::vector<RankAnalysis> pair;
  for (const auto& t : ddp->ranks) pair.push_back(AnalyzeRank(t, {}));
  ASSERT_EQ(pair[0].step_average->step_ns, pair[1].step_average->step_ns);
  auto blamed = FindStragglers(pair);
  ASSERT_EQ(blamed.size(), 1u);
  EXPECT_EQ(blamed[0].label, "1");
  EXPECT_EQ(blamed[0].metric, "own_step_ns");
  EXPECT_DOUBLE_EQ(blamed[0].value, 95000.0);

  // A recorded multi-node run also holds a timeline per node without a rank (the recorder's
  // phase spans: no steps, no GPU). It takes no part and does not switch the comparison off
  // (it did: across two hosts `analyze` named no straggler).
  RankAnalysis node_timeline;
  node_timeline.label = "host-a";
  node_timeline.cpu_spans = 3;
  std::vector<RankAnalysis> recorded = {node_timeline, pair[0], pair[1]};
  auto named = FindStragglers(recorded);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].label, "1");
  EXPECT_DOUBLE_EQ(named[0].value, 95000.0);

  auto base = ImportRun({r0});
  auto test = ImportRun({r2});
  auto d = DiffTraces(base->ranks, test->ranks, 10);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].name, "gemm");
  EXPECT_EQ(d[0].delta_ns, 40000);
}

TEST(TraceAnalysisTest, AnalyzesEveryImportableTrace) {
  // Every Kineto trace in the shared data imports and analyses without error; GPU traces give
  // a temporal breakdown whose parts add up to 100%.
  const char* files[] = {
      "HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
      "HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
      "HolisticTraceAnalysis/tests/data/critical_path/alexnet/"
      "benchmark_result_2869224_1695835535_trace.json.gz",
      "HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz",
      "HolisticTraceAnalysis/tests/data/triton_example/triton_example.json.gz",
      "HolisticTraceAnalysis/tests/data/trace_file_list/inference_rank_1.json.gz",
      "kineto/docs/traces/after_fix_trace.json",
      "kineto/tb_plugin/test/gpu_metrics_input.json",
  };
  for (const char* f : files) {
    auto run = ImportRun({it::SharedData(std::string("traces/") + f)});
    ASSERT_FALSE(run->ranks.empty()) << f;
    for (const auto& t : run->ranks) {
      RankAnalysis a = AnalyzeRank(t, {});
      if (a.temporal) {
        EXPECT_NEAR(a.temporal->idle_pct + a.temporal->compute_pct + a.temporal->non_compute_pct,
                    100.0, 0.02)
            << f;
      }
    }
  }
}

}  // namespace
}  // namespace trainprof::analyze::trace
