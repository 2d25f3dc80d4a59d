#include "agent/record.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>

#include "agent/agent_test_util.h"
#include "agent/mark.h"
#include "agent/node_agent.h"
#include "base/files.h"
#include "base/test_child.h"
#include "base/time.h"
#include "store/run_directory.h"

extern char** environ;

namespace trainprof::agent {
namespace {

CollectorFactory FakeFactory() {
  return [](const collect::CollectorContext&) {
    std::vector<std::unique_ptr<collect::Collector>> out;
    out.push_back(std::make_unique<testing::FakeCollector>());
    return out;
  };
}

RecordOptions Options(const std::string& dir, std::vector<std::string> command) {
  RecordOptions o;
  o.out = dir + "/run";
  o.command = std::move(command);
  o.interval = "100ms";
  o.collector_factory = FakeFactory();
  return o;
}

TEST(RecordTest, ExitStatusAndRunJson) {
  std::string dir = testing::TempDir();
  RecordOptions o = Options(dir, {"sh", "-c", "sleep 0.3; exit 3"});
  o.name = "exit3";
  o.instance_type = "ml.p3.2xlarge";
  o.tags = {"team=ml", "exp=42"};
  std::ostringstream out;
  auto code = RunRecord(o, out);
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(*code, 3);
  EXPECT_NE(out.str().find("recording to " + o.out), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("exit status 3"), std::string::npos);
  EXPECT_NE(out.str().find("cpu_utilization_ratio"), std::string::npos);  // the summary
  auto meta = store::ReadRunMetadata(o.out);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->exit_status, 3);
  ASSERT_TRUE(meta->end_ns.has_value());
  EXPECT_GE(*meta->end_ns - meta->start_ns, 300'000'000);
  EXPECT_EQ(meta->name, "exit3");
  EXPECT_EQ(meta->source, "record");
  EXPECT_EQ(meta->instance_type, "ml.p3.2xlarge");
  EXPECT_EQ(meta->tags.at("team"), "ml");
  EXPECT_EQ(meta->command.size(), 3u);
  // Sampled while it ran: ~3 ticks at 100 ms, with the node's GPU facts from Describe.
  EXPECT_GE(testing::ReadSeries(o.out, "fake_ticks", "").size(), 2u);
  auto reader = store::RunReader::Open(o.out);
  ASSERT_TRUE(reader.ok());
  ASSERT_EQ((*reader)->node_infos().size(), 1u);
  EXPECT_EQ((*reader)->node_infos()[0]->gpus.size(), 1u);
  // The socket is gone once the recorder ends.
  EXPECT_TRUE(ControlSocketsOfRun(o.out, "").empty());
}

TEST(RecordTest, KilledChildGives128PlusSignal) {
  std::string dir = testing::TempDir();
  std::ostringstream out;
  auto code = RunRecord(Options(dir, {"sh", "-c", "kill -TERM $$"}), out);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 143);
  EXPECT_EQ(store::ReadRunMetadata(dir + "/run")->exit_status, 143);
}

TEST(RecordTest, CommandNotFoundIs127) {
  std::string dir = testing::TempDir();
  std::ostringstream out;
  auto code = RunRecord(Options(dir, {"trainprof-no-such-command-xyz"}), out);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 127);
  EXPECT_NE(out.str().find("error: cannot start 'trainprof-no-such-command-xyz'"),
            std::string::npos);
  EXPECT_EQ(store::ReadRunMetadata(dir + "/run")->exit_status, 127);
  code = RunRecord(Options(dir + "/x", {"/etc/passwd"}), out);  // not executable
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 126);
}

TEST(RecordTest, TheChildFindsTheRunThroughItsEnvironment) {
  std::string dir = testing::TempDir();
  std::ostringstream out;
  auto code = RunRecord(Options(dir, {"sh", "-c",
                                      "test \"$TRAINPROF_RUN_DIR\" = \"" + dir +
                                          "/run\" && test -S "
                                          "\"$TRAINPROF_SOCKET\" && test -n \"$TRAINPROF_NODE\" && "
                                          "test -n \"$TRAINPROF_RUN_ID\" && exit 7"}),
                        out);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 7);
}

TEST(RecordTest, MarksWhileRunningBecomePhases) {
  std::string dir = testing::TempDir();
  RecordOptions o = Options(dir, {"sleep", "1.5"});
  std::thread marker([&] {
    while (ControlSocketsOfRun(o.out, "").empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (const char* name : {"download_start", "download_end", "upload_start"}) {
      MarkOptions m;
      m.name = name;
      m.run = o.out;
      std::ostringstream mark_out;
      Status st = RunMark(m, mark_out);
      EXPECT_TRUE(st.ok()) << st.message();
      EXPECT_NE(mark_out.str().find(std::string("marked ") + name), std::string::npos);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    MarkOptions bad;
    bad.name = "not ok";
    bad.run = o.out;
    std::ostringstream ignored;
    EXPECT_FALSE(RunMark(bad, ignored).ok());
  });
  std::ostringstream out;
  auto code = RunRecord(o, out);
  marker.join();
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(testing::ReadEvents(o.out, "mark").size(), 3u);
  std::map<std::string, testing::StoredEvent> phases;
  for (const auto& e : testing::ReadEvents(o.out, "phase")) phases[e.name] = e;
  ASSERT_EQ(phases.count("download"), 1u);
  EXPECT_NEAR(static_cast<double>(phases["download"].duration_ns), 100e6, 80e6);
  ASSERT_EQ(phases.count("upload"), 1u);  // closed by the run's end
  EXPECT_EQ(phases.count("initialization"), 1u);
  // After the run: nobody listens, and mark says so.
  MarkOptions late;
  late.name = "late";
  late.run = o.out;
  std::ostringstream late_out;
  EXPECT_FALSE(RunMark(late, late_out).ok());
}

TEST(RecordTest, BadOptionsStartNothing) {
  std::string dir = testing::TempDir();
  std::ostringstream out;
  RecordOptions o = Options(dir, {"touch", dir + "/ran"});
  o.prometheus = "0.0.0.0:9400";
  auto code = RunRecord(o, out);
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().code(), StatusCode::kInvalidArgument);
  o.prometheus = "";
  o.interval = "3s";
  EXPECT_FALSE(RunRecord(o, out).ok());
  o.interval = "1s";
  o.tags = {"novalue"};
  EXPECT_FALSE(RunRecord(o, out).ok());
  EXPECT_FALSE(PathExists(dir + "/ran"));
  EXPECT_FALSE(PathExists(dir + "/run"));
}

// `record` where its threads cannot all be started (its user at RLIMIT_NPROC, a container's pids
// limit): the command still runs, and its exit status is what record returns and run.json
// keeps. The limit (root only: the child runs as a uid of its own, so the count is exact) lets
// record's process, its store writer's and control channel's threads and the command start,
// and no more: the sampling thread, the first started after the command, cannot. (Before,
// std::system_error ended record while the command ran: its exit status was lost.)
TEST(RecordTest, WithNoThreadForSamplingTheCommandRunsAndItsExitStatusIsKept) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root, to run the child as a uid of its own";
  }
  const std::string dir = testing::TempDir();
  // Record, its writer's and control channel's threads, the command; checked below instead.
  const test_child::AtProcessLimit at = {.uid = 61005, .limit = 4, .threads_ok = -1};
  ASSERT_EQ(chown(dir.c_str(), at.uid, at.uid), 0);
  const std::string err_path = dir + "/stderr";
  const int code = test_child::RunAtProcessLimit(at, [&] {
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (err < 0 || dup2(err, 2) < 0) return 13;
    RecordOptions o = Options(dir, {"perl", "-e", "select(undef, undef, undef, 0.5); exit 7"});
    std::ostringstream out;
    auto record = RunRecord(o, out);
    if (!record.ok() || *record != 7) return 14;
    auto meta = store::ReadRunMetadata(o.out);
    return meta.ok() && meta->exit_status == 7 ? 0 : 15;
  });
  auto err = ReadFileToString(err_path);
  ASSERT_EQ(code, 0) << test_child::Meaning(code)
                     << " (14: record failed or not the command's exit status; 15: run.json "
                        "does not hold it)\n"
                     << (err.ok() ? *err : "");
  // Not vacuous: the sampling thread was the one refused.
  ASSERT_TRUE(err.ok());
  EXPECT_NE(err->find("cannot start the sampling thread"), std::string::npos) << *err;
}

pid_t SpawnSleep(const char* seconds) {
  const char* argv[] = {"sleep", seconds, nullptr};
  pid_t pid = -1;
  posix_spawnp(&pid, "sleep", nullptr, nullptr, const_cast<char* const*>(argv), environ);
  return pid;
}

TEST(AgentTest, TwoNodesShareARunDirectoryAndStopWhenTheirPidsExit) {
  std::string dir = testing::TempDir() + "/job";
  pid_t pid = SpawnSleep("1");
  ASSERT_GT(pid, 0);
  std::thread reaper([pid] {
    int status;
    ::waitpid(pid, &status, 0);
  });
  AgentOptions a;
  a.out = dir;
  a.node = "algo-1";
  a.interval = "100ms";
  a.pids = {pid};
  a.name = "job";
  a.collector_factory = FakeFactory();
  std::ostringstream out;
  int64_t start = MonotonicNowNs();
  Status st = RunAgent(a, out);
  reaper.join();
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_LT(MonotonicNowNs() - start, 5 * kNanosPerSecond);
  EXPECT_NE(out.str().find("watched processes exited"), std::string::npos) << out.str();

  AgentOptions b = a;
  b.node = "algo-2";
  b.pids = {};
  b.duration_s = 0.5;
  ASSERT_TRUE(RunAgent(b, out).ok());
  EXPECT_NE(out.str().find("duration reached"), std::string::npos);

  auto reader = store::RunReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->nodes(), (std::vector<std::string>{"algo-1", "algo-2"}));
  EXPECT_EQ((*reader)->metadata().source, "agent");
  EXPECT_EQ((*reader)->metadata().name, "job");
  ASSERT_TRUE((*reader)->metadata().end_ns.has_value());
  store::MetricQuery q;
  q.metrics = {"fake_ticks"};
  auto table = (*reader)->SystemMetrics(q);
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(table->nodes.values().size(), 2u);
}

TEST(AgentTest, RefusesUnknownPids) {
  AgentOptions a;
  a.out = testing::TempDir() + "/job";
  a.pids = {999999999};
  std::ostringstream out;
  Status st = RunAgent(a, out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace trainprof::agent
