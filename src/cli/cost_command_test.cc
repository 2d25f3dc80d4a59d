// `trainprof cost`, `trainprof instances` and the cost column of `trainprof ls`, end to end
// through the command functions and Main(), on runs written with the real store writer.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "analyze/cost/catalog.h"
#include "base/files.h"
#include "base/test_dir.h"
#include "base/time.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/cost_command.h"
#include "store/run_directory.h"

namespace trainprof::cli {
namespace {

constexpr int64_t kT0 = 1793491200LL * kNanosPerSecond;  // 2026-11-01T00:00:00Z
constexpr int64_t kNow = kT0 + 29LL * 86400 * kNanosPerSecond;

std::string TempDir() { return MakeTestDir("trainprof_cost_cli"); }

// A SageMaker-shaped run: algo-1, ml.p3.8xlarge, 2 h with 20 min download and 5 min upload.
std::string WriteP3Run(const std::string& dir) {
  model::RunMetadata m;
  m.run_id = "p3-run";
  m.name = "p3";
  m.start_ns = kT0;
  m.end_ns = kT0 + 7200 * kNanosPerSecond;
  m.source = "import smdebug";
  m.instance_type = "ml.p3.8xlarge";
  EXPECT_TRUE(store::WriteRunMetadata(dir, m).ok());
  model::NodeInfo n;
  n.node = "algo-1";
  auto w = store::OpenNodeWriter(dir, n);
  EXPECT_TRUE(w.ok());
  auto phase = [&](const char* name, int64_t a, int64_t b) {
    model::Event e;
    e.name = name;
    e.category = "phase";
    e.start_ns = kT0 + a * kNanosPerSecond;
    e.duration_ns = (b - a) * kNanosPerSecond;
    (*w)->AppendEvent(e);
  };
  phase("download", 0, 1200);
  phase("training", 1200, 6900);
  phase("upload", 6900, 7200);
  EXPECT_TRUE((*w)->Close().ok());
  return dir;
}

TEST(CostCommandTest, JsonContract) {
  std::string run = WriteP3Run(TempDir() + "/runs/p3");
  CostCommandOptions o;
  o.run = run;
  o.json = true;
  o.now_ns = kNow;
  std::ostringstream out;
  ASSERT_TRUE(RunCost(o, out).ok());
  auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["instance_type"], "ml.p3.8xlarge");
  EXPECT_EQ(j["price"]["price_usd_per_hour"], 14.688);
  EXPECT_EQ(j["price"]["as_of"], "2021-11-29");
  EXPECT_NE(j["price"]["source"].get<std::string>().find("nlp-classification"), std::string::npos);
  EXPECT_EQ(j["billed_seconds"]["download"], 1200.0);
  EXPECT_EQ(j["billed_seconds"]["training"], 5700.0);
  EXPECT_EQ(j["billed_seconds"]["upload"], 300.0);
  // 14.688 x 2 h + 30 GB x 0.14 x 2 / 730 = 29.3875
  EXPECT_NEAR(j["total_cost_usd"].get<double>(), 29.39, 0.005);
  EXPECT_TRUE(j.contains("idle_accelerator_cost_usd"));
  EXPECT_TRUE(j.contains("cost_per_step_usd"));
  // Streaming input is proposed: the 20-min download (16.7 % of the bill) is 4.8979 $.
  ASSERT_TRUE(j["what_ifs"].is_array());
  bool streaming = false;
  for (const auto& w : j["what_ifs"]) {
    EXPECT_FALSE(w["evidence"].empty()) << w["id"];
    EXPECT_FALSE(w["assumptions"].empty()) << w["id"];
    if (w["id"] == "streaming_input") {
      streaming = true;
      EXPECT_NEAR(w["saving_usd"].get<double>(), 4.90, 0.005);
    }
  }
  EXPECT_TRUE(streaming);
  // Ranked by saving.
  for (size_t i = 1; i < j["what_ifs"].size(); ++i) {
    EXPECT_GE(j["what_ifs"][i - 1]["saving_usd"].get<double>(),
              j["what_ifs"][i]["saving_usd"].get<double>());
  }
}

TEST(CostCommandTest, TextAndMain) {
  std::string run = WriteP3Run(TempDir() + "/p3");
  CostCommandOptions o;
  o.run = run;
  o.now_ns = kNow;
  std::ostringstream out;
  ASSERT_TRUE(RunCost(o, out).ok());
  EXPECT_NE(out.str().find("download"), std::string::npos);
  EXPECT_NE(out.str().find("$29.39"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("days old"), std::string::npos);  // the 2021 price
  EXPECT_EQ(Main({"trainprof", "cost", run, "--json"}), kExitOk);
  EXPECT_EQ(Main({"trainprof", "cost", run, "--instances", "0"}), kExitUsage);
  EXPECT_EQ(Main({"trainprof", "cost", "/nonexistent/run"}), kExitFailure);
  EXPECT_EQ(Main({"trainprof", "cost", run, "--instance-type", "ml.nope"}), kExitFailure);
}

TEST(CostCommandTest, UserCatalogFileOverridesThePrice) {
  std::string dir = TempDir();
  std::string run = WriteP3Run(dir + "/p3");
  std::string mine = dir + "/mine.csv";
  ASSERT_TRUE(WriteFileAtomically(mine,
                                  "instance_type,price_usd_per_hour,price_source,price_as_of\n"
                                  "ml.p3.8xlarge,10.0,our contract,2026-11-01\n")
                  .ok());
  CostCommandOptions o;
  o.run = run;
  o.catalog = mine;
  o.json = true;
  o.now_ns = kNow;
  std::ostringstream out;
  ASSERT_TRUE(RunCost(o, out).ok());
  auto j = nlohmann::json::parse(out.str());
  // 10 x 2 h + 0.0115 storage = 20.0115 -> $20.01; the new price is recent: no age warning.
  EXPECT_NEAR(j["total_cost_usd"].get<double>(), 20.01, 0.005);
  EXPECT_EQ(j["price"]["source"], "our contract");
  for (const auto& w : j["warnings"]) {
    EXPECT_EQ(w.get<std::string>().find("days old"), std::string::npos);
  }
  // A bad file is an error naming file, line and field.
  ASSERT_TRUE(WriteFileAtomically(mine,
                                  "instance_type,price_usd_per_hour,price_source,price_as_of\n"
                                  "ml.p3.8xlarge,ten,our contract,2026-11-01\n")
                  .ok());
  Status s = RunCost(o, out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), mine + ":2: field 'price_usd_per_hour': 'ten' is not a number");
}

TEST(CostCommandTest, InstancesFilters) {
  InstancesOptions o;
  o.gpu = "a100";
  o.max_price = 10;
  o.json = true;
  o.now_ns = kNow;
  std::ostringstream out;
  ASSERT_TRUE(RunInstances(o, out).ok());
  auto j = nlohmann::json::parse(out.str());
  // A100 rows at most 10 $/h: a2-highgpu-1g 3.6734, Standard_NC24ads_A100_v4 3.673,
  // a2-ultragpu-1g 5.0688, Standard_NC48ads_A100_v4 9.554.
  ASSERT_EQ(j["instances"].size(), 4u);
  EXPECT_EQ(j["instances"][0]["instance_type"], "Standard_NC24ads_A100_v4");  // cheapest first
  for (const auto& r : j["instances"]) {
    EXPECT_LE(r["price_usd_per_hour"].get<double>(), 10);
    EXPECT_FALSE(r["price_as_of"].get<std::string>().empty());
    EXPECT_FALSE(r["price_source"].get<std::string>().empty());
  }
  InstancesOptions p;
  p.provider = "aws";
  p.service = "sagemaker-training";
  p.gpu = "V100";
  p.now_ns = kNow;
  std::ostringstream text;
  ASSERT_TRUE(RunInstances(p, text).ok());
  EXPECT_NE(text.str().find("ml.p3.8xlarge"), std::string::npos);
  EXPECT_NE(text.str().find("2021-11-29 (old)"), std::string::npos);
  EXPECT_NE(text.str().find("older than 180 days"), std::string::npos);
  EXPECT_EQ(Main({"trainprof", "instances", "--gpu", "H100", "--json"}), kExitOk);
}

// `trainprof ls DIR --json`, parsed.
nlohmann::json LsJson(const std::string& dir) {
  LsOptions ls;
  ls.dir = dir;
  ls.json = true;
  std::ostringstream out;
  EXPECT_TRUE(RunLs(ls, out).ok());
  return nlohmann::json::parse(out.str());
}

TEST(CostCommandTest, LsShowsCostWhenRunNamesItsInstance) {
  std::string dir = TempDir();
  WriteP3Run(dir + "/p3");
  DemoOptions demo;
  demo.out = dir + "/demo";
  demo.duration_s = 20;
  std::ostringstream ignored;
  ASSERT_TRUE(RunDemo(demo, ignored).ok());
  auto j = LsJson(dir);
  ASSERT_EQ(j["runs"].size(), 2u);
  for (const auto& r : j["runs"]) {
    if (r["name"] == "p3") {
      EXPECT_EQ(r["instance_type"], "ml.p3.8xlarge");
      // 14.688 x 2 h x 1 instance = 29.376 (the listing's quick estimate: no storage).
      EXPECT_NEAR(r["cost_usd_estimate"].get<double>(), 29.376, 1e-9);
    } else {
      EXPECT_TRUE(r["cost_usd_estimate"].is_null());
    }
  }
  LsOptions ls;
  ls.dir = dir;
  std::ostringstream text;
  ASSERT_TRUE(RunLs(ls, text).ok());
  EXPECT_NE(text.str().find("$29.38"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("COST (EST.)"), std::string::npos);
  // Every price it used, with its date and source.
  EXPECT_NE(text.str().find("ml.p3.8xlarge: $14.6880/h, price of 2021-11-29 (https://github.com/"),
            std::string::npos)
      << text.str();
}

TEST(CostCommandTest, LsPricesASpotRunAsCostBillsIt) {
  // A run tagged managed_spot=true: the listing took the on-demand price (29.376) where
  // `trainprof cost` bills spot. ml.p3.8xlarge's catalog discount is 64 %: 14.688 x 0.36 x 2 h
  // = $10.57536, the bill's compute part.
  std::string dir = TempDir();
  const std::string run = WriteP3Run(dir + "/p3spot");
  auto meta = store::ReadRunMetadata(run);
  ASSERT_TRUE(meta.ok());
  meta->tags["managed_spot"] = "true";
  ASSERT_TRUE(store::WriteRunMetadata(run, *meta).ok());
  auto j = LsJson(dir);
  ASSERT_EQ(j["runs"].size(), 1u);
  const auto& r = j["runs"][0];
  EXPECT_NEAR(r["cost_usd_estimate"].get<double>(), 14.688 * 0.36 * 2, 1e-9);
  EXPECT_EQ(r["price"]["spot"], true);
  EXPECT_EQ(r["price"]["as_of"], "2021-11-29");
  EXPECT_FALSE(r["price"]["spot_as_of"].get<std::string>().empty());
  CostCommandOptions o;
  o.run = run;
  o.json = true;
  std::ostringstream bill;
  ASSERT_TRUE(RunCost(o, bill).ok());
  auto b = nlohmann::json::parse(bill.str());
  EXPECT_NEAR(b["compute_cost_usd"].get<double>(), r["cost_usd_estimate"].get<double>(), 1e-9);
}

TEST(CostCommandTest, DemoRunWithAnInstanceType) {
  // The demo's "Demo GPU" cannot be recognised: detection says so, --instance-type fixes it.
  std::string dir = TempDir() + "/demo";
  DemoOptions demo;
  demo.out = dir;
  demo.duration_s = 60;
  std::ostringstream ignored;
  ASSERT_TRUE(RunDemo(demo, ignored).ok());
  CostCommandOptions o;
  o.run = dir;
  std::ostringstream out;
  Status s = RunCost(o, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Demo GPU"), std::string::npos) << s.message();
  o.instance_type = "ml.g5.12xlarge";
  o.json = true;
  ASSERT_TRUE(RunCost(o, out).ok()) << out.str();
  auto j = nlohmann::json::parse(out.str());
  // 7.09 $/h x 60 s = 0.11817 $; the demo's steps give a cost per step.
  EXPECT_NEAR(j["total_cost_usd"].get<double>(), 7.09 / 60, 1e-9);
  EXPECT_FALSE(j["cost_per_step_usd"].is_null());
  EXPECT_FALSE(j["idle_accelerator_cost_usd"].is_null());
}

}  // namespace
}  // namespace trainprof::cli
