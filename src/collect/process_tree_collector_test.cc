#include "collect/process_tree_collector.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "base/time.h"
#include "collect/collect_test_util.h"

namespace trainprof::collect {
namespace {

using testing::RecordingSink;
using testing::TempDir;

Tick Now() { return Tick{.wall_ns = WallNowNs(), .mono_ns = MonotonicNowNs()}; }

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// A child that burns `cpu_s` of CPU, writes `write_bytes` to `path`, tells the parent through
// `done_fd`, then waits to be killed. Only async-signal-safe calls after fork.
pid_t SpawnWorker(double cpu_s, const std::string& path, size_t write_bytes, int done_fd) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  volatile double x = 0;
  while (ProcessCpuSeconds() < cpu_s) {
    for (int i = 0; i < 100000; ++i) x = x + i;
  }
  if (write_bytes > 0) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    static char block[1 << 16];
    for (size_t done = 0; done < write_bytes; done += sizeof(block)) {
      if (write(fd, block, sizeof(block)) < 0) break;
    }
    fsync(fd);
    close(fd);
  }
  char c = 1;
  if (write(done_fd, &c, 1) < 0) _exit(1);
  for (;;) pause();
}

void WaitByte(int fd) {
  char c;
  ASSERT_EQ(read(fd, &c, 1), 1);
}

void Kill(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(ProcessTreeCollectorTest, WorkersThatAppearAndExitAreCountedRight) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ProcessTreeCollector collector("/proc", {getpid()});
  RecordingSink sink;
  collector.Sample(Now(), sink);
  EXPECT_EQ(sink.Get("process_count", "tree"), 1);
  EXPECT_GT(*sink.Get("process_resident_memory_bytes", "tree"), 1e6);
  EXPECT_FALSE(sink.Has("process_cpu_utilization_ratio", "tree"));  // no interval yet

  // A data-loader-like worker starts after the first tick, burns 0.4 s of CPU and writes
  // 8 MiB: all of it belongs to this interval.
  const int64_t t0 = MonotonicNowNs();
  const std::string file = std::string(TRAINPROF_BINARY_DIR) + "/process_tree_test.bin";
  pid_t worker = SpawnWorker(0.4, file, 8 << 20, pipe_fds[1]);
  WaitByte(pipe_fds[0]);
  sink.Clear();
  Tick t1 = Now();
  collector.Sample(t1, sink);
  const double dt_s = static_cast<double>(t1.mono_ns - t0) / 1e9;
  EXPECT_EQ(sink.Get("process_count", "tree"), 2);
  auto cores = sink.Get("process_cpu_utilization_ratio", "tree");
  ASSERT_TRUE(cores.has_value());
  EXPECT_GE(*cores * dt_s, 0.38);  // jiffies are 10 ms
  EXPECT_LE(*cores * dt_s, dt_s * 2 + 0.05);
  auto written = sink.Get("process_write_bytes_per_second", "tree");
  ASSERT_TRUE(written.has_value());
  // write_bytes is what reached the storage layer; tmpfs/overlay may report less, never more
  // than the file plus filesystem metadata.
  EXPECT_LE(*written * dt_s, (8 << 20) * 1.1);
  EXPECT_GT(*sink.Get("process_threads", "tree"), 1);
  auto members = collector.MemberPids();
  EXPECT_TRUE(std::find(members.begin(), members.end(), worker) != members.end());

  // The worker exits: it leaves the tree and its CPU no longer counts.
  Kill(worker);
  sink.Clear();
  collector.Sample(Now(), sink);
  EXPECT_EQ(sink.Get("process_count", "tree"), 1);
  EXPECT_LT(*sink.Get("process_cpu_utilization_ratio", "tree"), 1.0);
  EXPECT_TRUE(sink.unknown.empty());
  unlink(file.c_str());
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST(ProcessTreeCollectorTest, GrandchildrenBornInOneIntervalAreFound) {
  ProcessTreeCollector collector("/proc", {getpid()});
  RecordingSink sink;
  collector.Sample(Now(), sink);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t child = fork();
  if (child == 0) {
    // Two grandchildren, then report ready.
    for (int i = 0; i < 2; ++i) {
      if (fork() == 0) {
        for (;;) pause();
      }
    }
    char c = 1;
    if (write(pipe_fds[1], &c, 1) < 0) _exit(1);
    for (;;) pause();
  }
  WaitByte(pipe_fds[0]);
  sink.Clear();
  collector.Sample(Now(), sink);
  EXPECT_EQ(sink.Get("process_count", "tree"), 4);
  // Kill the whole group of the child: it and its children.
  std::vector<int> pids = collector.MemberPids();
  for (int pid : pids) {
    if (pid != getpid()) kill(pid, SIGKILL);
  }
  waitpid(child, nullptr, 0);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

// A child forked by a secondary thread is not in the main thread's children file: the
// periodic full scan finds it within a second.
TEST(ProcessTreeCollectorTest, ChildOfAnotherThreadFoundByTheFullScan) {
  ProcessTreeCollector collector("/proc", {getpid()});
  RecordingSink sink;
  collector.Sample(Now(), sink);
  pid_t child = 0;
  std::thread([&] {
    child = fork();
    if (child == 0) {
      for (;;) pause();
    }
  }).join();
  usleep(1100 * 1000);
  sink.Clear();
  collector.Sample(Now(), sink);
  EXPECT_EQ(sink.Get("process_count", "tree"), 2);
  Kill(child);
}

TEST(ProcessTreeCollectorTest, TwentySleepingChildren) {
  std::vector<pid_t> children;
  for (int i = 0; i < 20; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      for (;;) pause();
    }
    children.push_back(pid);
  }
  ProcessTreeCollector collector("/proc", {getpid()});
  RecordingSink sink;
  collector.Sample(Now(), sink);
  EXPECT_EQ(sink.Get("process_count", "tree"), 21);
  for (pid_t pid : children) Kill(pid);
  sink.Clear();
  collector.Sample(Now(), sink);
  EXPECT_EQ(sink.Get("process_count", "tree"), 1);
}

TEST(ProcessTreeCollectorTest, CgroupMembersFromCgroupProcs) {
  TempDir dir;
  testing::WriteText(dir.path() + "/cgroup.procs", std::to_string(getpid()) + "\nbogus\n");
  auto collector = ProcessTreeCollector::ForCgroup("/proc", dir.path());
  RecordingSink sink;
  collector->Sample(Now(), sink);
  EXPECT_EQ(sink.Get("process_count", "tree"), 1);
  EXPECT_EQ(sink.Counter("parse_errors"), 1);
}

TEST(ProcessTreeCollectorTest, GoneRootGivesAnEmptyTree) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  ProcessTreeCollector collector("/proc", {pid});
  RecordingSink sink;
  collector.Sample(Now(), sink);
  EXPECT_EQ(sink.Get("process_count", "tree"), 0);
  EXPECT_FALSE(sink.Has("process_resident_memory_bytes", "tree"));
}

TEST(ProcessTreeCollectorTest, MinIntervalSkipsTicks) {
  ProcessTreeCollector collector("/proc", {getpid()});
  collector.set_min_interval_ns(200 * kNanosPerMilli);
  RecordingSink sink;
  collector.Sample(testing::TickAt(0), sink);
  EXPECT_TRUE(sink.Has("process_count", "tree"));
  sink.Clear();
  collector.Sample(testing::TickAt(0.1), sink);
  EXPECT_EQ(sink.adds, 0);
  // A tick a little early (jitter) still takes the reading: every other 100 ms tick, not
  // every third.
  collector.Sample(testing::TickAt(0.199), sink);
  EXPECT_TRUE(sink.Has("process_cpu_utilization_ratio", "tree"));
  sink.Clear();
  collector.Sample(testing::TickAt(0.3), sink);
  EXPECT_EQ(sink.adds, 0);
  collector.Sample(testing::TickAt(0.398), sink);
  EXPECT_TRUE(sink.Has("process_cpu_utilization_ratio", "tree"));
}

TEST(ProcessTreeCollectorTest, ParsePidStatHandlesOddNames) {
  PidStat st;
  const std::string line =
      "4242 (a) (b c) S 4000 4242 4242 0 -1 4194560 100 0 0 0 150 25 3 4 20 0 7 0 123456 "
      "1000000 2500 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  ASSERT_TRUE(ParsePidStat(line, &st));
  EXPECT_EQ(st.ppid, 4000);
  EXPECT_EQ(st.utime, 150u);
  EXPECT_EQ(st.stime, 25u);
  EXPECT_EQ(st.num_threads, 7);
  EXPECT_EQ(st.rss_pages, 2500);
  EXPECT_FALSE(ParsePidStat("4242 (truncated) S 1 2", &st));
  EXPECT_FALSE(ParsePidStat("no parens at all", &st));
}

}  // namespace
}  // namespace trainprof::collect
