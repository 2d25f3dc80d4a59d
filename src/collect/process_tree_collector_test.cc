#include "collect/process_tree_collector.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
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

// "pid (name) S ppid ..." with the fields ParsePidStat reads: utime (ticks), threads and rss
// (pages).
std::string StatLine(int pid, const std::string& name, int ppid, int utime, int threads,
                     int rss_pages) {
  return std::to_string(pid) + " (" + name + ") S " + std::to_string(ppid) +
         " 1 1 0 -1 4194560 100 0 0 0 " + std::to_string(utime) + " 0 0 0 20 0 " +
         std::to_string(threads) + " 0 123456 1000000 " + std::to_string(rss_pages) +
         " 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
}

void WriteProc(const std::string& root, int pid, const std::string& name, int ppid, int utime) {
  const std::string dir = root + "/" + std::to_string(pid);
  std::filesystem::create_directories(dir);
  testing::WriteText(dir + "/stat", StatLine(pid, name, ppid, utime, 2, 1000 + pid));
  using namespace std::string_literals;
  testing::WriteText(dir + "/cmdline", "python\0-c\0"s + name + "\0"s);
}

// A canned /proc: root 100, its child 101 (with a child 102 of its own), then 70 more children
// of 100: the first kMaxProcessSeries get series of their own and a note each, the rest sum on
// "other", and the per-process values add up to the tree's.
TEST(ProcessTreeCollectorTest, PerProcessSeriesBoundedWithTheRestOnOther) {
  TempDir dir;
  const std::string root = dir.path();
  WriteProc(root, 100, "launcher", 1, 0);
  WriteProc(root, 101, "train (rank 0)", 100, 0);
  WriteProc(root, 102, "worker", 101, 0);
  for (int pid = 200; pid < 270; ++pid) WriteProc(root, pid, "compile", 100, 0);
  WriteProc(root, 300, "stranger", 1, 0);  // not in the tree
  ProcessTreeCollector collector(root, {100});
  RecordingSink sink;
  collector.Sample(testing::TickAt(0), sink);
  constexpr int kCap = ProcessTreeCollector::kMaxProcessSeries;
  const double page_bytes = static_cast<double>(sysconf(_SC_PAGESIZE));
  ASSERT_EQ(sink.Get("process_count", "tree"), 73);
  EXPECT_EQ(sink.notes.size(), static_cast<size_t>(kCap));
  int own = 0;
  double rss_sum = 0;
  for (const auto& [key, value] : sink.values) {
    if (key.first != "pid_resident_memory_bytes") continue;
    if (key.second != "other") ++own;
    rss_sum += value;
  }
  EXPECT_EQ(own, kCap);
  EXPECT_DOUBLE_EQ(rss_sum, *sink.Get("process_resident_memory_bytes", "tree"));
  EXPECT_FALSE(sink.Has("pid_cpu_utilization_ratio", "other"));  // no interval yet
  EXPECT_FALSE(sink.Has("pid_resident_memory_bytes", "pid300"));
  // Pid order: 100, 101, 102, 200..260 have their own series; 261..269 are "other".
  EXPECT_TRUE(sink.Has("pid_resident_memory_bytes", "pid260"));
  EXPECT_FALSE(sink.Has("pid_resident_memory_bytes", "pid261"));
  EXPECT_EQ(*sink.Get("pid_resident_memory_bytes", "pid102"), (1000 + 102) * page_bytes);
  bool named = false;
  for (const auto& [key, value] : sink.notes) {
    EXPECT_EQ(key, "process");
    if (value.find("\"pid\":101,") != std::string::npos) {
      EXPECT_NE(value.find("\"ppid\":100,"), std::string::npos) << value;
      EXPECT_NE(value.find("\"name\":\"train (rank 0)\""), std::string::npos) << value;
      EXPECT_NE(value.find("\"cmdline\":[\"python\",\"-c\",\"train (rank 0)\"]"), std::string::npos)
          << value;
      named = true;
    }
  }
  EXPECT_TRUE(named);

  // One second later: every process used 0.5 s of CPU (utime in clock ticks).
  const int half_second = static_cast<int>(sysconf(_SC_CLK_TCK) / 2);
  WriteProc(root, 100, "launcher", 1, half_second);
  WriteProc(root, 101, "train (rank 0)", 100, half_second);
  WriteProc(root, 102, "worker", 101, half_second);
  for (int pid = 200; pid < 270; ++pid) WriteProc(root, pid, "compile", 100, half_second);
  sink.Clear();
  sink.notes.clear();
  collector.Sample(testing::TickAt(1.0), sink);
  EXPECT_TRUE(sink.notes.empty());  // each process is named once
  double cpu_sum = 0;
  int with_cpu = 0;
  for (const auto& [key, value] : sink.values) {
    if (key.first != "pid_cpu_utilization_ratio") continue;
    if (key.second != "other") {
      EXPECT_NEAR(value, 0.5, 1e-9) << key.second;
      ++with_cpu;
    }
    cpu_sum += value;
  }
  EXPECT_EQ(with_cpu, kCap);
  EXPECT_NEAR(*sink.Get("pid_cpu_utilization_ratio", "other"), 0.5 * (73 - kCap), 1e-9);
  EXPECT_NEAR(cpu_sum, *sink.Get("process_cpu_utilization_ratio", "tree"), 1e-9);
  EXPECT_EQ(*sink.Get("pid_threads", "other"), 2.0 * (73 - kCap));

  // 102 exits (a zombie, not reaped yet) after another half second of CPU: that CPU counts,
  // but it holds no memory and is no longer one of the tree's processes.
  std::string zombie = StatLine(102, "worker", 101, 2 * half_second, 2, 1102);
  zombie.replace(zombie.find(") S ") + 2, 1, "Z");
  testing::WriteText(root + "/102/stat", zombie);
  sink.Clear();
  collector.Sample(testing::TickAt(2.0), sink);
  EXPECT_EQ(sink.Get("process_count", "tree"), 72);
  EXPECT_NEAR(*sink.Get("pid_cpu_utilization_ratio", "pid102"), 0.5, 1e-9);
  EXPECT_FALSE(sink.Has("pid_resident_memory_bytes", "pid102"));
  EXPECT_NEAR(*sink.Get("process_cpu_utilization_ratio", "tree"), 0.5, 1e-9);
  EXPECT_TRUE(sink.unknown.empty());
}

// A process caught between its fork and its exec shows its parent's name and command line (a
// recorder sampling while a launcher starts its workers; test_serve_process_tree.py saw it once
// on a loaded machine). The next ticks read them again and note the change; the newest note
// names the process.
TEST(ProcessTreeCollectorTest, AProcessSeenBeforeItsExecIsNamedAgainAfterIt) {
  using namespace std::string_literals;
  TempDir dir;
  const std::string root = dir.path();
  WriteProc(root, 100, "python", 1, 0);
  WriteProc(root, 101, "python", 100, 0);  // forked: still the parent's image
  ProcessTreeCollector collector(root, {100});
  RecordingSink sink;
  collector.Sample(testing::TickAt(0), sink);
  ASSERT_EQ(sink.notes.size(), 2u);
  // The exec: a new name and command line.
  testing::WriteText(root + "/101/stat", StatLine(101, "sleep", 100, 0, 2, 1101));
  testing::WriteText(root + "/101/cmdline",
                     "/bin/sleep\0"
                     "30\0"s);
  sink.notes.clear();
  collector.Sample(testing::TickAt(0.1), sink);
  ASSERT_EQ(sink.notes.size(), 1u);
  EXPECT_NE(sink.notes[0].second.find("\"pid\":101,"), std::string::npos) << sink.notes[0].second;
  EXPECT_NE(sink.notes[0].second.find("\"name\":\"sleep\""), std::string::npos);
  EXPECT_NE(sink.notes[0].second.find("\"cmdline\":[\"/bin/sleep\",\"30\"]"), std::string::npos)
      << sink.notes[0].second;
  // Unchanged: no note; after kCmdlineRechecks ticks the command line is no longer read.
  sink.notes.clear();
  collector.Sample(testing::TickAt(0.2), sink);
  EXPECT_TRUE(sink.notes.empty());
  testing::WriteText(root + "/101/cmdline",
                     "/bin/sleep\0"
                     "31\0"s);
  for (int i = 0; i < 3; ++i) collector.Sample(testing::TickAt(0.3 + 0.1 * i), sink);
  EXPECT_TRUE(sink.notes.empty());
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
