// What-ifs: proposed only with evidence, priced from the catalog, ranked by saving. Expected
// dollars are worked out by hand in the comments from data/catalog's prices.

#include "analyze/cost/what_if.h"

#include <gtest/gtest.h>

#include "analyze/cost/cost_test_util.h"

namespace trainprof::cost {
namespace {

using namespace testing;  // NOLINT

constexpr double kCent = 0.005;
constexpr double kGiB = 1024.0 * 1024 * 1024;

bool Mentions(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines) {
    if (l.find(text) != std::string::npos) return true;
  }
  return false;
}

NodeSpec GpuNode(int gpus, double util, double gpu_mem_gib, double cpu, double host_mem_gib) {
  NodeSpec n;
  n.info = Node("algo-1");
  n.gpus = gpus;
  n.samples_until_s = 3600;
  n.gpu_util = [util](int, double) { return util; };
  n.gpu_memory_used_bytes = [gpu_mem_gib](int, double) { return gpu_mem_gib * kGiB; };
  n.cpu_total = [cpu](double) { return cpu; };
  n.memory_used_bytes = [host_mem_gib](double) { return host_mem_gib * kGiB; };
  return n;
}

TEST(WhatIfTest, HalfIdleP4dRightsizesAndSpot) {
  // ml.p4d.24xlarge 25.2513 $/h, 1 h; gpu0-3 at 90 % with 20 GiB, gpu4-7 idle; CPU 30 % of 96
  // vCPUs; 200 GiB host memory.
  NodeSpec n = GpuNode(8, 0, 20, 0.30, 200);
  n.gpu_util = [](int g, double) { return g < 4 ? 0.9 : 0.0; };
  CostReport r = Cost(WriteRun(Meta("ml.p4d.24xlarge", 3600), {n}));
  // Needs: 4 GPUs with >= 24 GiB (20 x 1.2), >= 34.6 vCPUs, >= 240 GiB. A10G/L4 (22 888 MiB),
  // T4 and V100-16GB cannot hold 24 GiB. The cheapest fit: ml.g6e.12xlarge (4 x L40S, 48
  // vCPUs, 384 GiB, 13.12 $/h); step time x max(312/362 tensor, 1555/864 bandwidth) =
  // x1.79977: 13.12 x 1.79977 = 23.6130 -> $23.61, saving 25.2513 - 23.6130 = $1.64.
  const WhatIf* rs = FindWhatIf(r, "rightsize");
  ASSERT_NE(rs, nullptr);
  EXPECT_EQ(rs->instance_type, "ml.g6e.12xlarge");
  EXPECT_NEAR(rs->new_cost_usd, 23.61, kCent);
  EXPECT_NEAR(rs->saving_usd, 1.64, kCent);
  EXPECT_TRUE(Mentions(rs->evidence, "4 of 8 GPUs busy"));
  EXPECT_TRUE(Mentions(rs->evidence, "peak GPU memory 20.0 GiB"));
  EXPECT_TRUE(Mentions(rs->assumptions, "not a measurement"));
  // Never a type that cannot hold the measured memory.
  const InstanceType* cand = FindInstance(ShippedCatalog(), rs->instance_type);
  EXPECT_GE(*cand->AcceleratorMemoryBytes(), 20 * kGiB * 1.2);
  // Managed spot: no p4d spot figure in the catalog -> 55 %; unknown bucket -> 12.5 % a month:
  // k = 0.125 x 1 h / 730 = 0.000171; no checkpoints, so half the 3600 s of training is lost:
  // r = 0.000171 x 1800 / 3600 = 0.0000856; 25.2513 x 0.45 x 1.0000856 = 11.3641 -> $11.36,
  // saving $13.89, the largest: ranked first.
  ASSERT_FALSE(r.what_ifs.empty());
  EXPECT_EQ(r.what_ifs[0].id, "managed_spot");
  EXPECT_NEAR(r.what_ifs[0].new_cost_usd, 11.36, kCent);
  EXPECT_NEAR(r.what_ifs[0].saving_usd, 13.89, kCent);
  EXPECT_TRUE(Mentions(r.what_ifs[0].assumptions, "add checkpoints first"));
  // Busy GPUs are at 90 %: no "fewer GPUs".
  EXPECT_EQ(FindWhatIf(r, "fewer_gpus"), nullptr);
  EXPECT_TRUE(Mentions(r.not_proposed, "fewer GPUs / bigger batch: busy GPUs reach p95 90 %"));
  // No kernel trace: mixed precision is not guessed.
  EXPECT_EQ(FindWhatIf(r, "mixed_precision"), nullptr);
  EXPECT_TRUE(Mentions(r.not_proposed, "mixed precision: no GPU kernel trace"));
}

TEST(WhatIfTest, UnderUsedGpusPackIntoFewer) {
  // ml.g5.48xlarge 20.36 $/h, 8 x A10G all at 30 % (10 GiB each), CPU 10 % of 192, 100 GiB.
  // The mean utilisation adds up to 2.4 GPUs -> ceil(2.4 / 0.8) = 3 -> the cheapest A10G type
  // with >= 3 GPUs holding the peaks: ml.g5.12xlarge (4 GPUs, 48 vCPUs, 192 GiB) at 7.09 $/h x
  // 1 h = $7.09, saving 20.36 - 7.09 = $13.27.
  CostReport r = Cost(WriteRun(Meta("ml.g5.48xlarge", 3600), {GpuNode(8, 0.3, 10, 0.10, 100)}));
  const WhatIf* f = FindWhatIf(r, "fewer_gpus");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->instance_type, "ml.g5.12xlarge");
  EXPECT_NEAR(f->new_cost_usd, 7.09, kCent);
  EXPECT_NEAR(f->saving_usd, 13.27, kCent);
  EXPECT_TRUE(Mentions(f->evidence, "8 busy GPUs with p95 utilisation at most 30 %"));
  EXPECT_EQ(r.what_ifs[0].id, "fewer_gpus");  // 13.27 beats spot (65 %: 20.36 x 0.35 = 7.13)
  for (size_t i = 1; i < r.what_ifs.size(); ++i) {
    EXPECT_GE(r.what_ifs[i - 1].saving_usd, r.what_ifs[i].saving_usd);
  }
}

TEST(WhatIfTest, MixedPrecisionFromKernelNames) {
  // ml.p3.2xlarge (1 x V100: 125 fp16 tensor / 15.7 fp32 = x7.962), 1 h, all training.
  // Kernels: 6 s fp32 sgemm, 1 s tensor-core h884 gemm, 3 s elementwise -> fp32 matmul share 0.6.
  // Saved: 3600 s x 0.6 x (1 - 1/7.962) = 1888.7 s at 3.825/3600 + 30 x 0.14 / 2 628 000
  // $/s = 0.0010641 -> $2.01.
  NodeSpec n;
  n.info = Node("algo-1");
  n.kernels = {{"volta_sgemm_128x64_nn", 6},
               {"volta_h884gemm_64x64_ldg8_nn", 1},
               {"void at::native::elementwise_kernel<128, 2>", 3}};
  CostReport r = Cost(WriteRun(Meta("ml.p3.2xlarge", 3600), {n}));
  const WhatIf* m = FindWhatIf(r, "mixed_precision");
  ASSERT_NE(m, nullptr);
  EXPECT_NEAR(m->saving_usd, 2.01, kCent);
  EXPECT_TRUE(Mentions(m->evidence, "60 % of GPU kernel time"));
  EXPECT_TRUE(Mentions(m->assumptions, "upper bound"));
  EXPECT_TRUE(IsTensorCoreKernel("ampere_bf16_s16816gemm_bf16_128x128"));
  EXPECT_FALSE(IsTensorCoreKernel("volta_sgemm_128x64_nn"));
  EXPECT_TRUE(IsMatmulKernel("cutlass::Kernel<cutlass_80_tensorop_s1688gemm>"));
}

TEST(WhatIfTest, CpuBoundInputPipelineAndSlowStart) {
  // ml.g5.2xlarge 1.515 $/h, 2 h: initialisation 30 min, then 1-s steps with 0.5 s data_wait.
  NodeSpec n;
  n.info = Node("algo-1");
  n.phases = {{"initialization", 0, 1800}, {"training", 1800, 7200}};
  for (int i = 0; i < 5400; ++i) n.steps.push_back({1800.0 + i, 1.0, 0.5});
  CostReport r = Cost(WriteRun(Meta("ml.g5.2xlarge", 7200), {n}));
  EXPECT_NEAR(*r.steps.data_wait_fraction, 0.5, 1e-9);
  // CPU group: half of the 5400 s of training is input wait: 2700 s x 1.515/3600 = 1.13625
  // saved; one ml.c5.2xlarge (0.408 $/h, >= 8 vCPUs) for the remaining 4500 s = 0.51.
  // New: 3.03 - 1.13625 + 0.51 = 2.40375 -> $2.40; saving $0.63.
  const WhatIf* c = FindWhatIf(r, "heterogeneous_cpu_group");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->instance_type, "ml.c5.2xlarge");
  EXPECT_NEAR(c->new_cost_usd, 2.40, kCent);
  EXPECT_NEAR(c->saving_usd, 0.63, kCent);
  // Initialisation 1800 s > 20 min: 600 s x 1.515/3600 = $0.25.
  const WhatIf* s = FindWhatIf(r, "shorter_initialization");
  ASSERT_NE(s, nullptr);
  EXPECT_NEAR(s->saving_usd, 0.25, kCent);
  EXPECT_NEAR(*r.initialization_cost_usd, 0.7575, 1e-9);  // 1800 s x 1.515 / 3600
  // No download phase: streaming is not proposed.
  EXPECT_EQ(FindWhatIf(r, "streaming_input"), nullptr);
  EXPECT_TRUE(Mentions(r.not_proposed, "no download phase recorded"));
}

TEST(WhatIfTest, SpotInvoiceBillsNoRepeatedDownload) {
  // 4 x ml.g5.2xlarge (1.515 $/h, Spot Advisor 62 % off, 15-20 % interruptions a month), 10 h:
  // download 0-1800 s, initialisation 1800-2400 s, training 2400-36000 s, no checkpoints.
  // On demand: 4 x 36000 s x 1.515 / 3600 = $60.60.
  // Expected interruptions of the job: k = 4 instances x 0.175 x 10 h / 730 h = 0.0095890.
  // Each restarts every instance; what SageMaker bills again per instance is the lost work
  // (no checkpoint: half of the 33600 s of training, 16800 s) and the initialisation (600 s),
  // not the repeated download (1800 s): 17400 s x k = 166.849 s per instance, 667.397
  // instance-seconds in all.
  // Invoice: (144000 + 667.397) s x 1.515 x 0.38 / 3600 $/s = $23.134728.
  // (Billing the repeated download too would give 19200 s x k per instance: $23.145769.)
  NodeSpec n;
  n.info = Node("algo-1");
  n.phases = {{"download", 0, 1800}, {"initialization", 1800, 2400}, {"training", 2400, 36000}};
  model::RunMetadata meta = Meta("ml.g5.2xlarge", 36000);
  meta.instance_count = 4;
  CostReport r = Cost(WriteRun(meta, {n}));
  EXPECT_NEAR(r.total_cost_usd, 60.60, 1e-9);
  const WhatIf* s = FindWhatIf(r, "managed_spot");
  ASSERT_NE(s, nullptr);
  EXPECT_NEAR(s->new_cost_usd, 23.134728, 1e-6);
  EXPECT_NEAR(s->saving_usd, 60.60 - 23.134728, 1e-6);
  EXPECT_TRUE(Mentions(s->assumptions, "the repeated download is not billed"));
}

TEST(WhatIfTest, SpotWhatIfDiscountsTheInstancesNotTheirStorage) {
  // 1 x ml.m5.xlarge (0.23 $/h, EBS only, spot 63 % off in the catalog, no Spot Advisor bucket:
  // 12.5 % a month), 10 000 s of training, no checkpoints, a 2000 GB volume (0.14 $/GB-month).
  // On demand: compute 0.23 x 10000 / 3600 = 0.6388889; storage 2000 x 0.14 x 10000 /
  // (730 x 3600) = 1.0654490; total 1.7043379.
  // k = 0.125 x 10000 / (730 x 3600) = 0.00047565; half the training lost: r = k x 5000 / 10000
  // = 0.00023782. Spot discounts the instance only, as the bill with --spot does:
  // (0.6388889 x 0.37 + 1.0654490) x (1 + r) = $1.3021475. (Discounting the storage too, as the
  // what-if did, gave 1.7043379 x 0.37 x (1 + r) = $0.6307550, below the spot bill itself.)
  NodeSpec n;
  n.info = Node("algo-1");
  n.phases = {{"training", 0, 10000}};
  CostOptions o;
  o.volume_gb = 2000;
  const std::string dir = WriteRun(Meta("ml.m5.xlarge", 10000), {n});
  CostReport r = Cost(dir, o);
  EXPECT_NEAR(r.compute_cost_usd, 0.6388889, 1e-6);
  EXPECT_NEAR(r.storage_cost_usd, 1.0654490, 1e-6);
  const WhatIf* s = FindWhatIf(r, "managed_spot");
  ASSERT_NE(s, nullptr);
  EXPECT_NEAR(s->new_cost_usd, 1.3021475, 1e-6);
  EXPECT_TRUE(Mentions(s->assumptions, "not their storage"));
  // The same run billed with --spot, with no interruption: the what-if is that bill plus rework.
  o.spot = true;
  CostReport billed = Cost(dir, o);
  EXPECT_NEAR(billed.total_cost_usd, 0.6388889 * 0.37 + 1.0654490, 1e-6);
  EXPECT_GT(s->new_cost_usd, billed.total_cost_usd);
}

TEST(WhatIfTest, LabelThatDisagreesWithTheRecordedHardware) {
  // Labelled ml.p3.8xlarge (32 vCPUs, 4 x V100) but recorded on a 2-core host without GPUs,
  // CPU at 95 %: the measured load is 1.9 of 2 cores, never "30.4 of 32 vCPUs".
  NodeSpec n;
  n.info = Node("laptop");
  n.info.cpu_cores = 2;
  n.info.memory_total_bytes = 8LL << 30;
  n.samples_until_s = 3600;
  n.cpu_total = [](double) { return 0.95; };
  n.memory_used_bytes = [](double) { return 3 * kGiB; };
  CostReport r = Cost(WriteRun(Meta("ml.p3.8xlarge", 3600, "record"), {n}));
  EXPECT_TRUE(Mentions(r.warnings,
                       "node laptop: labelled ml.p3.8xlarge (32 vCPUs, 4 GPUs) but recorded on "
                       "2 CPU cores and no GPU"))
      << (r.warnings.empty() ? "" : r.warnings[0]);
  for (const WhatIf& w : r.what_ifs) {
    EXPECT_FALSE(Mentions(w.evidence, "of 32 vCPUs")) << w.id;
    EXPECT_NE(w.id, "rightsize");
  }
  EXPECT_TRUE(Mentions(r.not_proposed,
                       "rightsizing: the recorded hardware (2 CPU cores, no GPU) is not the "
                       "labelled ml.p3.8xlarge (32 vCPUs, 4 GPUs)"));
  // Hardware that matches the label: the measured load in the label's units.
  NodeSpec m = n;
  m.info.cpu_cores = 16;
  CostReport ok = Cost(WriteRun(Meta("ml.m5.4xlarge", 3600, "record"), {m}));
  for (const auto& w : ok.warnings) EXPECT_EQ(w.find("labelled"), std::string::npos) << w;
}

TEST(WhatIfTest, NothingWithoutEvidence) {
  // A busy p4d (95 % GPUs, 35 GiB each, CPU 80 %, 1000 GiB host memory) on spot already: no
  // what-if has evidence.
  CostOptions o;
  o.spot = true;
  CostReport r =
      Cost(WriteRun(Meta("ml.p4d.24xlarge", 3600), {GpuNode(8, 0.95, 35, 0.80, 1000)}), o);
  EXPECT_TRUE(r.what_ifs.empty()) << r.what_ifs[0].id << ": " << r.what_ifs[0].title;
  EXPECT_TRUE(Mentions(r.not_proposed, "managed spot: the job already ran on spot"));
  EXPECT_TRUE(Mentions(r.not_proposed, "heterogeneous CPU group: no evidence"));
}

}  // namespace
}  // namespace trainprof::cost
