#include "agent/phase_tracker.h"

#include <gtest/gtest.h>

#include "agent/agent_test_util.h"
#include "store/run_directory.h"

namespace trainprof::agent {
namespace {

std::unique_ptr<store::NodeStoreWriter> OpenWriter(const std::string& dir) {
  model::RunMetadata meta;
  meta.name = "t";
  EXPECT_TRUE(store::WriteRunMetadata(dir, meta).ok());
  model::NodeInfo node;
  node.node = "n0";
  auto writer = store::OpenNodeWriter(dir, node);
  EXPECT_TRUE(writer.ok());
  return std::move(writer.value());
}

TEST(PhaseTrackerTest, MarkPairsBecomePhasesAndTheWholeRunIsInitialization) {
  std::string dir = testing::TempDir();
  auto writer = OpenWriter(dir);
  PhaseTracker phases(writer.get(), 1000, 42);
  phases.Mark("download_start", 1100);
  phases.Mark("download_end", 1500);
  phases.Mark("checkpoint_end", 1600);  // never started: a mark, counted
  phases.Mark("upload_start", 1800);    // never ended: closed at the run's end
  phases.Mark("hello", 1700);
  phases.Finish(2000);
  ASSERT_TRUE(writer->Close().ok());

  auto marks = testing::ReadEvents(dir, "mark");
  ASSERT_EQ(marks.size(), 5u);
  auto spans = testing::ReadEvents(dir, "phase");
  std::map<std::string, testing::StoredEvent> by_name;
  for (const auto& e : spans) by_name[e.name] = e;
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(by_name["download"].start_ns, 1100);
  EXPECT_EQ(by_name["download"].duration_ns, 400);
  EXPECT_EQ(by_name["upload"].start_ns, 1800);
  EXPECT_EQ(by_name["upload"].duration_ns, 200);
  EXPECT_NE(by_name["upload"].args.find("run_end"), std::string::npos);
  EXPECT_EQ(by_name["initialization"].start_ns, 1000);
  EXPECT_EQ(by_name["initialization"].duration_ns, 1000);
  EXPECT_NE(by_name["initialization"].args.find("no training steps"), std::string::npos);
  EXPECT_EQ(testing::ReadCounters(dir)["unpaired_marks"], 1);
}

TEST(PhaseTrackerTest, StepsSplitInitializationTrainingFinalization) {
  std::string dir = testing::TempDir();
  auto writer = OpenWriter(dir);
  PhaseTracker phases(writer.get(), 0, 1);
  phases.NoteStep(300, 350);
  phases.NoteStep(100, 150);
  phases.NoteStep(700, 800);
  phases.Finish(1000);
  ASSERT_TRUE(writer->Close().ok());
  std::map<std::string, testing::StoredEvent> by_name;
  for (const auto& e : testing::ReadEvents(dir, "phase")) by_name[e.name] = e;
  ASSERT_EQ(by_name.size(), 3u);
  EXPECT_EQ(by_name["initialization"].start_ns, 0);
  EXPECT_EQ(by_name["initialization"].duration_ns, 100);
  EXPECT_EQ(by_name["training"].start_ns, 100);
  EXPECT_EQ(by_name["training"].duration_ns, 700);
  EXPECT_EQ(by_name["finalization"].start_ns, 800);
  EXPECT_EQ(by_name["finalization"].duration_ns, 200);
}

TEST(PhaseTrackerTest, AbsurdStepsCannotStretchTheJobPhasesBeyondTheRun) {
  std::string dir = testing::TempDir();
  auto writer = OpenWriter(dir);
  PhaseTracker phases(writer.get(), 1000, 1);
  phases.NoteStep(1, INT64_MAX);  // from 1 ns to the end of time
  phases.Finish(5000);
  ASSERT_TRUE(writer->Close().ok());
  int64_t total = 0;
  for (const auto& e : testing::ReadEvents(dir, "phase")) {
    EXPECT_GE(e.start_ns, 1000) << e.name;
    EXPECT_LE(e.start_ns + e.duration_ns, 5000) << e.name;
    total += e.duration_ns;
  }
  EXPECT_EQ(total, 4000);  // initialization + training + finalization tile the run
}

TEST(PhaseTrackerTest, TrainingMarksDefineTheTrainingPhase) {
  std::string dir = testing::TempDir();
  auto writer = OpenWriter(dir);
  PhaseTracker phases(writer.get(), 0, 1);
  phases.Mark("training_start", 200);
  phases.Mark("training_end", 900);
  phases.Finish(1000);
  ASSERT_TRUE(writer->Close().ok());
  std::map<std::string, int> count;
  std::map<std::string, testing::StoredEvent> by_name;
  for (const auto& e : testing::ReadEvents(dir, "phase")) {
    ++count[e.name];
    by_name[e.name] = e;
  }
  EXPECT_EQ(count["training"], 1);  // from the marks, not duplicated
  EXPECT_EQ(by_name["initialization"].duration_ns, 200);
  EXPECT_EQ(by_name["finalization"].start_ns, 900);
}

TEST(PhaseTrackerTest, MarkNames) {
  EXPECT_TRUE(ValidateMarkName("download_start").ok());
  EXPECT_TRUE(ValidateMarkName("epoch-3.end").ok());
  EXPECT_FALSE(ValidateMarkName("").ok());
  EXPECT_FALSE(ValidateMarkName("has space").ok());
  EXPECT_FALSE(ValidateMarkName(std::string(129, 'a')).ok());
  // A terminal escape is refused without echoing it back.
  Status bad = ValidateMarkName("a\x1b[2Jb");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message().find('\x1b'), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("0x1b"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace trainprof::agent
