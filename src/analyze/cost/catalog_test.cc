#include "analyze/cost/catalog.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "analyze/cost/csv.h"
#include "base/files.h"
#include "base/time.h"

namespace trainprof::cost {
namespace {

const std::string kCatalogDir = std::string(TRAINPROF_SOURCE_DIR) + "/data/catalog";
const std::string kSharedCloud = std::string(TRAINPROF_SOURCE_DIR) + "/../shared/data/cloud";

Catalog Shipped() {
  auto c = LoadCatalogDir(kCatalogDir);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(c).value();
}

int64_t Date(const std::string& d) { return *ParseDateDays(d) * 86400 * kNanosPerSecond; }

TEST(CsvTest, QuotesNewlinesAndLineNumbers) {
  auto t = ParseCsv("a,b\n1,\"x, \"\"y\"\"\"\n2,\"multi\nline\"\n3,z\n", "t.csv");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->records.size(), 3u);
  EXPECT_EQ(t->records[0].cells[1], "x, \"y\"");
  EXPECT_EQ(t->records[1].cells[1], "multi\nline");
  EXPECT_EQ(t->records[2].line, 5);  // the quoted newline counts
  auto bad = ParseCsv("a,b\n1,2,3\n", "t.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "t.csv:2: 3 cells, the header has 2");
  EXPECT_FALSE(ParseCsv("a\n\"open\n", "t.csv").ok());
}

TEST(CatalogTest, ShippedCatalogMatchesTheResearchTable) {
  Catalog c = Shipped();
  // 54 SageMaker rows + 54 EC2 twins + 13 GCP + 7 Azure.
  EXPECT_EQ(c.instances.size(), 128u);
  EXPECT_EQ(c.accelerators.size(), 15u);
  const InstanceType* p3 = FindInstance(c, "ml.p3.8xlarge");
  ASSERT_NE(p3, nullptr);
  EXPECT_DOUBLE_EQ(*p3->price_usd_per_hour, 14.688);
  EXPECT_EQ(p3->price_as_of, "2021-11-29");
  EXPECT_EQ(*p3->local_nvme_gb, 0);
  EXPECT_EQ(p3->AcceleratorCount(), 4);
  EXPECT_FALSE(p3->price_source.empty());
  const InstanceType* ec2 = FindInstance(c, "P4D.24xlarge");  // case-insensitive
  ASSERT_NE(ec2, nullptr);
  EXPECT_EQ(ec2->service, "ec2");
  EXPECT_DOUBLE_EQ(*ec2->price_usd_per_hour, 21.957642);
  EXPECT_EQ(ec2->price_as_of, "2026-07-20");
  // An empty cell is not found, never 0.
  const InstanceType* p5en = FindInstance(c, "ml.p5en.48xlarge");
  ASSERT_NE(p5en, nullptr);
  EXPECT_FALSE(p5en->price_usd_per_hour.has_value());
  EXPECT_FALSE(FindInstance(c, "ml.p4d.24xlarge")->spot_discount_pct.has_value());
  const StoragePrice* st = FindStorage(c, "aws", "sagemaker-training", "us-east-1");
  ASSERT_NE(st, nullptr);
  EXPECT_DOUBLE_EQ(st->price_usd_per_gb_month, 0.14);
  // Every price has a date and a source.
  for (const InstanceType& t : c.instances) {
    if (!t.price_usd_per_hour) continue;
    EXPECT_TRUE(ParseDateDays(t.price_as_of).has_value()) << t.instance_type;
    EXPECT_FALSE(t.price_source.empty()) << t.instance_type;
  }
}

TEST(CatalogTest, ShippedCatalogIsTheResearchTable) {
  // The shipped prices agree with ../shared/data/cloud/instances.csv, row by row.
  auto text = ReadFileToString(kSharedCloud + "/instances.csv");
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto table = ParseCsv(*text, "instances.csv");
  ASSERT_TRUE(table.ok());
  Catalog c = Shipped();
  size_t type = *table->Column("instance_type"), price = *table->Column("ondemand_usd_hr");
  size_t ec2 = *table->Column("ec2_equivalent"), ec2_price = *table->Column("ec2_ondemand_usd_hr");
  for (const CsvRecord& r : table->records) {
    const InstanceType* row = FindInstance(c, r.cells[type]);
    ASSERT_NE(row, nullptr) << r.cells[type];
    if (r.cells[price].empty()) {
      EXPECT_FALSE(row->price_usd_per_hour.has_value()) << r.cells[type];
    } else {
      EXPECT_DOUBLE_EQ(*row->price_usd_per_hour, std::stod(r.cells[price])) << r.cells[type];
    }
    if (!r.cells[ec2].empty() && !r.cells[ec2_price].empty()) {
      const InstanceType* e = FindInstance(c, r.cells[ec2]);
      ASSERT_NE(e, nullptr) << r.cells[ec2];
      EXPECT_DOUBLE_EQ(*e->price_usd_per_hour, std::stod(r.cells[ec2_price]));
    }
  }
}

TEST(CatalogTest, EmbeddedCopyEqualsTheFiles) {
  auto embedded = LoadEmbeddedCatalog();
  ASSERT_TRUE(embedded.ok()) << embedded.status().message();
  Catalog files = Shipped();
  ASSERT_EQ(embedded->instances.size(), files.instances.size());
  for (size_t i = 0; i < files.instances.size(); ++i) {
    EXPECT_EQ(embedded->instances[i].instance_type, files.instances[i].instance_type);
    EXPECT_EQ(embedded->instances[i].price_usd_per_hour, files.instances[i].price_usd_per_hour);
  }
  auto def = LoadDefaultCatalog();
  ASSERT_TRUE(def.ok()) << def.status().message();
  EXPECT_EQ(def->instances.size(), files.instances.size());
  // A binary in the build tree has no catalog installed beside it: it uses the embedded copy and
  // never the source tree's data/catalog (installed builds must not depend on the build machine;
  // tests/python/test_wheel.py checks the installed package's own copy is used).
  if (std::getenv("TRAINPROF_CATALOG_DIR") == nullptr) {
    EXPECT_EQ(def->origin, embedded->origin);
  }
}

TEST(CatalogTest, BadRowsNameFileLineAndField) {
  Catalog c = Shipped();
  std::string header = "instance_type,price_usd_per_hour,price_source,price_as_of\n";
  auto s = MergeInstancesText(&c, header + "ml.x.large,abc,me,2026-01-01\n", "mine.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "mine.csv:2: field 'price_usd_per_hour': 'abc' is not a number");
  s = MergeInstancesText(&c, header + "ml.x.large,1.5,me,2026-13-01\n", "mine.csv");
  EXPECT_EQ(s.message(),
            "mine.csv:2: field 'price_as_of': '2026-13-01' is not a date (YYYY-MM-DD)");
  s = MergeInstancesText(&c, header + "ml.x.large,1.5,,2026-01-01\n", "mine.csv");
  EXPECT_EQ(s.message(), "mine.csv:2: field 'price_source': a price needs its source");
  s = MergeInstancesText(&c, header + "ml.x.large,-1,me,2026-01-01\n", "mine.csv");
  EXPECT_EQ(s.message(), "mine.csv:2: field 'price_usd_per_hour': '-1' is negative");
  s = MergeInstancesText(&c, "instance_type,price_usd_per_hour\nx,1\n", "mine.csv");
  EXPECT_EQ(s.message(), "mine.csv:1: missing column 'price_source'");
}

TEST(CatalogTest, UserRowsOverrideAndExtend) {
  Catalog c = Shipped();
  std::string text =
      "instance_type,price_usd_per_hour,price_source,price_as_of,accel_count,accel_model\n"
      "ml.p4d.24xlarge,20.0,our EDP contract,2026-11-01,,\n"
      "onprem.8xa100,9.5,internal chargeback,2026-10-01,8,A100-80GB\n";
  ASSERT_TRUE(MergeInstancesText(&c, text, "mine.csv").ok());
  const InstanceType* p4d = FindInstance(c, "ml.p4d.24xlarge");
  EXPECT_DOUBLE_EQ(*p4d->price_usd_per_hour, 20.0);
  EXPECT_EQ(p4d->price_source, "our EDP contract");
  EXPECT_EQ(p4d->AcceleratorCount(), 8);  // the spec cells left empty keep the shipped values
  EXPECT_DOUBLE_EQ(*p4d->local_nvme_gb, 8000);
  const InstanceType* mine = FindInstance(c, "onprem.8xa100");
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->provider, "custom");
  EXPECT_EQ(mine->accel_model, "A100-80GB");
}

TEST(CatalogTest, StalePricesWarnAfter180Days) {
  Catalog c = Shipped();
  const int64_t now = Date("2026-11-30");
  auto w = StalePriceWarnings(*FindInstance(c, "ml.p3.8xlarge"), now, 180);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("2021-11-29 (1827 days old"), std::string::npos) << w[0];
  EXPECT_TRUE(StalePriceWarnings(*FindInstance(c, "ml.p4d.24xlarge"), now, 180).empty());
  // 2026-09-27 + 181 days.
  EXPECT_EQ(StalePriceWarnings(*FindInstance(c, "ml.p4d.24xlarge"), Date("2027-03-27"), 180).size(),
            1u);
  EXPECT_EQ(*AgeDays("2026-09-27", now), 64);
}

TEST(CatalogTest, TypicalSpotDiscount) {
  Catalog c = Shipped();
  std::string basis;
  EXPECT_DOUBLE_EQ(TypicalSpotDiscountPct(c, *FindInstance(c, "ml.g5.2xlarge"), &basis), 62);
  // g6.xlarge has no figure; its family has one (g6.2xlarge, 46 %).
  EXPECT_DOUBLE_EQ(TypicalSpotDiscountPct(c, *FindInstance(c, "ml.g6.xlarge"), &basis), 46);
  EXPECT_NE(basis.find("g6 family"), std::string::npos);
  // p4d: nothing in the family; the planning default.
  EXPECT_DOUBLE_EQ(TypicalSpotDiscountPct(c, *FindInstance(c, "ml.p4d.24xlarge"), &basis), 55);
}

TEST(CatalogTest, GpuNames) {
  EXPECT_EQ(AcceleratorModelFromGpuName("NVIDIA A100-SXM4-40GB", 42'949'672'960), "A100-40GB");
  EXPECT_EQ(AcceleratorModelFromGpuName("NVIDIA A100-SXM4-80GB", std::nullopt), "A100-80GB");
  EXPECT_EQ(AcceleratorModelFromGpuName("Tesla V100-SXM2-16GB", std::nullopt), "V100-16GB");
  EXPECT_EQ(AcceleratorModelFromGpuName("Tesla V100-SXM2-32GB", std::nullopt), "V100-32GB");
  EXPECT_EQ(AcceleratorModelFromGpuName("NVIDIA H100 80GB HBM3", std::nullopt), "H100-80GB");
  EXPECT_EQ(AcceleratorModelFromGpuName("NVIDIA H200", std::nullopt), "H200-141GB");
  EXPECT_EQ(AcceleratorModelFromGpuName("NVIDIA A10G", std::nullopt), "A10G");
  EXPECT_EQ(AcceleratorModelFromGpuName("NVIDIA L4", std::nullopt), "L4");
  EXPECT_EQ(AcceleratorModelFromGpuName("NVIDIA L40S", std::nullopt), "L40S");
  EXPECT_EQ(AcceleratorModelFromGpuName("Tesla T4", std::nullopt), "T4");
  EXPECT_EQ(AcceleratorModelFromGpuName("Demo GPU", std::nullopt), "");
}

model::NodeInfo Node(const std::string& name, int cores, double mem_gib, int gpus,
                     const std::string& gpu_name) {
  model::NodeInfo n;
  n.node = name;
  n.cpu_cores = cores;
  // What the kernel reports: a little under the nominal size.
  n.memory_total_bytes = static_cast<int64_t>(mem_gib * 0.97 * (1LL << 30));
  for (int i = 0; i < gpus; ++i) n.gpus.push_back({i, gpu_name, "GPU-" + std::to_string(i), {}});
  return n;
}

TEST(CatalogTest, DetectsInstancesFromNodeFacts) {
  Catalog c = Shipped();
  auto d = DetectInstance(c, Node("algo-1", 96, 1152, 8, "NVIDIA A100-SXM4-40GB"), true);
  EXPECT_EQ(d.instance_type, "ml.p4d.24xlarge");
  EXPECT_EQ(d.confidence, "high");
  d = DetectInstance(c, Node("ip-10-0-0-1", 96, 1152, 8, "NVIDIA A100-SXM4-40GB"), false);
  EXPECT_EQ(d.instance_type, "p4d.24xlarge");
  // GCP's a2-highgpu-8g has the same GPUs and vCPUs but 680 GB.
  d = DetectInstance(c, Node("gcp-vm", 96, 680 * 1e9 / (1LL << 30), 8, "NVIDIA A100-SXM4-40GB"),
                     false);
  EXPECT_EQ(d.instance_type, "a2-highgpu-8g");
  EXPECT_EQ(d.confidence, "high");
  // g5 sizes share 1 x A10G: vCPUs and memory decide.
  d = DetectInstance(c, Node("algo-1", 8, 32, 1, "NVIDIA A10G"), true);
  EXPECT_EQ(d.instance_type, "ml.g5.2xlarge");
  EXPECT_EQ(d.confidence, "high");
  // A container that sees fewer CPUs: only the GPUs match.
  d = DetectInstance(c, Node("algo-1", 6, 20, 4, "Tesla V100-SXM2-16GB"), true);
  EXPECT_EQ(d.instance_type, "ml.p3.8xlarge");
  EXPECT_EQ(d.confidence, "low");
  d = DetectInstance(c, Node("box", 16, 64, 2, "Demo GPU"), false);
  EXPECT_EQ(d.instance_type, "");
  EXPECT_EQ(d.confidence, "none");
}

}  // namespace
}  // namespace trainprof::cost
