#include "store/run_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "base/files.h"
#include "store/run_directory.h"
#include "store/store_test_util.h"

namespace trainprof::store {
namespace {

using testing::MakeTempDir;
using testing::TestNode;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;
constexpr int64_t kMs = 1'000'000;

model::Event Span(const std::string& category, int64_t step, int64_t start, int64_t dur,
                  int64_t rank, const std::string& mode = "train") {
  model::Event e;
  e.name = category;
  e.category = category;
  e.mode = mode;
  e.step = step;
  e.start_ns = start;
  e.duration_ns = dur;
  e.rank = rank;
  e.pid = 100 + rank;
  return e;
}

// An empty run directory (run.json only) started at kT0, for a test to write stores into.
std::string MakeEmptyRun(const std::string& prefix, const std::string& run_id) {
  std::string dir = MakeTempDir(prefix);
  model::RunMetadata m;
  m.run_id = run_id;
  m.start_ns = kT0;
  EXPECT_TRUE(WriteRunMetadata(dir, m).ok());
  return dir;
}

// Two nodes, one rank each, three steps with data-wait / forward / backward / optimizer parts.
std::string MakeTwoNodeRun() {
  std::string dir = MakeTempDir("trainprof_run");
  model::RunMetadata m;
  m.run_id = "r1";
  m.name = "two-nodes";
  m.start_ns = kT0;
  m.end_ns = kT0 + 60'000 * kMs;
  m.exit_status = 0;
  EXPECT_TRUE(WriteRunMetadata(dir, m).ok());
  for (int rank = 0; rank < 2; ++rank) {
    auto w = OpenNodeWriter(dir, TestNode("algo-" + std::to_string(rank + 1)));
    EXPECT_TRUE(w.ok());
    SeriesId cpu = (*w)->Series("cpu_utilization_ratio", "total");
    for (int i = 0; i < 10; ++i) (*w)->Append(cpu, kT0 + i * 500 * kMs, 0.5 + rank * 0.1);
    for (int s = 0; s < 3; ++s) {
      int64_t t = kT0 + s * 100 * kMs;
      (*w)->AppendEvent(Span("step", s, t, 100 * kMs + rank * kMs, rank));
      (*w)->AppendEvent(Span("data_wait", s, t, 10 * kMs, rank));
      (*w)->AppendEvent(Span("forward", s, t + 10 * kMs, 30 * kMs, rank));
      (*w)->AppendEvent(Span("backward", s, t + 40 * kMs, 50 * kMs, rank));
      if (s != 2) (*w)->AppendEvent(Span("optimizer", s, t + 90 * kMs, 10 * kMs, rank));
    }
    EXPECT_TRUE((*w)->Close().ok());
  }
  return dir;
}

TEST(RunReaderTest, MergesNodesTransparently) {
  std::string dir = MakeTwoNodeRun();
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->metadata().name, "two-nodes");
  EXPECT_EQ((*r)->nodes(), (std::vector<std::string>{"algo-1", "algo-2"}));
  auto metrics = (*r)->SystemMetrics({});
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->size(), 20u);
  EXPECT_EQ(metrics->nodes.values().size(), 2u);
  MetricQuery only2;
  only2.nodes = {"algo-2"};
  auto m2 = (*r)->SystemMetrics(only2);
  ASSERT_TRUE(m2.ok());
  ASSERT_EQ(m2->size(), 10u);
  EXPECT_DOUBLE_EQ(m2->value[0], 0.6);

  EventQuery by_rank;
  by_rank.ranks = {1};
  by_rank.categories = {"step"};
  auto ev = (*r)->Events(by_rank);
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->size(), 3u);
}

TEST(RunReaderTest, StepsAddUpTheirParts) {
  auto r = RunReader::Open(MakeTwoNodeRun());
  ASSERT_TRUE(r.ok());
  auto steps = (*r)->Steps();
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 6u);
  for (size_t i = 0; i < steps->size(); ++i) {
    EXPECT_EQ(steps->data_wait_ns[i], 10 * kMs);
    EXPECT_EQ(steps->forward_ns[i], 30 * kMs);
    EXPECT_EQ(steps->backward_ns[i], 50 * kMs);
    EXPECT_EQ(steps->modes.at(steps->mode[i]), "train");
    if (steps->step[i] == 2) {
      EXPECT_EQ(steps->optimizer_ns[i], model::kMissing);  // missing is not zero
    } else {
      EXPECT_EQ(steps->optimizer_ns[i], 10 * kMs);
    }
  }
}

TEST(RunReaderTest, ProcessStoresMergeIntoTheirNode) {
  std::string dir = MakeTwoNodeRun();
  // Two training processes on algo-1 writing their own stores beside the node's store.
  for (int64_t pid : {4242, 4243}) {
    auto w = NodeStoreWriter::Open(ProcessStorePath(dir, "algo-1", pid), TestNode("algo-1"));
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    model::Event e = Span("step", 99, kT0 + 5000 * kMs, kMs, 7);
    e.pid = pid;
    (*w)->AppendEvent(e);
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->nodes(), (std::vector<std::string>{"algo-1", "algo-2"}));
  EventQuery q;
  q.ranks = {7};
  auto ev = (*r)->Events(q);
  ASSERT_TRUE(ev.ok());
  ASSERT_EQ(ev->size(), 2u);
  EXPECT_EQ(ev->nodes.at(ev->node[0]), "algo-1");
  auto steps = (*r)->Steps();
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(steps->size(), 8u);  // 6 from the node stores + one per process
}

// The shape the record e2e test met: marks flushed one by one, then a final chunk holding the
// last mark and the phase spans (which start early). Reading by chunk put the last mark first.
TEST(RunReaderTest, EventsComeInStartOrderWhateverTheChunks) {
  std::string dir = MakeEmptyRun("trainprof_order", "o");
  auto w = OpenNodeWriter(dir, TestNode());
  ASSERT_TRUE(w.ok());
  auto mark = [&](const std::string& name, int64_t t) {
    model::Event e = Span("mark", model::kMissing, t, 0, model::kMissing);
    e.name = name;
    e.kind = model::EventKind::kInstant;
    (*w)->AppendEvent(e);
  };
  mark("a_start", kT0 + 10 * kMs);
  ASSERT_TRUE((*w)->Flush().ok());
  mark("a_end", kT0 + 20 * kMs);
  ASSERT_TRUE((*w)->Flush().ok());
  mark("b_start", kT0 + 30 * kMs);
  mark("b_end", kT0 + 40 * kMs);
  model::Event phase = Span("phase", model::kMissing, kT0, 10 * kMs, model::kMissing);
  phase.name = "initialization";
  (*w)->AppendEvent(phase);
  ASSERT_TRUE((*w)->Close().ok());

  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok());
  auto events = (*r)->Events({});
  ASSERT_TRUE(events.ok());
  std::vector<std::string> names;
  for (size_t i = 0; i < events->size(); ++i) names.push_back(events->names.at(events->name[i]));
  EXPECT_EQ(names,
            (std::vector<std::string>{"initialization", "a_start", "a_end", "b_start", "b_end"}));
  EXPECT_TRUE(std::is_sorted(events->start_ns.begin(), events->start_ns.end()));
}

TEST(RunReaderTest, TailsNewEventsIncrementally) {
  std::string dir = MakeEmptyRun("trainprof_tail", "t");
  auto w = OpenNodeWriter(dir, TestNode());
  ASSERT_TRUE(w.ok());
  (*w)->AppendEvent(Span("step", 0, kT0, kMs, 0));
  ASSERT_TRUE((*w)->Flush().ok());
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok());
  EventCursor cursor;
  auto first = (*r)->EventsSince(&cursor);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->size(), 1u);
  auto none = (*r)->EventsSince(&cursor);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->size(), 0u);
  (*w)->AppendEvent(Span("step", 1, kT0 + kMs, kMs, 0));
  (*w)->AppendEvent(Span("step", 2, kT0 + 2 * kMs, kMs, 0));
  ASSERT_TRUE((*w)->Flush().ok());
  auto more = (*r)->EventsSince(&cursor);
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->size(), 2u);
  auto latest = (*r)->LatestTimestampNs();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(**latest, kT0 + 3 * kMs);
}

TEST(RunReaderTest, StepsFollowAStoreThatIsStillWritten) {
  // Steps() is kept between calls; new events, and a process store that appears, renew it.
  std::string dir = MakeEmptyRun("trainprof_live_steps", "live");
  auto w = OpenNodeWriter(dir, TestNode());
  ASSERT_TRUE(w.ok());
  (*w)->AppendEvent(Span("step", 0, kT0, 10 * kMs, 0));
  ASSERT_TRUE((*w)->Flush().ok());
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok());
  auto first = (*r)->Steps();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->size(), 1u);
  auto again = (*r)->Steps();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), 1u);
  (*w)->AppendEvent(Span("step", 1, kT0 + 10 * kMs, 10 * kMs, 0));
  (*w)->AppendEvent(Span("data_wait", 1, kT0 + 10 * kMs, 2 * kMs, 0));
  ASSERT_TRUE((*w)->Flush().ok());
  auto more = (*r)->Steps();
  ASSERT_TRUE(more.ok());
  ASSERT_EQ(more->size(), 2u);
  EXPECT_EQ(more->data_wait_ns[1], 2 * kMs);

  auto p = NodeStoreWriter::Open(ProcessStorePath(dir, "node0", 77), TestNode());
  ASSERT_TRUE(p.ok());
  model::Event e = Span("step", 5, kT0 + 50 * kMs, kMs, 1);
  e.pid = 77;
  (*p)->AppendEvent(e);
  ASSERT_TRUE((*p)->Close().ok());
  ASSERT_TRUE((*r)->Refresh().ok());
  auto with_process = (*r)->Steps();
  ASSERT_TRUE(with_process.ok());
  EXPECT_EQ(with_process->size(), 3u);
}

TEST(RunReaderTest, TailsNewSamplesOnceThroughSealing) {
  // Small tails every flush, sealed every 8 values (the sealed chunk repeats its tails): a
  // tail read returns each sample exactly once, the same samples as one read at the end.
  std::string dir = MakeEmptyRun("trainprof_metric_tail", "mt");
  WriterOptions options;
  options.seal_values = 8;
  auto w = OpenNodeWriter(dir, TestNode(), options);
  ASSERT_TRUE(w.ok());
  SeriesId a = (*w)->Series("cpu_utilization_ratio", "total");
  SeriesId b = (*w)->Series("memory_used_bytes", "");
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok());
  ChunkCursor cursor;
  std::map<std::string, std::vector<std::pair<int64_t, double>>> tailed;
  auto tail = [&] {
    auto t = (*r)->SystemMetricsSince(&cursor);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    for (size_t i = 0; i < t->size(); ++i) {
      tailed[t->metrics.at(t->metric[i])].push_back({t->timestamp_ns[i], t->value[i]});
    }
  };
  for (int i = 0; i < 50; ++i) {
    (*w)->Append(a, kT0 + i * 100 * kMs, 0.01 * i);
    if (i % 2 == 0) (*w)->Append(b, kT0 + i * 100 * kMs, 1000.0 + i);
    if (i % 3 == 2) {
      ASSERT_TRUE((*w)->Flush().ok());
    }
    if (i % 5 == 4) tail();
  }
  ASSERT_TRUE((*w)->Close().ok());
  tail();
  tail();  // nothing new
  auto all = (*r)->SystemMetrics({});
  ASSERT_TRUE(all.ok());
  std::map<std::string, std::vector<std::pair<int64_t, double>>> whole;
  for (size_t i = 0; i < all->size(); ++i) {
    whole[all->metrics.at(all->metric[i])].push_back({all->timestamp_ns[i], all->value[i]});
  }
  ASSERT_EQ(whole["cpu_utilization_ratio"].size(), 50u);
  ASSERT_EQ(whole["memory_used_bytes"].size(), 25u);
  for (auto& [metric, samples] : tailed) {
    std::sort(samples.begin(), samples.end());
    EXPECT_EQ(samples, whole[metric]) << metric;
  }
  EXPECT_EQ(tailed.size(), 2u);
}

// A live poll selects a few metrics of many series: the tail read asks SQLite for those series'
// chunks only. It must return what the whole read returns for them (a series that appears
// after the first poll included, no other series), and reading everything must still work
// with another reader.
TEST(RunReaderTest, TailOfSelectedSeriesEqualsTheWholeReadOfThem) {
  std::string dir = MakeEmptyRun("trainprof_metric_tail_selected", "ms");
  WriterOptions options;
  options.seal_values = 8;
  auto w = OpenNodeWriter(dir, TestNode(), options);
  ASSERT_TRUE(w.ok());
  std::vector<SeriesId> ids;
  for (int k = 0; k < 12; ++k) ids.push_back((*w)->Series("cpu_core_ratio", std::to_string(k)));
  ids.push_back((*w)->Series("gpu_utilization_ratio", "gpu0"));
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok());
  auto every_reader = RunReader::Open(dir);  // its own connection: no selection to rebuild
  ASSERT_TRUE(every_reader.ok());
  MetricQuery q;
  q.metrics = {"gpu_utilization_ratio", "memory_used_bytes"};
  ChunkCursor cursor, every_cursor;
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<int64_t, double>>> tailed;
  size_t every_rows = 0;
  auto tail = [&] {
    auto t = (*r)->SystemMetricsSince(&cursor, q);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    for (size_t i = 0; i < t->size(); ++i) {
      tailed[{t->metrics.at(t->metric[i]), t->devices.at(t->device[i])}].push_back(
          {t->timestamp_ns[i], t->value[i]});
    }
    auto e = (*every_reader)->SystemMetricsSince(&every_cursor);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    every_rows += e->size();
  };
  SeriesId late = 0;
  for (int i = 0; i < 60; ++i) {
    for (SeriesId id : ids) (*w)->Append(id, kT0 + i * 100 * kMs, 0.01 * i + id);
    if (i == 20) late = (*w)->Series("memory_used_bytes", "");
    if (i >= 20) (*w)->Append(late, kT0 + i * 100 * kMs, 1000.0 + i);
    if (i % 3 == 2) {
      ASSERT_TRUE((*w)->Flush().ok());
    }
    if (i % 7 == 6) tail();
  }
  ASSERT_TRUE((*w)->Close().ok());
  tail();
  tail();  // nothing new
  auto all = (*r)->SystemMetrics({});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(every_rows, all->size());
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<int64_t, double>>> whole;
  for (size_t i = 0; i < all->size(); ++i) {
    const std::string& metric = all->metrics.at(all->metric[i]);
    if (metric != "gpu_utilization_ratio" && metric != "memory_used_bytes") continue;
    whole[{metric, all->devices.at(all->device[i])}].push_back(
        {all->timestamp_ns[i], all->value[i]});
  }
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_EQ(whole[std::make_pair(std::string("memory_used_bytes"), std::string())].size(), 40u);
  EXPECT_EQ(tailed.size(), 2u);
  for (auto& [key, samples] : tailed) {
    std::sort(samples.begin(), samples.end());
    EXPECT_EQ(samples, whole[key]) << key.first;
  }
}

// BuildSteps over the per-store tables (what analyze reads) gives the rows Steps() builds from the
// merged table: steps from three stores (a node's store, a process store on the same node, a
// second node) with starts equal across stores, a duplicate step record, and a step whose parts
// are in another store than its step span. Hand-counted truth beside the comparison.
TEST(RunReaderTest, StepsOfTheStoresEqualTheStepsOfTheMergedTable) {
  std::string dir = MakeEmptyRun("trainprof_steps_by_store", "sb");
  auto step = [](int64_t rank, int64_t pid, int64_t n, int64_t start, int64_t dur,
                 const std::string& category = model::kCategoryStep) {
    model::Event e = Span(category, n, start, dur, rank);
    e.pid = pid;
    return e;
  };
  {
    auto w = OpenNodeWriter(dir, TestNode("a"));
    ASSERT_TRUE(w.ok());
    for (int n = 0; n < 6; ++n) {
      (*w)->AppendEvent(step(0, 100, n, kT0 + n * 10 * kMs, 8 * kMs));
      (*w)->AppendEvent(step(0, 100, n, kT0 + n * 10 * kMs, 2 * kMs, model::kCategoryDataWait));
    }
    // A second record of step 3 (later): the first is kept.
    (*w)->AppendEvent(step(0, 100, 3, kT0 + 35 * kMs, 1 * kMs));
    ASSERT_TRUE((*w)->Close().ok());
  }
  {
    // The process store of pid 200 on node a: its own steps, and the forward part of rank 0's
    // step 2 (its step span is in the node's store).
    auto w = NodeStoreWriter::Open(ProcessStorePath(dir, "a", 200), TestNode("a"));
    ASSERT_TRUE(w.ok());
    for (int n = 0; n < 6; ++n) {
      (*w)->AppendEvent(step(1, 200, n, kT0 + n * 10 * kMs, 9 * kMs));
      (*w)->AppendEvent(
          step(1, 200, n, kT0 + n * 10 * kMs + kMs, 3 * kMs, model::kCategoryBackward));
    }
    (*w)->AppendEvent(step(0, 100, 2, kT0 + 21 * kMs, 4 * kMs, model::kCategoryForward));
    ASSERT_TRUE((*w)->Close().ok());
  }
  {
    auto w = OpenNodeWriter(dir, TestNode("b"));
    ASSERT_TRUE(w.ok());
    for (int n = 0; n < 6; ++n) {
      model::Event e = step(2, 300, n, kT0 + n * 10 * kMs, 7 * kMs);
      e.mode = n < 4 ? "train" : "eval";
      (*w)->AppendEvent(e);
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok());
  auto merged = (*r)->Steps();
  ASSERT_TRUE(merged.ok());
  auto by_store = (*r)->EventsByStore({});
  ASSERT_TRUE(by_store.ok());
  ASSERT_EQ(by_store->size(), 3u);
  const StepTable got = BuildSteps(*by_store);
  // Truth: 6 steps for each of the three (rank, pid), the duplicate dropped.
  ASSERT_EQ(got.size(), 18u);
  EXPECT_TRUE(std::is_sorted(got.start_ns.begin(), got.start_ns.end()));
  size_t rank0_step2 = got.size(), rank0_step3 = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got.rank[i] == 0 && got.step[i] == 2) rank0_step2 = i;
    if (got.rank[i] == 0 && got.step[i] == 3) rank0_step3 = i;
  }
  ASSERT_LT(rank0_step2, got.size());
  ASSERT_LT(rank0_step3, got.size());
  EXPECT_EQ(got.forward_ns[rank0_step2], 4 * kMs);  // from the other store
  EXPECT_EQ(got.data_wait_ns[rank0_step2], 2 * kMs);
  EXPECT_EQ(got.duration_ns[rank0_step3], 8 * kMs);  // the first record
  // Equal starts keep the stores' order, by path: nodes/a/proc-200.sqlite, nodes/a/store.sqlite,
  // nodes/b/store.sqlite.
  EXPECT_EQ(got.rank[0], 1);
  EXPECT_EQ(got.rank[1], 0);
  EXPECT_EQ(got.rank[2], 2);
  // Every column and dictionary equals the merged table's steps.
  EXPECT_EQ(got.nodes.values(), merged->nodes.values());
  EXPECT_EQ(got.modes.values(), merged->modes.values());
  EXPECT_EQ(got.node, merged->node);
  EXPECT_EQ(got.mode, merged->mode);
  EXPECT_EQ(got.rank, merged->rank);
  EXPECT_EQ(got.pid, merged->pid);
  EXPECT_EQ(got.step, merged->step);
  EXPECT_EQ(got.start_ns, merged->start_ns);
  EXPECT_EQ(got.duration_ns, merged->duration_ns);
  EXPECT_EQ(got.data_wait_ns, merged->data_wait_ns);
  EXPECT_EQ(got.forward_ns, merged->forward_ns);
  EXPECT_EQ(got.backward_ns, merged->backward_ns);
  EXPECT_EQ(got.optimizer_ns, merged->optimizer_ns);
}

// EventQuery::keep_args: the events it accepts keep their args byte for byte, the others read
// empty, and everything else about the rows is as without it; asked once per category and kind.
TEST(RunReaderTest, KeepArgsKeepsOnlyTheArgsAsked) {
  std::string dir = MakeEmptyRun("trainprof_keep_args", "ka");
  auto w = OpenNodeWriter(dir, TestNode());
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 300; ++i) {
    model::Event e = Span(i % 3 == 0 ? "kernel" : "cpu_op", i, kT0 + i * kMs, kMs, 0);
    e.args = "{\"correlation\": " + std::to_string(1000 + i) + ", \"pad\": \"" +
             std::string(40, 'x') + "\"}";
    if (i % 10 == 0) {
      e.kind = model::EventKind::kInstant;
      e.duration_ns = 0;
    }
    (*w)->AppendEvent(e);
  }
  ASSERT_TRUE((*w)->Close().ok());
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok());
  auto all = (*r)->EventsByStore({});
  ASSERT_TRUE(all.ok());
  EventQuery q;
  std::map<std::pair<std::string, int>, int> asked;
  q.keep_args = [&](const std::string& category, model::EventKind kind) {
    ++asked[{category, static_cast<int>(kind)}];
    return category == "kernel" && kind == model::EventKind::kSpan;
  };
  auto some = (*r)->EventsByStore(q);
  ASSERT_TRUE(some.ok());
  ASSERT_EQ(all->size(), 1u);
  ASSERT_EQ(some->size(), 1u);
  const EventTable& a = (*all)[0].events;
  const EventTable& b = (*some)[0].events;
  ASSERT_EQ(a.size(), 300u);
  ASSERT_EQ(b.size(), a.size());
  size_t kept = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b.start_ns[i], a.start_ns[i]);
    EXPECT_EQ(b.kind[i], a.kind[i]);
    EXPECT_EQ(b.categories.at(b.category[i]), a.categories.at(a.category[i]));
    const bool wanted = a.categories.at(a.category[i]) == "kernel" &&
                        a.kind[i] == static_cast<uint8_t>(model::EventKind::kSpan);
    ASSERT_FALSE(a.args[i].empty());
    EXPECT_EQ(b.args[i], wanted ? a.args[i] : std::string()) << i;
    kept += wanted;
  }
  EXPECT_EQ(kept, 90u);  // i % 3 == 0 and not i % 10 == 0: 100 - 10
  EXPECT_EQ(asked.size(), 4u);
  for (const auto& [key, n] : asked) EXPECT_EQ(n, 1) << key.first << " " << key.second;
}

// EventQuery::map_args: every event that keeps its args keeps what the map makes of the text
// (here its length and first byte), asked once per such event; the others keep none.
TEST(RunReaderTest, MapArgsKeepsWhatTheMapMakesOfTheArgs) {
  std::string dir = MakeEmptyRun("trainprof_map_args", "ma");
  auto w = OpenNodeWriter(dir, TestNode());
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 200; ++i) {
    model::Event e = Span(i % 2 == 0 ? "kernel" : "cpu_op", i, kT0 + i * kMs, kMs, 0);
    e.args =
        "{\"correlation\": " + std::to_string(i) + std::string(static_cast<size_t>(i), 'x') + "}";
    (*w)->AppendEvent(e);
  }
  ASSERT_TRUE((*w)->Close().ok());
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok());
  auto all = (*r)->Events({});
  ASSERT_TRUE(all.ok());
  EventQuery q;
  q.keep_args = [](const std::string& category, model::EventKind) { return category == "kernel"; };
  int calls = 0;
  q.map_args = [&](std::string_view args, std::string* kept) {
    ++calls;
    *kept = std::to_string(args.size()) + std::string(args.substr(0, 1));
  };
  auto mapped = (*r)->Events(q);
  ASSERT_TRUE(mapped.ok());
  ASSERT_EQ(all->size(), 200u);
  ASSERT_EQ(mapped->size(), all->size());
  for (size_t i = 0; i < all->size(); ++i) {
    const bool kernel = all->categories.at(all->category[i]) == "kernel";
    const std::string& text = all->args[i];
    EXPECT_EQ(mapped->args[i], kernel ? std::to_string(text.size()) + "{" : std::string()) << i;
  }
  EXPECT_EQ(calls, 100);
}

TEST(RunReaderTest, BrokenNodeIsReportedOthersStayReadable) {
  std::string dir = MakeTwoNodeRun();
  ASSERT_TRUE(WriteFileAtomically(NodeStorePath(dir, "algo-2"), "not a database").ok());
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->nodes(), std::vector<std::string>{"algo-1"});
  ASSERT_EQ((*r)->problems().size(), 1u);
  EXPECT_NE((*r)->problems()[0].find("algo-2"), std::string::npos);
  auto metrics = (*r)->SystemMetrics({});
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->size(), 10u);
}

// Nodes whose series and event names differ and first appear in different orders: several
// stores are read in parallel (each into its own table) and appended. The result must be what
// reading the stores one after the other gives: each store alone (a one-store read, the
// sequential code) appended in store order, dictionaries coded in first-seen order.
TEST(RunReaderTest, ParallelReadOfSeveralStoresEqualsTheSequentialRead) {
  std::string dir = MakeEmptyRun("trainprof_run", "r1");
  std::vector<std::string> nodes;
  for (int k = 1; k <= 5; ++k) {
    nodes.push_back("node-" + std::to_string(k));
    auto w = OpenNodeWriter(dir, TestNode(nodes.back()));
    ASSERT_TRUE(w.ok());
    SeriesId own = (*w)->Series("metric_" + std::to_string(6 - k), "dev" + std::to_string(k));
    SeriesId common = (*w)->Series("cpu_utilization_ratio", "total");
    for (int i = 0; i < 20; ++i) {
      (*w)->Append(own, kT0 + i * 500 * kMs, k + i * 0.01);
      (*w)->Append(common, kT0 + i * 500 * kMs + k, 0.1 * k);
    }
    for (int i = 0; i < 30; ++i) {
      model::Event e = Span(i % 2 ? "cat_" + std::to_string(k) : "step", i, kT0 + i * kMs, kMs, k,
                            k % 2 ? "train" : "eval");
      e.name = "name_" + std::to_string((i + k) % 4);
      e.args = "{\"i\":" + std::to_string(i) + "}";
      (*w)->AppendEvent(e);
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok());
  // The sequential expectation, one store at a time.
  MetricTable want_m;
  EventTable want_e;
  for (const std::string& node : nodes) {
    MetricQuery mq;
    mq.nodes = {node};
    auto part = (*r)->SystemMetrics(mq);
    ASSERT_TRUE(part.ok());
    for (size_t i = 0; i < part->size(); ++i) {
      want_m.node.push_back(want_m.nodes.Code(part->nodes.at(part->node[i])));
      want_m.metric.push_back(want_m.metrics.Code(part->metrics.at(part->metric[i])));
      want_m.device.push_back(want_m.devices.Code(part->devices.at(part->device[i])));
      want_m.timestamp_ns.push_back(part->timestamp_ns[i]);
      want_m.value.push_back(part->value[i]);
    }
  }
  auto got_m = (*r)->SystemMetrics({});
  ASSERT_TRUE(got_m.ok());
  EXPECT_EQ(got_m->nodes.values(), want_m.nodes.values());
  EXPECT_EQ(got_m->metrics.values(), want_m.metrics.values());
  EXPECT_EQ(got_m->devices.values(), want_m.devices.values());
  EXPECT_EQ(got_m->node, want_m.node);
  EXPECT_EQ(got_m->metric, want_m.metric);
  EXPECT_EQ(got_m->device, want_m.device);
  EXPECT_EQ(got_m->timestamp_ns, want_m.timestamp_ns);
  EXPECT_EQ(got_m->value, want_m.value);
  EXPECT_EQ(got_m->size(), 5u * 40u);

  // Events: the merged table holds every store's rows by start time, a store's own order kept;
  // EventsByStore holds the same rows per store.
  auto got_e = (*r)->Events({});
  auto by_store = (*r)->EventsByStore({});
  ASSERT_TRUE(got_e.ok());
  ASSERT_TRUE(by_store.ok());
  ASSERT_EQ(by_store->size(), nodes.size());
  ASSERT_EQ(got_e->size(), 5u * 30u);
  EXPECT_TRUE(std::is_sorted(got_e->start_ns.begin(), got_e->start_ns.end()));
  std::map<std::string, std::vector<std::string>> merged_rows;
  for (size_t i = 0; i < got_e->size(); ++i) {
    merged_rows[got_e->nodes.at(got_e->node[i])].push_back(
        got_e->names.at(got_e->name[i]) + "|" + got_e->categories.at(got_e->category[i]) + "|" +
        got_e->modes.at(got_e->mode[i]) + "|" + std::to_string(got_e->start_ns[i]) + "|" +
        std::to_string(got_e->rank[i]) + "|" + got_e->args[i]);
  }
  for (size_t s = 0; s < nodes.size(); ++s) {
    const StoreEvents& part = (*by_store)[s];
    EXPECT_EQ(part.node, nodes[s]);
    std::vector<std::string> rows;
    for (size_t i = 0; i < part.events.size(); ++i) {
      rows.push_back(part.events.names.at(part.events.name[i]) + "|" +
                     part.events.categories.at(part.events.category[i]) + "|" +
                     part.events.modes.at(part.events.mode[i]) + "|" +
                     std::to_string(part.events.start_ns[i]) + "|" +
                     std::to_string(part.events.rank[i]) + "|" + part.events.args[i]);
    }
    EXPECT_EQ(rows.size(), 30u);
    EXPECT_EQ(rows, merged_rows[nodes[s]]) << nodes[s];
  }
  // First-seen order of the merged dictionaries: store by store.
  std::vector<std::string> want_categories;
  for (const StoreEvents& part : *by_store) {
    for (const std::string& c : part.events.categories.values()) {
      if (std::find(want_categories.begin(), want_categories.end(), c) == want_categories.end()) {
        want_categories.push_back(c);
      }
    }
  }
  EXPECT_EQ(got_e->categories.values(), want_categories);
}

TEST(RunReaderTest, MissingRunJsonIsAProblemNotAFailure) {
  std::string dir = MakeTwoNodeRun();
  ASSERT_EQ(std::remove(RunJsonPath(dir).c_str()), 0);
  auto r = RunReader::Open(dir);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE((*r)->problems().empty());
  EXPECT_NE((*r)->problems()[0].find("run.json"), std::string::npos);
  EXPECT_EQ((*r)->nodes().size(), 2u);
}

TEST(RunReaderTest, NotARunIsNotFound) {
  std::string dir = MakeTempDir();
  auto r = RunReader::Open(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(dir), std::string::npos);
}

TEST(RunReaderTest, ListsRunsNewestFirst) {
  std::string parent = MakeTempDir("trainprof_runs");
  for (int i = 0; i < 3; ++i) {
    model::RunMetadata m;
    m.run_id = "run" + std::to_string(i);
    m.name = "r" + std::to_string(i);
    m.start_ns = kT0 + i * kMs;
    m.end_ns = m.start_ns + 5 * kMs;
    m.exit_status = i;
    ASSERT_TRUE(WriteRunMetadata(parent + "/" + m.run_id, m).ok());
  }
  ASSERT_TRUE(MakeDirs(parent + "/not-a-run").ok());
  // An import in progress (a hidden directory, its store locked until it is moved into place)
  // is not listed.
  model::RunMetadata importing;
  importing.run_id = "importing";
  importing.start_ns = kT0 + 9 * kMs;
  ASSERT_TRUE(WriteRunMetadata(parent + "/.r.importing.Ab12Cd", importing).ok());
  auto runs = ListRuns(parent);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].run_id, "run2");
  EXPECT_EQ((*runs)[0].duration_ns, 5 * kMs);
  EXPECT_EQ((*runs)[0].exit_status, 2);
}

}  // namespace
}  // namespace trainprof::store
