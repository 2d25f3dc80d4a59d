#include "base/test_dir.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace trainprof {
namespace {

namespace fs = std::filesystem;

// Runs `body` in a forked child that ends with exit(0), which runs the static destructors the
// way the end of a test binary does. Returns the child's exit status.
template <typename Body>
int InChild(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    body();
    std::exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(TestDirTest, MadeExclusivelyAndPrivate) {
  const std::string a = MakeTestDir("tp_test_dir");
  const std::string b = MakeTestDir("tp_test_dir");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("/tmp/tp_test_dir_", 0), 0u) << a;
  struct stat st {};
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// Runs `make` (which returns a directory it made) in a forked child that then exits, and
// returns that directory's name, sent back through a pipe; empty if the child failed.
template <typename Make>
std::string DirMadeInChild(Make make) {
  int fds[2];
  if (::pipe(fds) != 0) return "";
  const int status = InChild([&] {
    const std::string line = make() + "\n";
    if (::write(fds[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(3);
  });
  ::close(fds[1]);
  char buf[256] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof(buf) - 1);
  ::close(fds[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n <= 1) return "";
  return std::string(buf, static_cast<size_t>(n - 1));
}

TEST(TestDirTest, RemovedWithItsContentsWhenTheProcessThatMadeItExits) {
  // The child's directory exists only while it runs.
  const std::string dir = DirMadeInChild([] {
    const std::string made = MakeTestDir("tp_test_dir_child");
    fs::create_directories(made + "/a/b");
    std::ofstream(made + "/a/b/file") << "x";
    fs::permissions(made + "/a", fs::perms::owner_read | fs::perms::owner_exec);
    return made;
  });
  ASSERT_FALSE(dir.empty());
  EXPECT_EQ(dir.rfind("/tmp/tp_test_dir_child_", 0), 0u) << dir;
  EXPECT_FALSE(fs::exists(dir)) << dir << " outlived the process that made it";
}

TEST(TestDirTest, AForkedChildLeavesItsParentsDirectories) {
  const std::string dir = MakeTestDir("tp_test_dir_parent");
  std::ofstream(dir + "/kept") << "x";
  const int status = InChild([] {});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(fs::exists(dir + "/kept"));
}

TEST(TestDirTest, KeptWhenAskedTo) {
  const std::string dir = DirMadeInChild([] {
    ::setenv("TRAINPROF_KEEP_TEST_DIRS", "1", 1);
    return MakeTestDir("tp_test_dir_kept");
  });
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::is_directory(dir));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainprof
