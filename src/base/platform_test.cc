// The platform layer, checked through POSIX calls and values set by the test itself. The same
// tests run against platform_linux.cc (the main build) and platform_posix.cc (the portable
// build of the test command), so both implementations answer alike where they can.
#include "base/platform.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/files.h"

namespace trainprof::platform {
namespace {

bool IsLinuxLayer() { return std::string(Name()) == "linux"; }

TEST(PlatformTest, NameIsOneOfTheTwoLayers) {
  const std::string name = Name();
  EXPECT_TRUE(name == "linux" || name == "posix") << name;
}

TEST(PlatformTest, ThreadIdsAreStablePerThreadAndDistinctAcrossThreads) {
  const int64_t mine = CurrentThreadId();
  EXPECT_GT(mine, 0);
  EXPECT_EQ(CurrentThreadId(), mine);
  std::vector<int64_t> ids(4, 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&ids, i] {
      ids[i] = CurrentThreadId();
      EXPECT_EQ(CurrentThreadId(), ids[i]);
    });
  }
  for (auto& t : threads) t.join();
  std::set<int64_t> distinct(ids.begin(), ids.end());
  distinct.insert(mine);
  EXPECT_EQ(distinct.size(), ids.size() + 1);
  if (IsLinuxLayer()) {
    // The kernel's id: the main thread's equals the process id.
    EXPECT_EQ(mine, static_cast<int64_t>(getpid()));
  }
}

TEST(PlatformTest, SelfExecutablePathIsThisTestOrUnknown) {
  const std::string exe = SelfExecutablePath();
  if (IsLinuxLayer()) {
    ASSERT_FALSE(exe.empty());
  }
  if (exe.empty()) return;  // a POSIX system that does not say
  EXPECT_EQ(exe.front(), '/');
  EXPECT_TRUE(PathExists(exe));
  EXPECT_EQ(exe.substr(exe.rfind('/') + 1), "base_test");
}

TEST(PlatformTest, RandomBytesDifferBetweenCalls) {
  unsigned char a[32] = {}, b[32] = {};
  ASSERT_TRUE(FillRandomBytes(a, sizeof a));
  ASSERT_TRUE(FillRandomBytes(b, sizeof b));
  EXPECT_NE(std::memcmp(a, b, sizeof a), 0);  // equal with probability 2^-256
}

TEST(PlatformTest, PipeEndsAreCloseOnExecAndConnected) {
  int fds[2] = {-1, -1};
  ASSERT_EQ(PipeCloseOnExec(fds), 0);
  for (int fd : fds) EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0) << fd;
  ASSERT_EQ(write(fds[1], "xy", 2), 2);
  char buf[2] = {};
  ASSERT_EQ(read(fds[0], buf, 2), 2);
  EXPECT_EQ(std::string(buf, 2), "xy");
  close(fds[0]);
  close(fds[1]);
}

TEST(PlatformTest, ExitedChildIsSeenWithoutBeingReaped) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pause();
    _exit(0);
  }
  EXPECT_FALSE(ProcessHasExited(pid));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  bool exited = false;
  for (int i = 0; i < 500 && !exited; ++i) {
    exited = ProcessHasExited(pid);
    if (!exited) usleep(10'000);
  }
  EXPECT_TRUE(exited);
  // Still a zombie: its status is left for the parent.
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_TRUE(ProcessHasExited(pid));  // reaped: gone
}

TEST(PlatformTest, ModificationTimeIsTheOneSet) {
  char tmpl[] = "/tmp/trainprof_platform_test_XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  const timespec times[2] = {{1'000'000'000, 0}, {1'234'567'890, 123'456'789}};
  ASSERT_EQ(futimens(fd, times), 0);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  const timespec m = ModificationTime(st);
  EXPECT_EQ(m.tv_sec, 1'234'567'890);
  // Whole seconds at least; nanoseconds where the file system keeps them (tmpfs, ext4 do).
  EXPECT_TRUE(m.tv_nsec == 123'456'789 || m.tv_nsec == 0) << m.tv_nsec;
  close(fd);
  unlink(tmpl);
}

TEST(PlatformTest, SubreaperTakesOrphanedGrandchildrenWhereSupported) {
  const bool supported = BecomeChildSubreaper();
  EXPECT_EQ(supported, IsLinuxLayer());
  if (!supported) return;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (fork() == 0) {  // the grandchild: outlives its parent, then reports who adopted it
      usleep(100'000);
      const pid_t parent = getppid();
      (void)!write(fds[1], &parent, sizeof parent);
      _exit(0);
    }
    _exit(0);
  }
  close(fds[1]);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  pid_t adopted_by = 0;
  ASSERT_EQ(read(fds[0], &adopted_by, sizeof adopted_by), static_cast<ssize_t>(sizeof adopted_by));
  close(fds[0]);
  EXPECT_EQ(adopted_by, getpid());
  while (waitpid(-1, nullptr, 0) > 0) {
  }
}

TEST(PlatformTest, ThreadCountSeesAThreadComeAndGo) {
  const int before = platform::ProcessThreadCount();
  if (std::string(platform::Name()) == "posix") {
    EXPECT_EQ(before, -1);
    return;
  }
  ASSERT_GE(before, 1);
  std::atomic<bool> stop{false};
  std::atomic<int> seen{0};
  std::thread t([&] {
    seen = platform::ProcessThreadCount();
    while (!stop) std::this_thread::yield();
  });
  while (seen == 0) std::this_thread::yield();
  stop = true;
  t.join();
  EXPECT_EQ(seen, before + 1);
  EXPECT_EQ(platform::ProcessThreadCount(), before);
}

TEST(PlatformTest, RunOnOneCpuRestrictsThenRestores) {
  const int cpus = platform::UsableCpuCount();
  int inside = 0, in_thread = 0;
  const bool ran = platform::RunOnOneCpu([&] {
    inside = platform::UsableCpuCount();
    std::thread t([&] { in_thread = platform::UsableCpuCount(); });
    t.join();
  });
  if (std::string(platform::Name()) == "posix") {
    EXPECT_FALSE(ran);
    EXPECT_EQ(inside, 0);  // not run
    return;
  }
  ASSERT_TRUE(ran);
  EXPECT_EQ(inside, 1);
  EXPECT_EQ(in_thread, 1);  // a thread started inside inherits the one CPU
  EXPECT_EQ(platform::UsableCpuCount(), cpus);
}

TEST(PlatformTest, CpuModelNameIsOneTrimmedLine) {
  const std::string model = CpuModelName();
  EXPECT_EQ(model.find('\n'), std::string::npos);
  if (!model.empty()) {
    EXPECT_NE(model.front(), ' ');
  }
  auto cpuinfo = ReadFileToString("/proc/cpuinfo");  // Linux only; elsewhere not found
  if (IsLinuxLayer() && cpuinfo.ok() && cpuinfo->find("model name") != std::string::npos) {
    EXPECT_FALSE(model.empty());
    EXPECT_NE(cpuinfo->find(model), std::string::npos);
  }
}

}  // namespace
}  // namespace trainprof::platform
