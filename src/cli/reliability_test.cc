// Issue 20 at the command level: exports never recurse without bound on stored data (a store
// holding args nested a million levels, as an older trainprof or a hostile file could leave
// it), and a failed import leaves no partial run directory behind.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "base/files.h"
#include "base/test_dir.h"
#include "cli/commands.h"
#include "store/run_directory.h"

namespace trainprof::cli {
namespace {

namespace fs = std::filesystem;

std::string TempDir() { return MakeTestDir("trainprof_reliability_test"); }

constexpr int64_t kStart = 1764541200'000'000'000LL;

std::string Nested(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s.append(static_cast<size_t>(depth), '}');
  return s;
}

// Runs `fn` in a child (a stack overflow kills the child, not the test); its exit status.
int RunInChild(const std::function<bool()>& fn) {
  pid_t pid = fork();
  if (pid == 0) _exit(fn() ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ReliabilityTest, ExportsOfDeeplyNestedStoredArgsDoNotCrash) {
  std::string dir = TempDir();
  std::string run = dir + "/run";
  model::RunMetadata m;
  m.run_id = "deep";
  m.name = "deep";
  m.start_ns = kStart;
  m.end_ns = kStart + 1000;
  ASSERT_TRUE(store::WriteRunMetadata(run, m).ok());
  {
    model::NodeInfo node;
    node.node = "n0";
    auto w = store::OpenNodeWriter(run, node);
    ASSERT_TRUE(w.ok()) << w.status().message();
    model::Event deep;
    deep.name = "deep";
    deep.category = "cpu_op";
    deep.start_ns = kStart;
    deep.duration_ns = 10;
    deep.args = "{\"x\":" + Nested(1'000'000) + ",\"y\":2}";
    (*w)->AppendEvent(deep);
    model::Event shallow = deep;
    shallow.name = "shallow";
    shallow.start_ns = kStart + 100;
    shallow.args = "{\"x\":" + Nested(3) + "}";
    (*w)->AppendEvent(shallow);
    model::Finding f;
    f.rule = "StepOutlier";
    f.node = "n0";
    f.start_ns = kStart;
    f.end_ns = kStart + 10;
    f.message = "deep evidence";
    f.evidence_json = Nested(1'000'000);
    (*w)->AddFinding(f);
    f.rule = "my_custom_rule";  // not a built-in: `rules` lists it from the store
    (*w)->AddFinding(f);
    ASSERT_TRUE((*w)->Close().ok());
  }
  std::ostringstream out;
  EXPECT_EQ(RunInChild([&] {
              std::ostringstream o;
              return RunExportChromeTrace({run, dir + "/t.json"}, o).ok();
            }),
            0);
  auto text = ReadFileToString(dir + "/t.json");
  ASSERT_TRUE(text.ok());
  // Parsed back (nlohmann's parser keeps its own stack): the deep args are kept as text, the
  // shallow ones as members.
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << "the export is not valid JSON (" << text->size() << " bytes)";
  int seen = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("name", "") == "deep") {
      ++seen;
      EXPECT_TRUE(e["args"]["args_text"].is_string());
      EXPECT_EQ(e["args"]["args_text"].get<std::string>().size(),
                std::string("{\"x\":" + Nested(1'000'000) + ",\"y\":2}").size());
    } else if (e.value("name", "") == "shallow") {
      ++seen;
      EXPECT_EQ(e["args"]["x"]["a"]["a"]["a"], 1);
    }
  }
  EXPECT_EQ(seen, 2);
  EXPECT_EQ(RunInChild([&] {
              std::ostringstream o;
              return RunExportSmdebug({run, dir + "/smdebug"}, o).ok();
            }),
            0);
  EXPECT_EQ(RunInChild([&] {
              std::ostringstream o;
              return RunExportCsv({run, dir + "/csv"}, o).ok();
            }),
            0);
  // The report shows stored findings with their evidence: deep evidence stays text.
  EXPECT_EQ(RunInChild([&] {
              std::ostringstream o;
              ReportOptions r;
              r.run = run;
              r.json_path = dir + "/r.json";
              r.html_path = dir + "/r.html";
              return RunReport(r, o).ok();
            }),
            0);
  EXPECT_EQ(RunInChild([&] {
              std::ostringstream o;
              RulesOptions r;
              r.run = run;
              r.json = true;
              return RunRules(r, o).ok() && o.str().find("my_custom_rule") != std::string::npos;
            }),
            0);
}

TEST(ReliabilityTest, FailedImportLeavesNoRunDirectory) {
  std::string dir = TempDir();
  // The first trace is fine (its events are stored), the second is not JSON.
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/good.json",
                          "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"cat\":\"cpu_op\","
                          "\"pid\":1,\"tid\":1,\"ts\":1700000000000000,\"dur\":5}]}")
          .ok());
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/bad.json", std::string("{\"traceEvents\":[\0\0\0", 19)).ok());
  ImportOptions o;
  o.sources = {dir + "/good.json", dir + "/bad.json"};
  o.out = dir + "/run";
  std::ostringstream out;
  Status s = RunImportKineto(o, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bad.json"), std::string::npos) << s.message();
  // What was found, not "end of file": the file goes on with NUL bytes.
  EXPECT_NE(s.message().find("byte 0x00"), std::string::npos) << s.message();
  EXPECT_FALSE(PathExists(o.out));
  // Nothing else is left beside it either (no temporary directory).
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"bad.json", "good.json"}));

  // The same import of the good file alone succeeds, named after the directory.
  o.sources = {dir + "/good.json"};
  ASSERT_TRUE(RunImportKineto(o, out).ok()) << out.str();
  auto meta = store::ReadRunMetadata(o.out);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->name, "run");
  // An existing run is never mixed into, and is left as it was.
  Status again = RunImportKineto(o, out);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("already"), std::string::npos) << again.message();
  EXPECT_TRUE(store::ReadRunMetadata(o.out).ok());
}

}  // namespace
}  // namespace trainprof::cli
