#include "base/files.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace trainprof {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/trainprof_files_test_XXXXXX";
  return mkdtemp(tmpl);
}

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
