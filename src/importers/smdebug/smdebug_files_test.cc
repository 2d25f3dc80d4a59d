// The smdebug importer's walk of the profiler-output folder (issue 20, item 6): symbolic links
// are not followed (one to /etc/passwd was read as 27 "unreadable lines"), and a timeline cut
// off inside an event is imported up to the cut with a warning and a count, never silently.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "base/files.h"
#include "importers/common/import_counters.h"
#include "importers/common/test_util.h"
#include "importers/smdebug/smdebug_importer.h"
#include "store/run_reader.h"

namespace trainprof::importers::smdebug {
namespace {

using testing::TempDir;

void Put(const std::string& path, const std::string& text) {
  ASSERT_TRUE(MakeDirs(path.substr(0, path.rfind('/'))).ok());
  ASSERT_TRUE(WriteFileAtomically(path, text).ok());
}

std::string SystemLine(int64_t ts_s, double value) {
  return "{\"Name\":\"cpu0\",\"Type\":\"cpu\",\"Dimension\":\"CPUUtilization\",\"Value\":" +
         std::to_string(value) + ",\"Timestamp\":" + std::to_string(ts_s) + "}\n";
}

TEST(SmdebugFilesTest, SymbolicLinksAreNotFollowed) {
  std::string root = TempDir();
  std::string src = root + "/profiler-output";
  Put(src + "/system/incremental/2024010100/1704067200.algo-1.json",
      SystemLine(1704067200, 10) + SystemLine(1704067201, 20));
  // Outside the folder: a file that would import (3 samples) and one that would not.
  std::string outside = root + "/outside";
  Put(outside + "/1704067300.algo-1.json",
      SystemLine(1704067300, 1) + SystemLine(1704067301, 2) + SystemLine(1704067302, 3));
  ASSERT_EQ(symlink((outside + "/1704067300.algo-1.json").c_str(),
                    (src + "/system/incremental/2024010100/1704067300.algo-1.json").c_str()),
            0);
  ASSERT_EQ(symlink("/etc/passwd",
                    (src + "/system/incremental/2024010100/1704067400.algo-1.json").c_str()),
            0);
  ASSERT_EQ(symlink(outside.c_str(), (src + "/system/incremental/2024010101").c_str()), 0);
  SmdebugImportOptions o;
  o.dir = src;
  o.out = root + "/run";
  auto r = ImportSmdebug(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->system_files, 1);
  EXPECT_EQ(r->system_samples, 2);
  EXPECT_EQ(r->parse_errors, 0);  // /etc/passwd was not read
  int links = 0;
  for (const auto& s : r->skipped) {
    if (s.find("symbolic link") != std::string::npos) ++links;
  }
  EXPECT_EQ(links, 3);  // the two file links and the directory link (not descended)
}

TEST(SmdebugFilesTest, TruncatedTimelineIsImportedWithAWarningAndACount) {
  std::string root = TempDir();
  std::string src = root + "/profiler-output";
  const std::string head =
      "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"start_time_since_epoch_"
      "in_micros\":1704067200000000}},\n";
  std::string events;
  for (int i = 0; i < 3; ++i) {
    events += "{\"name\":\"op" + std::to_string(i) +
              "\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":" + std::to_string(i * 100) +
              ",\"dur\":50},\n";
  }
  // Cut inside the fourth event.
  Put(src + "/framework/pevents/2024010100/1704067200000000_1-algo-1_pythontimeline.json",
      head + events + "{\"name\":\"op3\",\"ph\":\"X\",\"pid\":0,\"ti");
  SmdebugImportOptions o;
  o.dir = src;
  o.out = root + "/run";
  auto r = ImportSmdebug(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->framework_events, 3);
  EXPECT_EQ(r->truncated_files, 1);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("pythontimeline.json"), std::string::npos) << r->warnings[0];
  EXPECT_NE(r->warnings[0].find("truncated"), std::string::npos) << r->warnings[0];
  auto reader = store::RunReader::Open(o.out);
  ASSERT_TRUE(reader.ok());
  auto counters = (*reader)->Counters();
  ASSERT_TRUE(counters.ok());
  ASSERT_TRUE(counters->count(dq::kTruncatedFiles));
  EXPECT_EQ(counters->at(dq::kTruncatedFiles), 1);
}

}  // namespace
}  // namespace trainprof::importers::smdebug
