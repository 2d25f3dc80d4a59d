#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "serve/run_index.h"
#include "serve/server.h"

namespace trainprof::serve {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/trainprof_serve_test_XXXXXX";
  return mkdtemp(tmpl);
}

void MakeRun(const std::string& dir) {
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(dir, "run.json"),
                                  R"({"format_version": 1, "name": "r", "start_ns": 1})")
                  .ok());
}

TEST(RunIndexTest, FindsRunsUnderRootsWithoutFollowingSymlinks) {
  const std::string root = TempDir(), outside = TempDir();
  MakeRun(JoinPath(root, "a"));
  MakeRun(JoinPath(root, "team/b"));
  MakeRun(JoinPath(outside, "secret"));
  ASSERT_EQ(symlink(outside.c_str(), JoinPath(root, "link").c_str()), 0);
  RunIndex index({root});
  ASSERT_TRUE(index.Rescan().ok());
  std::vector<std::string> paths;
  for (const IndexedRun& r : index.Runs()) paths.push_back(r.path);
  std::sort(paths.begin(), paths.end());
  EXPECT_EQ(paths, (std::vector<std::string>{"a", "team/b"}));
  // Runs are named by id only; ids are stable and say nothing of the path.
  auto a = index.Find(RunId(0, "a"));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->dir, JoinPath(root, "a"));
  EXPECT_EQ(a->id.size(), 16u);
  EXPECT_FALSE(index.Find("../../etc/passwd").has_value());
  EXPECT_FALSE(index.Find(RunId(0, "link/secret")).has_value());
}

TEST(RunIndexTest, ARootThatIsARunIsServedAsOne) {
  const std::string root = TempDir();
  MakeRun(root);
  RunIndex index({root});
  ASSERT_TRUE(index.Rescan().ok());
  ASSERT_EQ(index.Runs().size(), 1u);
  EXPECT_EQ(index.Runs()[0].path, "");
}

TEST(ServerAddressTest, LoopbackOnlyWithoutAToken) {
  EXPECT_TRUE(IsLoopback("127.0.0.1"));
  EXPECT_TRUE(IsLoopback("localhost"));
  EXPECT_TRUE(IsLoopback("::1"));
  EXPECT_FALSE(IsLoopback("0.0.0.0"));
  EXPECT_FALSE(IsLoopback("10.0.0.5"));
  auto a = ParseAddress("[::1]:8787");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 8787);
  EXPECT_FALSE(ParseAddress("8787").ok());
  EXPECT_FALSE(ParseAddress("127.0.0.1:99999").ok());
  EXPECT_FALSE(ParseAddress("127.0.0.1:80x").ok());
  EXPECT_EQ(NewToken().size(), 32u);
  EXPECT_NE(NewToken(), NewToken());
}

}  // namespace
}  // namespace trainprof::serve
