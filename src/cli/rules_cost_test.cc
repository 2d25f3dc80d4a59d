// The rules' findings with their cost impact, end to end: real rules evaluated on a run written
// with the real store writer, priced from the shipped catalog by `trainprof rules`, the report
// and `record`'s end of run. Expected dollars are worked out by hand from data/catalog.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/test_dir.h"
#include "base/time.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/cost_command.h"
#include "cli/report_providers.h"
#include "store/run_directory.h"

namespace trainprof::cli {
namespace {

constexpr int64_t kT0 = 1793491200LL * kNanosPerSecond;  // 2026-11-01T00:00:00Z
constexpr double kCent = 0.005;

std::string TempDir() { return MakeTestDir("trainprof_rules_cost"); }

int64_t At(double s) { return kT0 + static_cast<int64_t>(s * 1e9); }

// algo-1, 2 h, 4 GPUs sampled every second from 1 s to 1500 s: gpu1 at 20 %, the others at 90 %.
// LowGPUUtilization (no steps: after patience, 1000 values) judges gpu1 from value 1001; 52
// values below 70 % (blocks of 2 s, values 1001..1052) put the upper bound of its share at or
// above 70 % under 5 % (2.7055 / (52 + 2.7055) = 0.049).
std::string WriteRun(const std::string& dir, const std::string& instance_type) {
  model::RunMetadata m;
  m.run_id = "gpu-run";
  m.name = "gpu";
  m.start_ns = kT0;
  m.end_ns = At(7200);
  m.source = "import smdebug";
  m.instance_type = instance_type;
  EXPECT_TRUE(store::WriteRunMetadata(dir, m).ok());
  model::NodeInfo n;
  n.node = "algo-1";
  auto w = store::OpenNodeWriter(dir, n);
  EXPECT_TRUE(w.ok());
  for (int g = 0; g < 4; ++g) {
    auto s = (*w)->Series("gpu_utilization_ratio", "gpu" + std::to_string(g));
    for (int i = 1; i <= 1500; ++i) (*w)->Append(s, At(i), g == 1 ? 0.2 : 0.9);
  }
  EXPECT_TRUE((*w)->Close().ok());
  return dir;
}

RulesOptions Options(const std::string& run) {
  RulesOptions o;
  o.run = run;
  o.json = true;
  return o;
}

const nlohmann::json* OnlyFinding(const nlohmann::json& j, const std::string& rule) {
  for (const auto& r : j["rules"]) {
    if (r["name"] == rule && r["findings"].size() == 1) return &r["findings"][0];
  }
  return nullptr;
}

TEST(RulesCostTest, LowGpuUtilizationFindingInDollars) {
  std::string run = WriteRun(TempDir() + "/run", "ml.p3.8xlarge");
  std::ostringstream out;
  ASSERT_TRUE(RunRules(Options(run), out).ok()) << out.str();
  auto j = nlohmann::json::parse(out.str());
  const nlohmann::json* f = OnlyFinding(j, "LowGPUUtilization");
  ASSERT_NE(f, nullptr) << out.str();
  EXPECT_EQ((*f)["device"], "gpu1");
  EXPECT_EQ((*f)["start_ns"], At(1001));
  EXPECT_EQ((*f)["end_ns"], At(1052));
  // ml.p3.8xlarge 14.688 $/h / 4 GPUs = 3.672 $/h per GPU; the span that decided it is 51 s at
  // 20 %: 3.672 x 51 / 3600 x 0.8 = 0.041616 -> $0.04.
  ASSERT_TRUE((*f)["cost_usd"].is_number()) << f->dump();
  EXPECT_NEAR((*f)["cost_usd"].get<double>(), 0.04, kCent);
  EXPECT_NEAR((*f)["cost_usd"].get<double>(), 0.041616, 1e-9);
  const std::string basis = (*f)["cost_basis"];
  EXPECT_NE(basis.find("$14.688/h"), std::string::npos) << basis;
  EXPECT_NE(basis.find("as of 2021-11-29"), std::string::npos) << basis;
  EXPECT_NE(basis.find("idle share 80.0 %"), std::string::npos) << basis;
  // Every finding carries the fields, priced or not.
  for (const auto& r : j["rules"]) {
    for (const auto& x : r["findings"]) {
      EXPECT_TRUE(x.contains("cost_usd"));
      EXPECT_TRUE(x.contains("cost_basis"));
    }
  }
  // The text output shows it.
  RulesOptions text = Options(run);
  text.json = false;
  std::ostringstream t;
  ASSERT_TRUE(RunRules(text, t).ok());
  EXPECT_NE(t.str().find("cost impact: ≈ $0.04 (gpu1 idle share 80.0 %"), std::string::npos)
      << t.str();
}

// The evidence the real rules write is what the prices read: CPUBottleneck (a core at 95 %
// while the 4 GPUs idle at 5 %, 1200 samples 1 s apart) and DataLoaderStarvation (60 steps of
// 1 s, each waiting 0.5 s for data, rank 0 alone on the node).
TEST(RulesCostTest, RealRuleEvidenceIsPriced) {
  std::string dir = TempDir() + "/run";
  model::RunMetadata m;
  m.run_id = "bottleneck";
  m.start_ns = kT0;
  m.end_ns = At(7200);
  m.instance_type = "ml.p3.8xlarge";
  ASSERT_TRUE(store::WriteRunMetadata(dir, m).ok());
  model::NodeInfo n;
  n.node = "algo-1";
  auto w = store::OpenNodeWriter(dir, n);
  ASSERT_TRUE(w.ok());
  auto cpu = (*w)->Series("cpu_utilization_ratio", "cpu0");
  for (int i = 1; i <= 1200; ++i) (*w)->Append(cpu, At(i), 0.95);
  for (int g = 0; g < 4; ++g) {
    auto s = (*w)->Series("gpu_utilization_ratio", "gpu" + std::to_string(g));
    for (int i = 1; i <= 1200; ++i) (*w)->Append(s, At(i), 0.05);
  }
  for (int i = 0; i < 60; ++i) {
    auto span = [&](const char* name, const char* category, double start, double dur) {
      model::Event e;
      e.name = name;
      e.category = category;
      e.start_ns = At(start);
      e.duration_ns = At(start + dur) - At(start);
      e.mode = "train";
      e.step = i;
      e.rank = 0;
      e.pid = 100;
      e.tid = 100;
      (*w)->AppendEvent(std::move(e));
    };
    span("step", model::kCategoryStep, 2000 + i, 1);
    span("data_wait", model::kCategoryDataWait, 2000 + i, 0.5);
  }
  ASSERT_TRUE((*w)->Close().ok());

  std::ostringstream out;
  ASSERT_TRUE(RunRules(Options(dir), out).ok()) << out.str();
  auto j = nlohmann::json::parse(out.str());
  // CPUBottleneck (no steps: judged after patience, 1000 samples) fires once a span of 20 s is
  // decisive: blocks of 2 s from sample 1001, the 11th ends at 1022 and closes at 1023: 23
  // samples x 4 idle GPUs = 92 GPU-samples, 1 s apart -> 92 x 3.672 $/h / 3600 = 0.09384.
  const nlohmann::json* c = OnlyFinding(j, "CPUBottleneck");
  ASSERT_NE(c, nullptr) << out.str();
  EXPECT_EQ((*c)["evidence"]["idle_gpu_samples"], 92);
  EXPECT_NEAR((*c)["cost_usd"].get<double>(), 0.09, kCent);
  EXPECT_NEAR((*c)["cost_usd"].get<double>(), 92 * 3.672 / 3600, 1e-9);
  // DataLoaderStarvation: decided by the bound over steps 5..24 (the 20 steps after the 5
  // warm-up steps, its shortest span): 20 x 0.5 s = 10 s of the whole instance (one rank):
  // 10 x (14.688 + 30 x 0.14 / 730) / 3600 = 0.040816 -> $0.04.
  const nlohmann::json* d = OnlyFinding(j, "DataLoaderStarvation");
  ASSERT_NE(d, nullptr) << out.str();
  EXPECT_EQ((*d)["evidence"]["first_step"], 5);
  EXPECT_EQ((*d)["evidence"]["last_step"], 24);
  EXPECT_NEAR((*d)["cost_usd"].get<double>(), 0.04, kCent);
  EXPECT_NEAR((*d)["cost_usd"].get<double>(), 10 * (14.688 + 30 * 0.14 / 730) / 3600, 1e-6);
  EXPECT_NE((*d)["cost_basis"].get<std::string>().find("the only rank on the node"),
            std::string::npos);
}

TEST(RulesCostTest, WithoutAPriceTheCostIsAbsentAndSaysWhy) {
  std::string run = WriteRun(TempDir() + "/run", "");
  std::ostringstream out;
  ASSERT_TRUE(RunRules(Options(run), out).ok()) << out.str();
  auto j = nlohmann::json::parse(out.str());
  const nlohmann::json* f = OnlyFinding(j, "LowGPUUtilization");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE((*f)["cost_usd"].is_null());
  const std::string basis = (*f)["cost_basis"];
  EXPECT_NE(basis.find("no price: no instance type for node 'algo-1'"), std::string::npos) << basis;
  EXPECT_NE(basis.find("--instance-type"), std::string::npos) << basis;

  // --instance-type prices it; --price-usd-per-hour overrides the catalog's price:
  // 10 $/h / 4 GPUs = 2.5 $/h; 2.5 x 51 / 3600 x 0.8 = 0.028333 -> $0.03.
  RulesOptions o = Options(run);
  o.pricing.instance_type = "ml.p3.8xlarge";
  o.pricing.price_usd_per_hour = 10;
  std::ostringstream priced;
  ASSERT_TRUE(RunRules(o, priced).ok()) << priced.str();
  auto p = nlohmann::json::parse(priced.str());
  f = OnlyFinding(p, "LowGPUUtilization");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR((*f)["cost_usd"].get<double>(), 0.03, kCent);
  EXPECT_NE((*f)["cost_basis"].get<std::string>().find("--price-usd-per-hour"), std::string::npos);
  // Bad pricing options are refused by name; the options parse through Main.
  o.pricing.price_usd_per_hour = -1;
  std::ostringstream bad;
  Status s = RunRules(o, bad);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--price-usd-per-hour"), std::string::npos);
  o.pricing.price_usd_per_hour = 10;
  o.pricing.catalog = TempDir() + "/missing.csv";
  s = RunRules(o, bad);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing.csv"), std::string::npos) << s.message();
  EXPECT_EQ(Main({"trainprof", "rules", run, "--json", "--instance-type", "ml.p3.8xlarge",
                  "--price-usd-per-hour", "10", "--rule", "LowGPUUtilization.window=500"}),
            kExitOk);
}

TEST(RulesCostTest, ReportFindingsCarryTheirCost) {
  std::string run = WriteRun(TempDir() + "/run", "ml.p3.8xlarge");
  // `record`'s end of run: rules (stored), cost, the rules that fired with their cost impact,
  // and the report with the cost of each finding.
  std::ostringstream summary;
  FinishRecordedRun(run, summary);
  EXPECT_NE(summary.str().find("rule LowGPUUtilization fired"), std::string::npos) << summary.str();
  EXPECT_NE(summary.str().find("cost impact ≈ $0.04 (gpu1 idle share"), std::string::npos)
      << summary.str();
  std::ifstream in(run + "/report.json");
  auto j = nlohmann::json::parse(in);
  bool found = false;
  for (const auto& r : j["rules"]["rules"]) {
    for (const auto& f : r["findings"]) {
      if (f["rule"] != "LowGPUUtilization") continue;
      found = true;
      EXPECT_NEAR(f["cost_usd"].get<double>(), 0.041616, 1e-9);
      EXPECT_NE(f["cost_basis"].get<std::string>().find("2021-11-29"), std::string::npos);
    }
  }
  EXPECT_TRUE(found) << j["rules"].dump();
  std::ifstream html(run + "/report.html");
  std::stringstream page;
  page << html.rdbuf();
  EXPECT_NE(page.str().find("Cost impact: ≈ $0.04"), std::string::npos);
}

// A planted 2-rank DDP job on one ml.g5.12xlarge (7.09 $/h, local NVMe: no storage line),
// 300 ms per step for both ranks: rank 1 loses 100 ms between its 200 ms steps (20 ms of them
// in all_reduce); rank 0 waits 120 ms in all_reduce inside its 300 ms steps. Rank 1 is the
// cause: 280 ms of its own per step against the median 230 ms. The first 60-s window holds 200
// steps of each rank, so the other rank waits (280 - 230) ms x 200 steps x 1 rank = 10 s, at
// the rank's half of the instance: 10 x 7.09 / 3600 / 2 = $0.0098472.
TEST(RulesCostTest, PlantedStragglerIsTheCauseAndPricedFromItsOwnTime) {
  std::string dir = TempDir() + "/run";
  model::RunMetadata m;
  m.run_id = "ddp";
  m.start_ns = kT0;
  m.end_ns = At(300);
  m.instance_type = "ml.g5.12xlarge";
  ASSERT_TRUE(store::WriteRunMetadata(dir, m).ok());
  model::NodeInfo n;
  n.node = "algo-1";
  auto w = store::OpenNodeWriter(dir, n);
  ASSERT_TRUE(w.ok());
  auto span = [&](const char* name, const char* category, int64_t start, int64_t dur, int64_t rank,
                  int64_t step) {
    model::Event e;
    e.name = name;
    e.category = category;
    e.start_ns = start;
    e.duration_ns = dur;
    e.rank = rank;
    e.pid = 100 + rank;
    e.tid = e.pid;
    if (step >= 0) {
      e.mode = "train";
      e.step = step;
    }
    (*w)->AppendEvent(std::move(e));
  };
  constexpr int64_t kMs = 1'000'000;
  for (int64_t step = 0; step < 1000; ++step) {
    const int64_t t = kT0 + step * 300 * kMs;
    span("step", model::kCategoryStep, t, 300 * kMs, 0, step);
    span("all_reduce", "collective", t + 160 * kMs, 120 * kMs, 0, -1);
    span("step", model::kCategoryStep, t + 100 * kMs, 200 * kMs, 1, step);
    span("all_reduce", "collective", t + 260 * kMs, 20 * kMs, 1, -1);
  }
  ASSERT_TRUE((*w)->Close().ok());
  std::ostringstream out;
  RulesOptions o = Options(dir);
  o.overrides = {"StragglerRank.threshold_ratio=1.15"};
  ASSERT_TRUE(RunRules(o, out).ok()) << out.str();
  auto j = nlohmann::json::parse(out.str());
  const nlohmann::json* f = OnlyFinding(j, "StragglerRank");
  ASSERT_NE(f, nullptr) << out.str();
  EXPECT_EQ((*f)["device"], "rank1");
  // Named by the check of the open window on each rank's last 40 steps (issue 19): rank 0
  // waited 50 ms for it on each of them, 2 s in all.
  EXPECT_EQ((*f)["evidence"]["steps_in_window"], 40);
  EXPECT_EQ((*f)["evidence"]["decided"], "early (open window)");
  EXPECT_NEAR((*f)["evidence"]["ratio"].get<double>(), 1.2174, 1e-9);
  ASSERT_TRUE((*f)["cost_usd"].is_number()) << f->dump();
  EXPECT_NEAR((*f)["cost_usd"].get<double>(), 2 * 7.09 / 3600 / 2, 1e-9);
}

// A CPU-only job (4 cores, no GPU listed or sampled) on its own ml.m5.xlarge (4 vCPUs, no
// accelerator): steps of 1 s waiting 0.6 s for data, CPU 50 % busy. The stall is found and
// priced, and no rule, report line or what-if gives GPU advice.
TEST(RulesCostTest, CpuOnlyJobGetsNoGpuAdviceAnywhere) {
  std::string run = TempDir() + "/run";
  model::RunMetadata m;
  m.run_id = "cpu";
  m.start_ns = kT0;
  m.end_ns = At(600);
  m.source = "record";
  m.instance_type = "ml.m5.xlarge";
  ASSERT_TRUE(store::WriteRunMetadata(run, m).ok());
  model::NodeInfo n;
  n.node = "algo-1";
  n.cpu_cores = 4;
  n.memory_total_bytes = 16LL << 30;
  auto w = store::OpenNodeWriter(run, n);
  ASSERT_TRUE(w.ok());
  for (int c = 0; c <= 4; ++c) {
    auto s = (*w)->Series("cpu_utilization_ratio", c == 4 ? "total" : "cpu" + std::to_string(c));
    for (int i = 1; i <= 600; ++i) (*w)->Append(s, At(i), 0.5);
  }
  for (int i = 0; i < 500; ++i) {
    auto span = [&](const char* name, const char* category, double start, double dur) {
      model::Event e;
      e.name = name;
      e.category = category;
      e.start_ns = At(start);
      e.duration_ns = At(start + dur) - At(start);
      e.mode = "train";
      e.step = i;
      e.pid = 100;
      e.tid = 100;
      (*w)->AppendEvent(std::move(e));
    };
    span("step", model::kCategoryStep, 50 + i, 1);
    span("data_wait", model::kCategoryDataWait, 50 + i, 0.6);
  }
  ASSERT_TRUE((*w)->Close().ok());
  std::ostringstream summary;
  FinishRecordedRun(run, summary);
  std::ifstream in(run + "/report.json");
  auto j = nlohmann::json::parse(in);
  // The planted stall, 60 % waiting, decided over steps 5-24 (the 20 steps after the 5 warm-up
  // steps); priced as 20 x 0.6 s = 12 s of the instance: 0.23 $/h + 30 GB x 0.14 $/GB-month /
  // 730 h = 6.548706e-5 $/s -> $0.00078585.
  bool stall = false;
  std::vector<std::string> advice;
  for (const auto& r : j["rules"]["rules"]) {
    for (const auto& f : r["findings"]) {
      advice.push_back(f["recommendation"]);
      advice.push_back(f["message"]);
      if (f["rule"] != "DataLoaderStarvation") continue;
      stall = true;
      auto ev = f["evidence"].is_string() ? nlohmann::json::parse(f["evidence"].get<std::string>())
                                          : f["evidence"];
      EXPECT_DOUBLE_EQ(ev["data_wait_share"].get<double>(), 0.6);
      EXPECT_EQ(ev["first_step"], 5);
      EXPECT_EQ(ev["last_step"], 24);
      EXPECT_EQ(ev["gpu"], false);
      EXPECT_NEAR(f["cost_usd"].get<double>(), 12 * (0.23 / 3600 + 30 * 0.14 / (730 * 3600.0)),
                  1e-9);
    }
  }
  EXPECT_TRUE(stall) << j["rules"].dump();
  for (const auto& c : j["summary"]["top_changes"]) {
    advice.push_back(c["title"]);
    advice.push_back(c["detail"]);
  }
  std::ostringstream cost_out;
  CostCommandOptions co;
  co.run = run;
  co.json = true;
  ASSERT_TRUE(RunCost(co, cost_out).ok()) << cost_out.str();
  auto cost = nlohmann::json::parse(cost_out.str());
  for (const auto& wi : cost["what_ifs"]) {
    advice.push_back(wi["title"]);
    advice.push_back(wi["action"]);
  }
  for (const auto& wn : cost["warnings"]) advice.push_back(wn);
  EXPECT_GE(advice.size(), 4u);
  for (const std::string& text : advice) {
    for (const char* word : {"GPU", "accelerator", "pin_memory", "pin host memory", "CUDA"}) {
      EXPECT_EQ(text.find(word), std::string::npos) << word << " in: " << text;
    }
  }
}

}  // namespace
}  // namespace trainprof::cli
