// Generated traces with a known truth (exact idle intervals, exact overlap of communication and
// computation) for the default analyses and for --hta-compat, and HTA's rules one by one
// (tests/python/test_hta_differential.py runs HTA itself on real and generated traces).

#include "analyze/trace/hta_compat.h"

#include <gtest/gtest.h>

#include <map>

#include "importers/common/test_util.h"
#include "importers/kineto/kineto_importer.h"
#include "store/run_reader.h"

namespace trainprof::analyze::trace {
namespace {

namespace it = importers::testing;

struct Run {
  std::unique_ptr<store::RunReader> reader;
  store::EventTable events;
  NodeMetaMap meta;
};

std::unique_ptr<Run> Import(const std::string& trace_json) {
  std::string dir = it::TempDir("tp_hta");
  it::WriteFile(dir + "/trace.json", trace_json);
  importers::kineto::KinetoImportOptions o;
  o.traces = {dir + "/trace.json"};
  o.out = dir + "/run";
  auto r = importers::kineto::ImportKineto(o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  auto run = std::make_unique<Run>();
  auto reader = store::RunReader::Open(o.out);
  EXPECT_TRUE(reader.ok());
  run->reader = std::move(reader).value();
  auto events = run->reader->Events({});
  EXPECT_TRUE(events.ok());
  run->events = std::move(events).value();
  auto meta = run->reader->NodeMeta();
  EXPECT_TRUE(meta.ok());
  run->meta = std::move(meta).value();
  return run;
}

// Integer-µs events on top of 1e9 µs (an absolute time).
std::string X(const std::string& cat, const std::string& name, int64_t ts, int64_t dur,
              int64_t corr = -1, int64_t stream = -1) {
  std::string args;
  if (corr >= 0) args += "\"correlation\":" + std::to_string(corr);
  if (stream >= 0)
    args += std::string(args.empty() ? "" : ",") + "\"stream\":" + std::to_string(stream);
  bool gpu = stream >= 0;
  return "{\"ph\":\"X\",\"cat\":\"" + cat + "\",\"name\":\"" + name +
         "\",\"pid\":" + (gpu ? "0" : "1") + ",\"tid\":" + std::to_string(gpu ? stream : 1) +
         ",\"ts\":" + std::to_string(1000000000 + ts) + ",\"dur\":" + std::to_string(dur) +
         ",\"args\":{" + args + "}}";
}

std::string Trace(const std::vector<std::string>& events) {
  std::string body;
  for (const std::string& e : events) body += (body.empty() ? "" : ",") + e;
  return "{\"distributedInfo\": {\"rank\": 0}, \"traceEvents\": [" + body + "]}";
}

// Compute kernels [0,100) and [150,250) on stream 7, an NCCL kernel [50,200) on stream 20, a
// memcpy [300,310) on stream 7. Known truth: span 310, busy [0,250) + [300,310) so idle 50;
// compute 200; non-compute 60; computation alone [0,50) + [200,250) = 100, communication alone
// [100,150) = 50, both [50,100) + [150,200) = 100, memory 10; communication overlapped 100 of
// 150. Stream 7: k2 launched at 120 after k1 ended at 100 (host wait 50); the memcpy launched
// at 240 before k2 ended, 50 µs gap >= 30 (other 50).
std::string KnownTruthTrace() {
  return Trace(
      {X("cuda_runtime", "cudaLaunchKernel", 0, 5, 1), X("kernel", "gemm_k1", 0, 100, 1, 7),
       X("cuda_runtime", "cudaLaunchKernel", 40, 5, 2),
       X("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 50, 150, 2, 20),
       X("cuda_runtime", "cudaLaunchKernel", 120, 5, 3), X("kernel", "gemm_k2", 150, 100, 3, 7),
       X("cuda_runtime", "cudaMemcpyAsync", 240, 5, 4),
       X("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 300, 10, 4, 7)});
}

void ExpectKnownTemporal(const Temporal& t) {
  EXPECT_EQ(t.kernel_ns, 310000);
  EXPECT_EQ(t.idle_ns, 50000);
  EXPECT_EQ(t.compute_ns, 200000);
  EXPECT_EQ(t.non_compute_ns, 60000);
  EXPECT_DOUBLE_EQ(t.idle_pct, 16.13);  // 50/310
  EXPECT_DOUBLE_EQ(t.compute_pct, 64.52);
  EXPECT_DOUBLE_EQ(t.non_compute_pct, 19.35);
}

void ExpectKnownTypes(const std::vector<KernelTypeTime>& types) {
  std::map<std::string, std::pair<int64_t, double>> m;
  for (const auto& k : types) m[k.type] = {k.time_ns, k.pct};
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m["COMPUTATION"], std::make_pair(int64_t{100000}, 38.5));  // 100/260
  EXPECT_EQ(m["COMMUNICATION"], std::make_pair(int64_t{50000}, 19.2));
  EXPECT_EQ(m["COMPUTATION overlapping COMMUNICATION"], std::make_pair(int64_t{100000}, 38.5));
  EXPECT_EQ(m["MEMORY"], std::make_pair(int64_t{10000}, 3.8));
}

TEST(HtaCompatTest, KnownTruthDefaultMode) {
  auto run = Import(KnownTruthTrace());
  auto ranks = SplitByRank(run->events);
  ASSERT_EQ(ranks.size(), 1u);
  RankAnalysis a = AnalyzeRank(ranks[0], {});
  ASSERT_TRUE(a.temporal.has_value());
  ExpectKnownTemporal(*a.temporal);
  ExpectKnownTypes(a.kernel_types);
  ASSERT_TRUE(a.comm_comp_overlap_pct.has_value());
  EXPECT_DOUBLE_EQ(*a.comm_comp_overlap_pct, 66.67);
  std::map<std::pair<int64_t, std::string>, int64_t> idle;
  for (const auto& e : a.idle) idle[{e.stream, e.category}] = e.time_ns;
  EXPECT_EQ(idle[std::make_pair(int64_t{7}, std::string("host_wait"))], 50000);
  EXPECT_EQ(idle[std::make_pair(int64_t{7}, std::string("kernel_wait"))], 0);
  EXPECT_EQ(idle[std::make_pair(int64_t{7}, std::string("other"))], 50000);
  EXPECT_EQ(idle[std::make_pair(int64_t{20}, std::string("other"))], 0);
}

TEST(HtaCompatTest, KnownTruthHtaMode) {
  auto run = Import(KnownTruthTrace());
  HtaResult h = AnalyzeHta(BuildHtaTraces(run->events, run->meta), run->events, 30);
  ASSERT_EQ(h.ranks.size(), 1u);
  const RankAnalysis& a = h.ranks[0];
  EXPECT_EQ(a.label, "0");
  ASSERT_TRUE(a.temporal.has_value());
  ExpectKnownTemporal(*a.temporal);
  ExpectKnownTypes(a.kernel_types);
  ExpectKnownTypes(h.kernel_types);  // one rank: the all-rank breakdown is the same
  ASSERT_TRUE(a.comm_comp_overlap_pct.has_value());
  EXPECT_DOUBLE_EQ(*a.comm_comp_overlap_pct, 66.67);
  // HTA lists the categories that occur on a stream: the first row of a stream is "other".
  ASSERT_EQ(a.idle.size(), 3u);
  EXPECT_EQ(a.idle[0].stream, 7);
  EXPECT_EQ(a.idle[0].category, "host_wait");
  EXPECT_EQ(a.idle[0].time_ns, 50000);
  EXPECT_DOUBLE_EQ(a.idle[0].ratio, 0.5);
  EXPECT_EQ(a.idle[1].category, "other");
  EXPECT_EQ(a.idle[1].time_ns, 50000);
  EXPECT_EQ(a.idle[2].stream, 20);
  EXPECT_EQ(a.idle[2].category, "other");
  EXPECT_EQ(a.idle[2].time_ns, 0);
}

TEST(HtaCompatTest, LastProfilerStepIsDroppedWithItsKernelsAndSharedLaunchesDuplicate) {
  // Two steps: HTA keeps the CPU rows that start before the last step's start (200) and the
  // kernels they launched, so k2 (launched at 210) goes and the span is k1..k3 = 20..110.
  // k1's correlation id is on two CPU rows (runtime + driver call): pandas' merge keeps k1
  // twice, and the copy's gap to the original's end is -40 µs of kernel_wait (HTA 0.5.0 gives
  // exactly this: kernel_wait -40, other 40).
  auto run = Import(
      Trace({X("user_annotation", "ProfilerStep#1", 0, 200),
             X("user_annotation", "ProfilerStep#2", 200, 200),
             X("cuda_runtime", "cudaLaunchKernel", 10, 5, 1),
             X("cuda_driver", "cuLaunchKernel", 12, 2, 1), X("kernel", "k1", 20, 40, 1, 7),
             X("cuda_runtime", "cudaLaunchKernel", 30, 5, 2), X("kernel", "k3", 100, 10, 2, 7),
             X("cuda_runtime", "cudaLaunchKernel", 210, 5, 3), X("kernel", "k2", 220, 80, 3, 7)}));
  HtaResult h = AnalyzeHta(BuildHtaTraces(run->events, run->meta), run->events, 30);
  ASSERT_EQ(h.ranks.size(), 1u);
  const RankAnalysis& a = h.ranks[0];
  ASSERT_TRUE(a.temporal.has_value());
  EXPECT_EQ(a.temporal->kernel_ns, 90000);
  EXPECT_EQ(a.temporal->idle_ns, 40000);
  EXPECT_EQ(a.temporal->compute_ns, 50000);
  EXPECT_DOUBLE_EQ(a.temporal->idle_pct, 44.44);
  ASSERT_EQ(a.idle.size(), 2u);
  EXPECT_EQ(a.idle[0].category, "kernel_wait");
  EXPECT_EQ(a.idle[0].time_ns, -40000);
  EXPECT_EQ(a.idle[1].category, "other");
  EXPECT_EQ(a.idle[1].time_ns, 40000);

  // The default mode keeps the whole trace: k1, k3, k2 span 20..300 with 40 + 110 idle.
  auto ranks = SplitByRank(run->events);
  RankAnalysis d = AnalyzeRank(ranks[0], {});
  EXPECT_EQ(d.temporal->kernel_ns, 280000);
  EXPECT_EQ(d.temporal->idle_ns, 150000);
}

TEST(HtaCompatTest, RowsWithAStreamArgAreHtaKernels) {
  // HTA counts every row whose args carry a stream (not -1) as a GPU kernel, typed by name:
  // a cuda_sync "Stream Sync" is busy but OTHER (not compute), a CPU op with a stream arg is
  // COMPUTATION.
  auto run =
      Import(Trace({X("kernel", "k1", 0, 10, 1, 7), X("cuda_sync", "Stream Sync", 10, 80, 2, 7),
                    X("cpu_op", "triton_launch", 95, 5, -1, 7), X("kernel", "k2", 100, 10, 3, 7)}));
  HtaResult h = AnalyzeHta(BuildHtaTraces(run->events, run->meta), run->events, 30);
  const Temporal& t = *h.ranks[0].temporal;
  EXPECT_EQ(t.kernel_ns, 110000);
  EXPECT_EQ(t.idle_ns, 5000);          // [90, 95)
  EXPECT_EQ(t.compute_ns, 25000);      // k1, the CPU op, k2
  EXPECT_EQ(t.non_compute_ns, 80000);  // the sync
}

TEST(HtaCompatTest, KernelTypesByNameAsHtaRegexes) {
  EXPECT_EQ(HtaClassify("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"),
            HtaKernelType::kCommunication);
  EXPECT_EQ(HtaClassify("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"),
            HtaKernelType::kCommunication);
  EXPECT_EQ(HtaClassify("ncclAllReduce"), HtaKernelType::kComputation);  // no "Kernel"
  EXPECT_EQ(HtaClassify("Memcpy HtoD (Pageable -> Device)"), HtaKernelType::kMemory);
  EXPECT_EQ(HtaClassify("Memset (Device)"), HtaKernelType::kMemory);
  EXPECT_EQ(HtaClassify("dma_transfer"), HtaKernelType::kMemory);
  EXPECT_EQ(HtaClassify("void at::native::vectorized_Memcpy_kernel<float>()"),
            HtaKernelType::kOther);  // ".*Memcpy"
  EXPECT_EQ(HtaClassify("Event Sync"), HtaKernelType::kOther);
  EXPECT_EQ(HtaClassify("cudaDeviceSynchronize"), HtaKernelType::kOther);
  EXPECT_EQ(HtaClassify("void fooMemset()"), HtaKernelType::kComputation);  // "^Memset" only
  EXPECT_EQ(HtaClassify("gemm\nSync"), HtaKernelType::kComputation);        // first line only
  EXPECT_EQ(HtaClassify("sm80_xmma_gemm"), HtaKernelType::kComputation);
}

TEST(HtaCompatTest, MicrosecondsRoundedAsHtaReadsThem) {
  // Values from Python: math.ceil(float("1712195495519689.123")) == 1712195495519689 (the
  // double is ...689.0: 0.25 µs apart at this magnitude), math.floor(float(ts) + 0.5) == ...689.
  Interval a = HtaMicros(1712195495519689123, 500, 0);
  EXPECT_EQ(a.first, 1712195495519689);
  EXPECT_EQ(a.second, 1712195495519689);
  // float("1712195495519689.126") == ...689.25: ceil ...690; + 2.999 -> floor ...692.
  Interval b = HtaMicros(1712195495519689126, 2999, 0);
  EXPECT_EQ(b.first, 1712195495519690);
  EXPECT_EQ(b.second, 1712195495519692);
  // Relative timestamps: HTA sees the file's small values, exact to the ns.
  const int64_t base = 1711964646000000000;
  Interval c = HtaMicros(base + 4458676522690655, 12345, base);
  EXPECT_EQ(c.first, 4458676522691 + base / 1000);
  EXPECT_EQ(c.second, 4458676522703 + base / 1000);
  // A sub-µs event between two µs ticks ends before it starts.
  Interval d = HtaMicros(10200, 500, 0);
  EXPECT_EQ(d.first, 11);
  EXPECT_EQ(d.second, 10);
}

TEST(HtaCompatTest, RelativeTimestampsUseTheFilesValues) {
  // ts 1000.123 and 1010.123 µs from a base time: HTA rounds the file's values (1001..1005 and
  // 1011..1015); the same instants as epoch doubles would be ...1000.0 and ...1010.0 (0.25 µs
  // apart there), so the importer's kineto.rank0.base_time_ns matters.
  std::string t =
      "{\"distributedInfo\": {\"rank\": 0}, \"baseTimeNanoseconds\": 1711964646000000000, "
      "\"traceEvents\": ["
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k1\",\"pid\":0,\"tid\":7,\"ts\":1000.123,"
      "\"dur\":5.0,\"args\":{\"stream\":7,\"correlation\":1}},"
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k2\",\"pid\":0,\"tid\":7,\"ts\":1010.123,"
      "\"dur\":5.0,\"args\":{\"stream\":7,\"correlation\":2}}]}";
  auto run = Import(t);
  ASSERT_EQ(run->meta.size(), 1u);
  EXPECT_EQ(run->meta.begin()->second["kineto.rank0.base_time_ns"], "1711964646000000000");
  HtaResult h = AnalyzeHta(BuildHtaTraces(run->events, run->meta), run->events, 30);
  const Temporal& tb = *h.ranks[0].temporal;
  EXPECT_EQ(tb.kernel_ns, 14000);  // 1001..1015
  EXPECT_EQ(tb.idle_ns, 6000);     // 1005..1011
}

}  // namespace
}  // namespace trainprof::analyze::trace
