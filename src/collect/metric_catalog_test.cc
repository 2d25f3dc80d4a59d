#include "collect/metric_catalog.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <set>
#include <sstream>

#include "base/files.h"
#include "collect/cgroup_collector.h"
#include "collect/collect_test_util.h"
#include "collect/diskstats_collector.h"
#include "collect/filesystem_collector.h"
#include "collect/meminfo_collector.h"
#include "collect/net_dev_collector.h"
#include "collect/nvml/nvml_collector.h"
#include "collect/proc_stat_collector.h"
#include "collect/process_tree_collector.h"

namespace trainprof::collect {
namespace {

using testing::RecordingSink;
using testing::TempDir;
using testing::TestData;
using testing::TickAt;

constexpr std::string_view kBegin = "<!-- catalog:begin -->";
constexpr std::string_view kEnd = "<!-- catalog:end -->";

// The table docs/metrics.md must hold between the markers, generated from the catalog.
std::string ExpectedTable() {
  std::ostringstream out;
  out << "| metric | unit | kind | device label | source | meaning |\n";
  out << "|---|---|---|---|---|---|\n";
  for (const MetricSpec& m : MetricCatalog()) {
    out << "| `" << m.name << "` | " << m.unit << " | " << MetricKindName(m.kind) << " | "
        << (m.device.empty() ? "`\"\"` (node)" : std::string(m.device)) << " | " << m.source
        << " | " << m.help << " |\n";
  }
  return out.str();
}

TEST(MetricCatalogTest, DocsMetricsMdListsExactlyTheCatalog) {
  auto doc = ReadFileToString(std::string(TRAINPROF_SOURCE_DIR) + "/docs/metrics.md");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  const size_t begin = doc->find(kBegin);
  const size_t end = doc->find(kEnd);
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string table = doc->substr(begin + kBegin.size() + 1, end - begin - kBegin.size() - 1);
  EXPECT_EQ(table, ExpectedTable())
      << "docs/metrics.md is out of step with src/collect/metric_catalog.cc; the table should "
         "read:\n"
      << ExpectedTable();
}

TEST(MetricCatalogTest, NamesFollowTheConventions) {
  std::set<std::string_view> names;
  for (const MetricSpec& m : MetricCatalog()) {
    EXPECT_TRUE(names.insert(m.name).second) << "duplicate " << m.name;
    EXPECT_EQ(m.kind == MetricKind::kCounter, m.name.ends_with("_total")) << m.name;
    if (m.unit == "ratio") {
      EXPECT_TRUE(m.name.ends_with("_ratio")) << m.name;
    }
    if (m.unit == "bytes") {
      EXPECT_TRUE(m.name.ends_with("_bytes")) << m.name;
    }
    if (m.unit == "bytes/s") {
      EXPECT_TRUE(m.name.ends_with("_bytes_per_second")) << m.name;
    }
    EXPECT_FALSE(m.help.empty()) << m.name;
    EXPECT_EQ(FindMetric(m.name), &m);
  }
  EXPECT_EQ(FindMetric("no_such_metric"), nullptr);
}

// Every catalog entry is produced by some collector on the canned inputs, and no collector
// produces a name outside the catalog: the catalog cannot drift from the code.
TEST(MetricCatalogTest, EveryMetricIsProducedByACollector) {
  RecordingSink sink;
  TempDir proc;
  testing::CopyTree(TestData("procfs/two_cpus/t0"), proc.path());
  TempDir cg;
  testing::CopyTree(TestData("cgroup/v2_limited"), cg.path());
  CollectorContext ctx;
  ctx.proc_root = cg.path() + "/proc";
  ctx.cgroup_root = cg.path() + "/root";
  ctx.root_pids = {1234};
  auto cgroup = CgroupCollector::Create(ctx);
  ASSERT_TRUE(cgroup.ok());
  std::vector<std::unique_ptr<Collector>> collectors;
  collectors.push_back(std::make_unique<ProcStatCollector>(proc.path()));
  collectors.push_back(std::make_unique<MeminfoCollector>(proc.path()));
  collectors.push_back(std::make_unique<NetDevCollector>(proc.path()));
  collectors.push_back(std::make_unique<DiskstatsCollector>(proc.path(), TestData("sysfs/basic")));
  collectors.push_back(std::make_unique<FilesystemCollector>(std::vector<std::string>{"/"}));
  collectors.push_back(std::move(*cgroup));
  collectors.push_back(std::make_unique<ProcessTreeCollector>("/proc", std::vector<int>{getpid()}));
  for (const char* replay : {"two_gpus.json", "mig.json"}) {
    setenv("TRAINPROF_NVML_REPLAY", TestData(std::string("nvml/") + replay).c_str(), 1);
    nvml::NvmlCollector::Options options;
    options.library = NVML_REPLAY_LIBRARY;
    auto gpus = nvml::NvmlCollector::Create(options);
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    collectors.push_back(std::move(*gpus));
  }
  for (auto& c : collectors) c->Sample(TickAt(0), sink);
  testing::RewriteTree(TestData("procfs/two_cpus/t1"), proc.path());
  testing::WriteText(cg.path() + "/root/job.slice/cpu.stat",
                     "usage_usec 2000000\nnr_periods 110\nnr_throttled 15\nthrottled_usec 60000\n");
  for (auto& c : collectors) c->Sample(TickAt(1), sink);

  std::set<std::string> produced;
  for (const auto& [key, value] : sink.values) produced.insert(key.first);
  for (const MetricSpec& m : MetricCatalog()) {
    EXPECT_TRUE(produced.contains(std::string(m.name))) << m.name << " is never produced";
  }
  EXPECT_TRUE(sink.unknown.empty()) << "not in the catalog: " << sink.unknown.front();
}

}  // namespace
}  // namespace trainprof::collect
