#include "cli/cli.h"
#include "base/test_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>

#include "base/files.h"
#include "cli/commands.h"

namespace trainprof::cli {
namespace {

std::string TempDir() { return MakeTestDir("trainprof_cli_test"); }

TEST(CliTest, ExitCodes) {
  EXPECT_EQ(Main({"trainprof", "--help"}), kExitOk);
  EXPECT_EQ(Main({"trainprof", "show", "--help"}), kExitOk);
  EXPECT_EQ(Main({"trainprof"}), kExitUsage);
  EXPECT_EQ(Main({"trainprof", "no-such-command"}), kExitUsage);
  EXPECT_EQ(Main({"trainprof", "show"}), kExitUsage);  // missing RUN
  EXPECT_EQ(Main({"trainprof", "show", "/nonexistent/run"}), kExitFailure);
  EXPECT_EQ(Main({"trainprof", "cost", "x"}), kExitFailure);  // not implemented yet
}

TEST(CliTest, DemoWritesARunThatLsShowAndExportRead) {
  std::string dir = TempDir();
  std::string run = dir + "/runs/demo1";
  std::ostringstream out;
  DemoOptions demo;
  demo.out = run;
  demo.duration_s = 30;
  ASSERT_TRUE(RunDemo(demo, out).ok());
  EXPECT_NE(out.str().find("cpu_utilization_ratio"), std::string::npos);

  std::ostringstream ls_out;
  LsOptions ls;
  ls.dir = dir + "/runs";
  ls.json = true;
  ASSERT_TRUE(RunLs(ls, ls_out).ok());
  EXPECT_NE(ls_out.str().find("\"name\": \"demo\""), std::string::npos);
  EXPECT_NE(ls_out.str().find("\"exit_status\": 0"), std::string::npos);

  std::ostringstream csv_out;
  ExportCsvOptions csv;
  csv.run = run;
  csv.out_dir = dir + "/csv";
  ASSERT_TRUE(RunExportCsv(csv, csv_out).ok());
  auto metrics = ReadFileToString(dir + "/csv/system_metrics.csv");
  ASSERT_TRUE(metrics.ok());
  // 30 s at 500 ms = 60 ticks x (8 cores + total + memory + 2 GPUs) = 720 rows + header.
  EXPECT_EQ(std::count(metrics->begin(), metrics->end(), '\n'), 721);
  auto steps = ReadFileToString(dir + "/csv/steps.csv");
  ASSERT_TRUE(steps.ok());
  EXPECT_NE(steps->find("demo-node,0,1000,0,train,"), std::string::npos);
}

TEST(CliTest, CsvQuoting) {
  std::string dir = TempDir();
  EXPECT_EQ(Main({"trainprof", "export", "csv", "/nonexistent", "--out", dir}), kExitFailure);
}

}  // namespace
}  // namespace trainprof::cli
