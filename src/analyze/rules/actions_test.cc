// Actions against real processes and a real HTTP server on loopback.

#include "analyze/rules/actions.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <thread>

#include "analyze/rules/engine.h"
#include "analyze/rules/rules_test_util.h"
#include "base/children.h"
#include "base/files.h"
#include "base/time.h"

namespace trainprof::analyze::rules {
namespace {

using testing::TempDir;

pid_t Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  TP_CHECK(posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) == 0);
  return pid;
}

void WaitForFile(const std::string& path) {
  for (int i = 0; i < 500 && !PathExists(path); ++i) usleep(10'000);
  ASSERT_TRUE(PathExists(path));
}

model::Finding SampleFinding() {
  model::Finding f;
  f.rule = "StepOutlier";
  f.node = "algo-1";
  f.device = "rank0";
  f.start_ns = 1;
  f.end_ns = 2;
  f.message = "12 steps took longer than mean + 3 std";
  f.recommendation = "look at periodic work";
  f.evidence_json = R"({"outliers": 12})";
  return f;
}

TEST(StopProcessTest, SigtermEndsACooperativeChild) {
  const pid_t pid = Spawn({"sleep", "30"});
  auto r = StopProcess(pid, 5'000'000'000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->exited_after_sigterm);
  EXPECT_FALSE(r->killed);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);  // the caller still reaps its child
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(StopProcessTest, SigkillAfterTheGracePeriodWhenSigtermIsIgnored) {
  const std::string ready = TempDir("stop") + "/ready";
  const pid_t pid = Spawn({"sh", "-c", "trap '' TERM; echo > " + ready + "; exec sleep 30"});
  WaitForFile(ready);
  const int64_t start = MonotonicNowNs();
  auto r = StopProcess(pid, 300'000'000);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->killed);
  EXPECT_GE(MonotonicNowNs() - start, 300'000'000);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  // A process that is gone already is not an error.
  auto again = StopProcess(pid, 1000);
  EXPECT_TRUE(!again.ok() || again->already_gone);
}

TEST(CommandActionTest, TheFindingArrivesAsJsonOnStdin) {
  const std::string out = TempDir("cmd") + "/finding.json";
  const std::string json = FindingToJson(SampleFinding()).dump();
  auto r = RunCommandWithInput({"sh", "-c", "cat > " + out}, json, 5'000'000'000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, 0);
  auto text = ReadFileToString(out);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, json);
  // A command that does not read its input, one that fails, one that does not exist.
  EXPECT_EQ(*RunCommandWithInput({"true"}, std::string(1 << 20, 'x'), 5'000'000'000), 0);
  EXPECT_EQ(*RunCommandWithInput({"sh", "-c", "exit 3"}, json, 5'000'000'000), 3);
  EXPECT_FALSE(RunCommandWithInput({"/no/such/command"}, json, 5'000'000'000).ok());
  auto slow = RunCommandWithInput({"sleep", "10"}, json, 200'000'000);
  EXPECT_FALSE(slow.ok());
}

class WebhookServer {
 public:
  WebhookServer() {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      bodies_.push_back(req.body);
      content_type_ = req.get_header_value("Content-Type");
      res.set_content("{}", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // bind_to_any_port() listens already: connections queue until the accept loop runs.
  }
  ~WebhookServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::string content_type() {
    std::lock_guard<std::mutex> lock(mu_);
    return content_type_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> bodies_;
  std::string content_type_;
};

// `record` reaps orphans on its main thread while the live rules' actions run commands on
// another: a command that ran fine must report its own exit status, not "waitpid: No child
// processes" (what a blanket waitpid(-1) in the reaper made of it).
TEST(CommandActionTest, ExitStatusSurvivesAnOrphanReaperOnAnotherThread) {
  std::atomic<bool> stop{false};
  std::thread reaper([&] {
    while (!stop.load()) {
      ReapOrphans();
      usleep(500);
    }
  });
  for (int i = 0; i < 10; ++i) {
    auto r = RunCommandWithInput({"sh", "-c", "sleep 0.02; exit " + std::to_string(i)}, "{}",
                                 5'000'000'000);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(*r, i);
  }
  stop = true;
  reaper.join();
}

TEST(WebhookActionTest, PostsTheFindingToALocalServer) {
  WebhookServer server;
  const std::string json = FindingToJson(SampleFinding()).dump();
  auto r = PostJson(server.url(), json, 5'000'000'000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, 200);
  ASSERT_EQ(server.bodies().size(), 1u);
  EXPECT_EQ(server.bodies()[0], json);
  EXPECT_EQ(server.content_type(), "application/json");
  auto missing = PostJson("http://127.0.0.1:1/hook", json, 1'000'000'000);
  EXPECT_FALSE(missing.ok());
}

TEST(ActionRunnerTest, RunsEachConfiguredActionAndRecordsTheOutcome) {
  WebhookServer server;
  const std::string dir = TempDir("runner");
  const pid_t job = Spawn({"sleep", "30"});
  auto config = ParseRuleConfig(R"({"rules": {"StepOutlier": {"actions": [
      {"type": "log"},
      {"type": "command", "command": ["sh", "-c", "cat > )" +
                                    dir + R"(/f.json"]},
      {"type": "webhook", "url": ")" +
                                    server.url() + R"("},
      {"type": "stop", "grace_s": 5}]}}})",
                                "test");
  ASSERT_TRUE(config.ok()) << config.status().message();
  {
    ActionRunner runner(*config, StopPid(job, false));
    runner.Submit(SampleFinding());
    model::Finding other = SampleFinding();
    other.rule = "LowGPUUtilization";  // no actions configured: logged
    runner.Submit(other);
    runner.Drain();
    auto outcomes = runner.TakeOutcomes();
    ASSERT_EQ(outcomes.size(), 5u);
    for (const auto& o : outcomes) EXPECT_TRUE(o.ok) << o.action << ": " << o.detail;
    EXPECT_EQ(outcomes[3].action, "stop");
    EXPECT_NE(outcomes[3].detail.find("SIGTERM"), std::string::npos);
    EXPECT_EQ(outcomes[4].rule, "LowGPUUtilization");
    EXPECT_EQ(outcomes[4].action, "log");
  }
  int status = 0;
  ASSERT_EQ(waitpid(job, &status, 0), job);
  EXPECT_TRUE(WIFSIGNALED(status));
  auto text = ReadFileToString(dir + "/f.json");
  ASSERT_TRUE(text.ok());
  auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["rule"], "StepOutlier");
  EXPECT_EQ(j["evidence"]["outliers"], 12);
  ASSERT_EQ(server.bodies().size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(server.bodies()[0])["node"], "algo-1");
}

TEST(ActionRunnerTest, StopWithoutAJobIsRecordedNotFatal) {
  auto config =
      ParseRuleConfig(R"({"rules": {"StepOutlier": {"actions": [{"type": "stop"}]}}})", "t");
  ASSERT_TRUE(config.ok());
  ActionRunner runner(*config, nullptr);
  runner.Submit(SampleFinding());
  runner.Drain();
  auto outcomes = runner.TakeOutcomes();
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_NE(outcomes[0].detail.find("offline"), std::string::npos);
}

}  // namespace
}  // namespace trainprof::analyze::rules
