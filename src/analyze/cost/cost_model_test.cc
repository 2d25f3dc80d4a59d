// Hand-checked costs: every expected dollar figure is computed by hand in the comments from the
// catalog's prices (data/catalog/instances.csv, storage.csv) and asserted to the cent.

#include "analyze/cost/cost_model.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analyze/cost/cost_test_util.h"

namespace trainprof::cost {
namespace {

using namespace testing;  // NOLINT

constexpr double kCent = 0.005;  // "to the cent": within half a cent
constexpr double kGiB = 1024.0 * 1024 * 1024;

TEST(CostModelTest, P3TwoHoursWithDownloadAndUpload) {
  // ml.p3.8xlarge, us-east-1, 14.688 $/h (2021-11-29), EBS-only (local_nvme_gb 0).
  // 2 h billed: download 20 min, training 95 min, upload 5 min.
  NodeSpec n;
  n.info = Node("algo-1");
  n.phases = {{"download", 0, 1200}, {"training", 1200, 6900}, {"upload", 6900, 7200}};
  CostReport r = Cost(WriteRun(Meta("ml.p3.8xlarge", 7200), {n}));
  ASSERT_EQ(r.nodes.size(), 1u);
  EXPECT_EQ(r.nodes[0].billed_seconds, 7200);
  // compute = 14.688 x 2 h = 29.376
  EXPECT_NEAR(r.compute_cost_usd, 29.38, kCent);
  // storage: 30 GB default volume x 0.14 $/GB-month x 2 h / 730 h = 8.4 / 730 = 0.0115
  EXPECT_NEAR(r.storage_cost_usd, 0.0115068, 1e-6);
  EXPECT_EQ(r.nodes[0].storage_volume_gb, 30);
  // total = 29.376 + 0.0115 = 29.3875 -> $29.39
  EXPECT_NEAR(r.total_cost_usd, 29.39, kCent);
  // Phases carry their share of instance + storage: per second 14.688/3600 + 4.2/2628000.
  // download 1200 s: 4.896 + 0.0019 = 4.8979 -> $4.90
  ASSERT_NE(Phase(r, "download"), nullptr);
  EXPECT_DOUBLE_EQ(Phase(r, "download")->billed_seconds, 1200);
  EXPECT_NEAR(Phase(r, "download")->cost_usd, 4.90, kCent);
  // training 5700 s: 23.256 + 0.0091 = 23.2651 -> $23.27
  EXPECT_DOUBLE_EQ(Phase(r, "training")->billed_seconds, 5700);
  EXPECT_NEAR(Phase(r, "training")->cost_usd, 23.27, kCent);
  // upload 300 s: 1.224 + 0.0005 = 1.2245 -> $1.22
  EXPECT_DOUBLE_EQ(Phase(r, "upload")->billed_seconds, 300);
  EXPECT_NEAR(Phase(r, "upload")->cost_usd, 1.22, kCent);
  EXPECT_EQ(r.phases[0].phase, "download");  // billing order
  EXPECT_EQ(r.phases[2].phase, "upload");
  // The 2021 price is older than 180 days at 2026-11-30.
  ASSERT_FALSE(r.warnings.empty());
  bool stale = false;
  for (const auto& w : r.warnings) stale |= w.find("2021-11-29") != std::string::npos;
  EXPECT_TRUE(stale);
  // No GPU samples: idle cost is n/a, not 0.
  EXPECT_FALSE(r.idle_accelerator_cost_usd.has_value());
  // A finding's impact: the download hour range of algo-1 = the download phase's cost.
  EXPECT_NEAR(CostOfRange(r, "algo-1", At(0), At(1200)), Phase(r, "download")->cost_usd, 1e-9);
  EXPECT_NEAR(CostOfRange(r, "", At(-100), At(1e6)), r.total_cost_usd, 1e-9);
  // One GPU's share for 1 h: 14.688 / 4 = 3.672
  EXPECT_NEAR(AcceleratorCostOfRange(r, "algo-1", 1, At(0), At(3600)), 3.672, 1e-9);
}

TEST(CostModelTest, FourNodeP4dJob) {
  // ml.p4d.24xlarge 25.2513 $/h (2026-09-27), local NVMe: no storage line.
  // 4 instances x 3 h x 25.2513 = 303.0156 -> $303.02
  model::RunMetadata meta = Meta("ml.p4d.24xlarge", 3 * 3600);
  meta.instance_count = 4;
  std::vector<NodeSpec> nodes(4);
  for (int i = 0; i < 4; ++i)
    nodes[static_cast<size_t>(i)].info = Node("algo-" + std::to_string(i + 1));
  CostReport r = Cost(WriteRun(meta, nodes));
  EXPECT_EQ(r.instance_count, 4);
  ASSERT_EQ(r.nodes.size(), 4u);
  EXPECT_DOUBLE_EQ(r.billed_instance_seconds, 4 * 10800);
  EXPECT_NEAR(r.total_cost_usd, 303.02, kCent);
  EXPECT_EQ(r.storage_cost_usd, 0);
  // No phase spans: everything is training, and the output says so.
  ASSERT_EQ(r.phases.size(), 1u);
  EXPECT_EQ(r.phases[0].phase, "training");
  EXPECT_FALSE(r.phases_from_spans);
  EXPECT_NE(r.notes[0].find("no phase spans"), std::string::npos);

  // The same job with one node recorded and --instances 4: the others are billed like it.
  meta.instance_count.reset();
  NodeSpec one;
  one.info = Node("algo-1");
  CostOptions o;
  o.instance_count = 4;
  CostReport r1 = Cost(WriteRun(meta, {one}), o);
  EXPECT_EQ(r1.instance_count, 4);
  EXPECT_NEAR(r1.total_cost_usd, 303.02, kCent);
  EXPECT_TRUE(r1.nodes[3].assumed);
}

TEST(CostModelTest, EachNodeAtItsOwnType) {
  // Heterogeneous cluster, 1 h: algo-1 ml.p4d.24xlarge (25.2513) + algo-2 ml.c5.4xlarge (0.816,
  // EBS-only: 30 GB x 0.14 / 730 = 0.0058). Total 26.0731 -> $26.07.
  NodeSpec a, b;
  a.info = Node("algo-1");
  a.info.instance_type = "ml.p4d.24xlarge";
  b.info = Node("algo-2");
  b.info.instance_type = "ml.c5.4xlarge";
  CostReport r = Cost(WriteRun(Meta("", 3600), {a, b}));
  ASSERT_EQ(r.nodes.size(), 2u);
  EXPECT_EQ(r.nodes[0].instance_source, "node facts");
  EXPECT_NEAR(r.nodes[0].total_cost_usd, 25.25, kCent);
  EXPECT_NEAR(r.nodes[1].total_cost_usd, 0.82, kCent);
  EXPECT_NEAR(r.total_cost_usd, 26.07, kCent);
}

TEST(CostModelTest, EbsOnlyTypeWith100GbVolume) {
  // ml.m5.xlarge 0.23 $/h, EBS-only, VolumeSizeInGB 100 (run.json tag), 3 h:
  // compute 0.23 x 3 = 0.69; storage 100 GB x 0.14 x 3 h / 730 h = 0.0575 -> $0.06;
  // total 0.7475 -> $0.75.
  model::RunMetadata meta = Meta("ml.m5.xlarge", 3 * 3600);
  meta.tags["volume_size_gb"] = "100";
  NodeSpec n;
  n.info = Node("algo-1");
  CostReport r = Cost(WriteRun(meta, {n}));
  EXPECT_EQ(r.nodes[0].storage_volume_gb, 100);
  EXPECT_NEAR(r.compute_cost_usd, 0.69, kCent);
  EXPECT_NEAR(r.storage_cost_usd, 0.06, kCent);
  EXPECT_NEAR(r.total_cost_usd, 0.75, kCent);
  EXPECT_NE(r.nodes[0].storage_basis.find("100 GB gp2"), std::string::npos);
  // --volume-gb wins over the tag: 500 GB -> storage 0.2877, total 0.9777 -> $0.98.
  CostOptions o;
  o.volume_gb = 500;
  EXPECT_NEAR(Cost(WriteRun(meta, {n}), o).total_cost_usd, 0.98, kCent);
}

TEST(CostModelTest, ASpotPriceSaysTheDateOfItsSpotFigure) {
  // ml.m5.xlarge on spot: the on-demand price is of 2026-09-27, the 63 % discount of
  // 2024-04-03 (an EC2 spot average): the price says both, and the old spot figure is a
  // warning as an old price is.
  NodeSpec n;
  n.info = Node("algo-1");
  CostOptions o;
  o.spot = true;
  CostReport r = Cost(WriteRun(Meta("ml.m5.xlarge", 3600), {n}), o);
  const PriceUsed& p = r.nodes[0].price;
  EXPECT_EQ(p.as_of, "2026-09-27");
  EXPECT_EQ(p.spot_as_of, "2024-04-03");
  EXPECT_NE(p.spot_source.find("ec2instances.info"), std::string::npos) << p.spot_source;
  EXPECT_NEAR(p.price_usd_per_hour, 0.23 * 0.37, 1e-12);
  bool warned = false;
  for (const std::string& w : r.warnings) {
    warned = warned || w.find("the spot figure of ml.m5.xlarge is from 2024-04-03") == 0;
  }
  EXPECT_TRUE(warned);
  EXPECT_NE(CostReportToText(r).find("spot figure of 2024-04-03"), std::string::npos);
  // record's end-of-job lines too.
  const std::string summary = CostSummaryLines(r);
  EXPECT_NE(summary.find("price of 2026-09-27, spot figure of 2024-04-03 (github file "
                         "sagemaker_env.py"),
            std::string::npos)
      << summary;
}

TEST(CostModelTest, ThePhasesAddUpToTheBill) {
  // 15.4295 s of ml.g5.2xlarge (1.515 $/h, per second): 16 s billed, $0.0067333. The phases
  // (download 2 s, training the rest) and the 0.5705 s that per-second billing rounds up add
  // up to it; the round-up was in no phase.
  NodeSpec n;
  n.info = Node("algo-1");
  n.phases = {{"download", 0, 2}, {"training", 2, 15.4295}};
  CostReport r = Cost(WriteRun(Meta("ml.g5.2xlarge", 15.4295), {n}));
  EXPECT_EQ(r.nodes[0].billed_seconds, 16);
  EXPECT_NEAR(r.total_cost_usd, 16 * 1.515 / 3600, 1e-12);
  double seconds = 0, dollars = 0;
  for (const PhaseCost& p : r.phases) {
    seconds += p.billed_seconds;
    dollars += p.cost_usd;
  }
  EXPECT_NEAR(seconds, 16, 1e-9);
  EXPECT_NEAR(dollars, r.total_cost_usd, 1e-12);
  const PhaseCost* up = Phase(r, kPhaseRoundUp);
  ASSERT_NE(up, nullptr);
  EXPECT_NEAR(up->billed_seconds, 0.5705, 1e-9);
  ASSERT_EQ(r.phases.back().phase, kPhaseRoundUp);
  // A whole number of seconds rounds nothing up: no such phase.
  EXPECT_EQ(Phase(Cost(WriteRun(Meta("ml.g5.2xlarge", 16), {n})), kPhaseRoundUp), nullptr);
}

TEST(CostModelTest, SpotJobAndDiscounts) {
  // ml.g5.2xlarge 1.515 $/h on managed spot: the catalog's 62 % (Spot Advisor 2026-09-20) ->
  // 1.515 x 0.38 = 0.5757 $/h; 90 min -> 0.86355 -> $0.86. NVMe type: no storage.
  NodeSpec n;
  n.info = Node("algo-1");
  CostOptions o;
  o.spot = true;
  std::string dir = WriteRun(Meta("ml.g5.2xlarge", 5400), {n});
  CostReport r = Cost(dir, o);
  EXPECT_NEAR(r.nodes[0].price.price_usd_per_hour, 0.5757, 1e-9);
  EXPECT_EQ(r.nodes[0].price.spot_discount_pct, 62);
  EXPECT_NEAR(r.total_cost_usd, 0.86, kCent);
  EXPECT_EQ(FindWhatIf(r, "managed_spot"), nullptr);  // already on spot
  // On demand with a 20 % negotiated discount: 1.515 x 0.8 x 1.5 h = 1.818 -> $1.82.
  CostOptions d;
  d.discount_pct = 20;
  EXPECT_NEAR(Cost(dir, d).total_cost_usd, 1.82, kCent);
  // A price given by the user: 1.00 $/h x 1.5 h = $1.50, dated today.
  CostOptions p;
  p.price_usd_per_hour = 1.0;
  CostReport rp = Cost(dir, p);
  EXPECT_NEAR(rp.total_cost_usd, 1.50, kCent);
  EXPECT_EQ(rp.nodes[0].price.as_of, "2026-11-30");
  EXPECT_EQ(rp.nodes[0].price.source, "user (--price-usd-per-hour)");
}

NodeSpec HalfIdleP4d() {
  // 8 x A100-40GB for 1 h, sampled every 10 s: gpu0-3 at 90 % with 20 GiB used, gpu4-5 idle
  // and empty, gpu6-7 idle holding 10 GiB (idle-held).
  NodeSpec n;
  n.info = Node("algo-1");
  n.gpus = 8;
  n.samples_until_s = 3600;
  n.gpu_util = [](int g, double) { return g < 4 ? 0.9 : 0.0; };
  n.gpu_memory_used_bytes = [](int g, double) {
    return g < 4 ? 20 * kGiB : (g < 6 ? 0.0 : 10 * kGiB);
  };
  n.cpu_total = [](double) { return 0.30; };
  n.memory_used_bytes = [](double) { return 200 * kGiB; };
  return n;
}

TEST(CostModelTest, HalfTheGpusIdle) {
  // ml.p4d.24xlarge 25.2513 $/h, 8 GPUs: one GPU-hour q = 25.2513 / 8 = 3.1564125.
  CostReport r = Cost(WriteRun(Meta("ml.p4d.24xlarge", 3600), {HalfIdleP4d()}));
  EXPECT_NEAR(r.total_cost_usd, 25.25, kCent);
  // Utilisation-weighted: (4 x 0.1 + 4 x 1.0) GPU-hours x q = 4.4 x 3.1564125 = 13.8882 ->
  // $13.89.
  ASSERT_TRUE(r.idle_accelerator_cost_usd.has_value());
  EXPECT_NEAR(*r.idle_accelerator_cost_usd, 13.89, kCent);
  // Under 10 %: 4 GPU-hours x q = 12.6257 -> $12.63, of which gpu6-7 held memory:
  // 2 x 3.1564125 = 6.3128 -> $6.31.
  EXPECT_NEAR(*r.idle_threshold_cost_usd, 12.63, kCent);
  EXPECT_NEAR(*r.idle_threshold_accelerator_hours, 4.0, 1e-9);
  EXPECT_NEAR(*r.idle_held_cost_usd, 6.31, kCent);
  EXPECT_EQ(r.nodes[0].usage.gpus_busy, 4);
  ASSERT_EQ(r.nodes[0].idle_threshold_cost_by_phase.size(), 1u);
  EXPECT_NEAR(r.nodes[0].idle_threshold_cost_by_phase.at("training"), 12.63, kCent);
  // The cost of 4 idle GPUs over the whole hour, as a rule would ask for it.
  EXPECT_NEAR(AcceleratorCostOfRange(r, "algo-1", 4, At(0), At(3600)), 12.63, kCent);
}

TEST(CostModelTest, StepsEpochsAndSamples) {
  // ml.g5.2xlarge 1.515 $/h, 1 h, no phases. 1000 steps of 0.5 s every 0.6 s from t=60 s;
  // samples_per_step 256, steps_per_epoch 100.
  NodeSpec n;
  n.info = Node("algo-1");
  for (int i = 0; i < 1000; ++i) n.steps.push_back({60 + i * 0.6, 0.5, 0.1});
  n.annotations = {{"samples_per_step", "256"}, {"steps_per_epoch", "100"}};
  CostReport r = Cost(WriteRun(Meta("ml.g5.2xlarge", 3600), {n}));
  const double rate = 1.515 / 3600;  // $ per second
  const StepCosts& s = r.steps;
  EXPECT_EQ(s.steps, 1000);
  EXPECT_NEAR(*s.median_step_seconds, 0.5, 1e-9);
  EXPECT_NEAR(*s.cost_per_step_usd, rate * 0.5, 1e-12);              // $0.00021
  EXPECT_NEAR(*s.amortised_cost_per_step_usd, 1.515 / 1000, 1e-12);  // $0.0015
  EXPECT_NEAR(*s.cost_per_epoch_usd, rate * 0.5 * 100, 1e-12);       // $0.021
  EXPECT_NEAR(*s.amortised_cost_per_epoch_usd, 1.515 / 10, 1e-12);   // $0.15
  EXPECT_NEAR(*s.cost_per_1000_samples_usd, rate * 0.5 / 256 * 1000, 1e-12);
  EXPECT_NEAR(*s.amortised_cost_per_1000_samples_usd, 1.515 / 1000 / 256 * 1000, 1e-12);
  // 999 gaps of 0.1 s between steps: 99.9 s x rate = $0.042
  EXPECT_NEAR(*s.between_steps_seconds, 99.9, 1e-6);
  EXPECT_NEAR(*s.between_steps_cost_usd, 0.04, kCent);
  EXPECT_NEAR(*s.data_wait_fraction, 0.2, 1e-9);
  // Initialisation without phase spans: billing start to the first step, 60 s = $0.025.
  EXPECT_NEAR(*r.initialization_seconds, 60, 1e-9);
  EXPECT_NEAR(*r.initialization_cost_usd, 60 * rate, 1e-12);
}

TEST(CostModelTest, ImportedSageMakerShapedRun) {
  // What the smdebug importer writes: source "import smdebug", node algo-1 with few facts,
  // instance type in run.json. ml.p3.2xlarge 3.825 $/h, EBS-only, 30 min, one V100 at 50 %:
  // compute 1.9125; storage 30 x 0.14 x 0.5 / 730 = 0.0029; total 1.9154 -> $1.92.
  // Idle (weighted): 0.5 x 0.5 GPU-h x 3.825 = 0.95625 -> $0.96.
  NodeSpec n;
  n.info = Node("algo-1");
  n.gpus = 1;
  n.samples_until_s = 1800;
  n.sample_interval_s = 0.5;
  n.gpu_util = [](int, double) { return 0.5; };
  CostReport r = Cost(WriteRun(Meta("ml.p3.2xlarge", 1800), {n}));
  EXPECT_EQ(r.nodes[0].instance_source, "run.json");
  EXPECT_NEAR(r.total_cost_usd, 1.92, kCent);
  EXPECT_NEAR(*r.idle_accelerator_cost_usd, 0.96, kCent);
  EXPECT_FALSE(r.idle_threshold_cost_usd.value() > 0);
  // The --json contract.
  auto j = nlohmann::json::parse(CostReportToJson(r));
  EXPECT_EQ(j["instance_type"], "ml.p3.2xlarge");
  EXPECT_EQ(j["price"]["price_usd_per_hour"], 3.825);
  EXPECT_EQ(j["price"]["as_of"], "2021-11-29");
  EXPECT_FALSE(j["price"]["source"].get<std::string>().empty());
  EXPECT_EQ(j["billed_seconds"]["training"], 1800.0);
  EXPECT_NEAR(j["total_cost_usd"].get<double>(), 1.9154, 1e-4);
  EXPECT_NEAR(j["idle_accelerator_cost_usd"].get<double>(), 0.95625, 1e-6);
  EXPECT_TRUE(j["cost_per_step_usd"].is_null());  // no steps: n/a, not 0
  EXPECT_TRUE(j["what_ifs"].is_array());
  EXPECT_FALSE(j["warnings"].empty());  // the 2021 price
}

TEST(CostModelTest, RecordedShapedRunDetectsTheInstance) {
  // A run recorded on an EC2 host: no instance type anywhere; the node facts (8 vCPUs, 32 GiB,
  // one NVIDIA A10G) are a g5.2xlarge; not SageMaker-shaped, so EC2 at 1.212 $/h. 1 h -> $1.21.
  NodeSpec n;
  n.info = Node("ip-172-31-5-20");
  n.info.cpu_model = "AMD EPYC 7R32";
  n.info.cpu_cores = 8;
  n.info.memory_total_bytes = static_cast<int64_t>(31.4 * kGiB);
  n.info.gpus = {{0, "NVIDIA A10G", "GPU-1", static_cast<int64_t>(22.5 * kGiB)}};
  CostReport r = Cost(WriteRun(Meta("", 3600, "record"), {n}));
  EXPECT_EQ(r.nodes[0].instance_type, "g5.2xlarge");
  ASSERT_TRUE(r.nodes[0].detection.has_value());
  EXPECT_EQ(r.nodes[0].detection->confidence, "high");
  EXPECT_NEAR(r.total_cost_usd, 1.21, kCent);
  // --instance-type wins: ml.g5.2xlarge 1.515 $/h x 1 h = $1.515 (NVMe, no storage).
  CostOptions o;
  o.instance_type = "ml.g5.2xlarge";
  EXPECT_NEAR(Cost(WriteRun(Meta("", 3600, "record"), {n}), o).total_cost_usd, 1.515, 1e-9);
}

TEST(CostModelTest, ClearErrors) {
  NodeSpec n;
  n.info = Node("box");  // no facts to detect from
  std::string dir = WriteRun(Meta("", 3600, "record"), {n});
  auto run = store::RunReader::Open(dir);
  ASSERT_TRUE(run.ok());
  auto r = ComputeCost(**run, ShippedCatalog(), CostOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pass --instance-type"), std::string::npos);
  CostOptions o;
  o.instance_type = "ml.p5en.48xlarge";  // in the catalog without a price
  r = ComputeCost(**run, ShippedCatalog(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no price for ml.p5en.48xlarge"), std::string::npos);
  o.instance_type = "ml.nonexistent";
  r = ComputeCost(**run, ShippedCatalog(), o);
  EXPECT_NE(r.status().message().find("not in the catalog"), std::string::npos);
}

}  // namespace
}  // namespace trainprof::cost
