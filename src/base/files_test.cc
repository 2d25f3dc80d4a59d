#include "base/files.h"
#include "base/test_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

namespace trainprof {
namespace {

std::string TempDir() { return MakeTestDir("trainprof_files_test"); }

TEST(FilesTest, AtomicWriteAndRead) {
  std::string dir = TempDir();
  std::string path = JoinPath(dir, "a/b/c.txt");
  ASSERT_TRUE(MakeDirs(JoinPath(dir, "a/b")).ok());
  ASSERT_TRUE(WriteFileAtomically(path, "hello").ok());
  auto text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "hello");
  auto names = ListDirectory(JoinPath(dir, "a/b"));
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 1u);  // no temporary file left behind
}

TEST(FilesTest, MissingFileIsNotFoundAndNamed) {
  auto text = ReadFileToString("/nonexistent/trainprof/x");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kNotFound);
  EXPECT_NE(text.status().message().find("/nonexistent/trainprof/x"), std::string::npos);
}

}  // namespace
}  // namespace trainprof

namespace trainprof {
namespace {

// Issue 20, 1: another user who can write into the directory plants a symlink at the name the
// temporary file will have; the write must not go through it.
TEST(FilesTest, AtomicWriteDoesNotFollowASymlinkPlantedAtTheTemporaryName) {
  std::string dir = TempDir();
  std::string victim = JoinPath(dir, "victim");
  ASSERT_TRUE(WriteFileAtomically(victim, "secret").ok());
  std::string path = JoinPath(dir, "report.json");
  // The name the old code used, and a few more a guesser would try.
  for (const std::string& suffix :
       {std::string(".tmp.") + std::to_string(getpid()), std::string(".tmp"), std::string("~")}) {
    ASSERT_EQ(symlink(victim.c_str(), (path + suffix).c_str()), 0);
  }
  ASSERT_TRUE(WriteFileAtomically(path, "report").ok());
  EXPECT_EQ(*ReadFileToString(victim), "secret");
  EXPECT_EQ(*ReadFileToString(path), "report");
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(FilesTest, AtomicWriteReplacesASymlinkAtThePathInsteadOfWritingThroughIt) {
  std::string dir = TempDir();
  std::string victim = JoinPath(dir, "victim");
  ASSERT_TRUE(WriteFileAtomically(victim, "secret").ok());
  std::string path = JoinPath(dir, "run.json");
  ASSERT_EQ(symlink(victim.c_str(), path.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(*ReadFileToString(victim), "secret");
  EXPECT_EQ(*ReadFileToString(path), "new");
}

TEST(FilesTest, AtomicWriteUsesTheModeAskedFor) {
  std::string dir = TempDir();
  std::string path = JoinPath(dir, "run.json");
  ASSERT_TRUE(WriteFileAtomically(path, "x", 0600).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Replacing keeps asking for the mode (a file once 0644 becomes 0600).
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  ASSERT_TRUE(WriteFileAtomically(path, "y", 0600).ok());
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto names = ListDirectory(dir);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 1u);
}

}  // namespace
}  // namespace trainprof
