// SplitStoreByRank (analyze's read: a store's chunks split by rank as they are decoded) against
// SplitByRank of the same store's EventTable (RunReader::EventsByStore), and the steps it keeps
// against RunReader::Steps(), on a store whose chunks are out of start order.

#include "analyze/trace/rank_trace.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <limits>
#include <random>

#include "base/test_dir.h"
#include "model/event.h"
#include "store/node_store_reader.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace trainprof::analyze::trace {
namespace {

constexpr int64_t kUs = 1000;
constexpr int64_t kT0 = 1'796'040'000LL * 1'000'000'000LL;

// Every field of a rank's trace, names as strings.
std::vector<std::string> Rows(const RankTrace& t) {
  std::vector<std::string> out = {"rank " + std::to_string(t.rank) + " " + t.label + " " + t.node};
  for (const GpuActivity& a : t.gpu) {
    out.push_back("gpu " + t.Name(a.name) + " " + std::to_string(a.start_ns) + " " +
                  std::to_string(a.end_ns) + " " + std::to_string(a.device) + " " +
                  std::to_string(a.stream) + " " + std::to_string(a.correlation) + " " +
                  std::to_string(static_cast<int>(a.kind)));
  }
  for (const CpuSpan& c : t.cpu) {
    out.push_back("cpu " + t.Name(c.name) + " " + std::to_string(c.start_ns) + " " +
                  std::to_string(c.end_ns) + " " + std::to_string(c.tid) + " " +
                  std::to_string(c.correlation) + " " + std::to_string(c.step) + " " +
                  std::to_string(static_cast<int>(c.kind)));
  }
  return out;
}

TEST(RankTraceTest, SplitStoreByRankEqualsSplitByRankOfTheStoreTable) {
  const std::string dir = MakeTestDir("rank_trace_test");
  model::RunMetadata meta;
  meta.run_id = "split";
  meta.start_ns = kT0;
  ASSERT_TRUE(store::WriteRunMetadata(dir, meta).ok());
  model::NodeInfo info;
  info.node = "host";
  store::WriterOptions options;
  options.max_events_per_chunk = 50;  // many chunks, overlapping in time
  auto w = store::OpenNodeWriter(dir, info, options);
  ASSERT_TRUE(w.ok());
  // Per rank (0, 1 and none), per step: a step span with its data-wait and forward parts, a
  // ProfilerStep# annotation, operators, runtime calls and the kernels they launch (one a memcpy
  // named as a kernel), an instant; two kernels of a step start together (equal starts).
  std::vector<model::Event> events;
  int64_t correlation = 1;
  size_t kernels = 0, runtime = 0;
  for (int64_t rank : {int64_t{0}, int64_t{1}, model::kMissing}) {
    for (int64_t step = 0; step < 40; ++step) {
      const int64_t t = kT0 + step * 1000 * kUs;
      auto add = [&](const std::string& name, const std::string& cat, int64_t start, int64_t dur,
                     int64_t pid, int64_t tid, const std::string& args = "") {
        model::Event e;
        e.name = name;
        e.category = cat;
        e.start_ns = start;
        e.duration_ns = dur;
        e.rank = rank;
        e.pid = pid;
        e.tid = tid;
        e.args = args;
        e.step = step;
        e.mode = "train";
        events.push_back(e);
        return &events.back();
      };
      add("step", model::kCategoryStep, t, 900 * kUs, 10, 10);
      add("data_wait", model::kCategoryDataWait, t, 100 * kUs, 10, 10);
      add("forward", model::kCategoryForward, t + 100 * kUs, 300 * kUs, 10, 10);
      add("ProfilerStep#" + std::to_string(step), "user_annotation", t, 900 * kUs, 10, 10);
      add("aten::mm", "cpu_op", t + 120 * kUs, 50 * kUs, 10, 10);
      for (int k = 0; k < 3; ++k) {
        const std::string corr = "{\"correlation\": " + std::to_string(correlation) + "}";
        add("cudaLaunchKernel", "cuda_runtime", t + (130 + k) * kUs, kUs, 10, 10, corr);
        ++runtime;
        // Kernels 1 and 2 start together; kernel 2 is a copy; the stream from the args.
        add(k == 2 ? "Memcpy HtoD" : "gemm_" + std::to_string(k), "kernel",
            t + (k == 0 ? 200 : 300) * kUs, 40 * kUs, 0, model::kMissing,
            "{\"correlation\": " + std::to_string(correlation) +
                ", \"stream\": " + std::to_string(7 + k) + "}");
        ++kernels;
        ++correlation;
      }
      model::Event* mark = add("mark", "user_annotation", t + 5 * kUs, 0, 10, 10);
      mark->kind = model::EventKind::kInstant;
    }
  }
  // Written out of start order: the chunks' events, and the chunks, are not sorted by start.
  std::mt19937 rng(7);
  std::shuffle(events.begin(), events.end(), rng);
  for (const model::Event& e : events) (*w)->AppendEvent(e);
  ASSERT_TRUE((*w)->Close().ok());

  auto reader = store::RunReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  auto tables = (*reader)->EventsByStore({});
  ASSERT_TRUE(tables.ok());
  ASSERT_EQ(tables->size(), 1u);
  const std::vector<RankTrace> want = SplitByRank((*tables)[0].events);

  ASSERT_EQ((*reader)->StoreCount(), 1u);
  StoreSplit split;
  (*reader)->ForEachStore([&](size_t, store::NodeStoreReader& store, store::ReadProblems* p) {
    return SplitStoreByRank(store, p, &split);
  });
  ASSERT_EQ(split.ranks.size(), 3u);
  ASSERT_EQ(want.size(), 3u);
  size_t gpu = 0, launches = 0;
  for (size_t r = 0; r < want.size(); ++r) {
    EXPECT_EQ(Rows(split.ranks[r]), Rows(want[r])) << want[r].label;
    gpu += split.ranks[r].gpu.size();
    for (const CpuSpan& c : split.ranks[r].cpu) launches += c.kind == CpuKind::kRuntime;
  }
  // The planted counts: every kernel and launch, no instant, no ProfilerStep# span.
  EXPECT_EQ(gpu, kernels);
  EXPECT_EQ(launches, runtime);
  // By (rank, node when the rank is unknown): the node's own trace first.
  EXPECT_EQ(split.ranks[0].label, "host");
  EXPECT_EQ(split.ranks[1].label, "0");
  // Step, data wait, forward, aten::mm and three launches a step.
  EXPECT_EQ(split.ranks[1].cpu.size(), 40u * 7);

  // The steps from the events kept equal the run's.
  auto steps = (*reader)->Steps();
  ASSERT_TRUE(steps.ok());
  const store::StepTable got =
      store::BuildSteps(std::vector<const store::EventTable*>{&split.step_events});
  ASSERT_EQ(got.size(), 120u);
  EXPECT_EQ(got.nodes.values(), steps->nodes.values());
  EXPECT_EQ(got.rank, steps->rank);
  EXPECT_EQ(got.pid, steps->pid);
  EXPECT_EQ(got.step, steps->step);
  EXPECT_EQ(got.start_ns, steps->start_ns);
  EXPECT_EQ(got.duration_ns, steps->duration_ns);
  EXPECT_EQ(got.data_wait_ns, steps->data_wait_ns);
  EXPECT_EQ(got.forward_ns, steps->forward_ns);
  EXPECT_EQ(std::count(got.data_wait_ns.begin(), got.data_wait_ns.end(), 100 * kUs), 120);
}

// A damaged store's times may be anything: a span's end is held at the largest time rather than
// overflowing (undefined behaviour), and a negative duration ends where it starts.
TEST(RankTraceTest, SpanEndsAreHeldAtTheLargestTime) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(model::SpanEndNs(kMax - 10, 1000), kMax);
  EXPECT_EQ(model::SpanEndNs(kMax - 10, 10), kMax);
  EXPECT_EQ(model::SpanEndNs(kMax - 10, 9), kMax - 1);
  EXPECT_EQ(model::SpanEndNs(5, -7), 5);
  EXPECT_EQ(model::SpanEndNs(std::numeric_limits<int64_t>::min(), kMax), -1);
  store::EventTable t;
  t.node.push_back(t.nodes.Code("host"));
  t.name.push_back(t.names.Code("gemm"));
  t.category.push_back(t.categories.Code("kernel"));
  t.mode.push_back(t.modes.Code(""));
  t.kind.push_back(static_cast<uint8_t>(model::EventKind::kSpan));
  t.rank.push_back(0);
  t.pid.push_back(0);
  t.tid.push_back(7);
  t.step.push_back(model::kMissing);
  t.start_ns.push_back(kMax - 10);
  t.duration_ns.push_back(kMax);
  t.args.emplace_back();
  const std::vector<RankTrace> ranks = SplitByRank(t);
  ASSERT_EQ(ranks.size(), 1u);
  ASSERT_EQ(ranks[0].gpu.size(), 1u);
  EXPECT_EQ(ranks[0].gpu[0].end_ns, kMax);
}

// KeepTraceArgs keeps what ArgInt reads: on the reduced text ArgInt gives what it gives on the
// whole one, for texts with the keys absent, repeated, inside string values, negative, with
// leading zeros, spaces, too many digits or no digits, and on random texts made of those pieces.
TEST(RankTraceTest, KeepTraceArgsKeepsWhatArgIntReads) {
  const std::vector<std::string> pieces = {"{",
                                           "}",
                                           ",",
                                           " ",
                                           ":",
                                           "\"stream\"",
                                           "\"correlation\"",
                                           "\"stream\": 7",
                                           "\"correlation\": 160584",
                                           "\"correlation\":-12",
                                           "\"stream\" : 007",
                                           "\"name\": \"stream\"",
                                           "\"correlation\": \"x\"",
                                           "\"stream\": -",
                                           "\"stream\": -1",
                                           "99999999999999999999999",
                                           "\"External id\": 5",
                                           "\"Input Dims\": [[1, 2], [3]]",
                                           "\"correlation\"  ::  42"};
  std::vector<std::string> texts = {"", "{}", "{\"stream\": 7, \"correlation\": 160584}",
                                    "{\"correlation\": 99999999999999999999999}"};
  std::mt19937 rng(11);
  for (int t = 0; t < 5000; ++t) {
    std::string text;
    const int n = static_cast<int>(rng() % 8);
    for (int k = 0; k < n; ++k) text += pieces[rng() % pieces.size()];
    texts.push_back(text);
  }
  std::string kept;
  for (const std::string& text : texts) {
    KeepTraceArgs(text, &kept);
    EXPECT_EQ(ArgInt(kept, "\"stream\""), ArgInt(text, "\"stream\"")) << text;
    EXPECT_EQ(ArgInt(kept, "\"correlation\""), ArgInt(text, "\"correlation\"")) << text;
    EXPECT_LE(kept.size(), 64u);
  }
  KeepTraceArgs("{\"stream\": 7, \"correlation\": 160584, \"Input Dims\": [[1, 2]]}", &kept);
  EXPECT_EQ(kept, "\"stream\":7\"correlation\":160584");
}

// SortRuns against std::stable_sort, on the shapes a store gives (chunks in order that overlap a
// little, the steps appended after the spans) and on shapes it should not meet (reversed,
// random, all equal): the same order, equal keys included.
TEST(RankTraceTest, SortRunsEqualsStableSort) {
  struct Item {
    int64_t key;
    int index;
  };
  auto less = [](const Item& a, const Item& b) { return a.key < b.key; };
  std::mt19937_64 rng(20261203);
  auto check = [&](std::vector<int64_t> keys, const std::string& what) {
    std::vector<Item> v;
    for (size_t i = 0; i < keys.size(); ++i) v.push_back({keys[i], static_cast<int>(i)});
    std::vector<Item> want = v;
    std::stable_sort(want.begin(), want.end(), less);
    SortRuns(&v, less);
    ASSERT_EQ(v.size(), want.size()) << what;
    for (size_t i = 0; i < v.size(); ++i) {
      ASSERT_EQ(v[i].key, want[i].key) << what << " at " << i;
      ASSERT_EQ(v[i].index, want[i].index) << what << " at " << i;
    }
  };
  check({}, "empty");
  check({5}, "one");
  check({1, 2, 2, 3}, "sorted");
  check({3, 2, 1, 0, -1}, "reversed");
  check(std::vector<int64_t>(100, 7), "all equal");
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> keys;
    // Chunks in order, each starting a little before the last one ended; coarse keys make ties.
    const int chunks = 1 + static_cast<int>(rng() % 6);
    int64_t t = 0;
    for (int c = 0; c < chunks; ++c) {
      t -= static_cast<int64_t>(rng() % 20);
      const int len = static_cast<int>(rng() % 50);
      for (int i = 0; i < len; ++i) {
        t += static_cast<int64_t>(rng() % 4);
        keys.push_back(t);
      }
    }
    // Steps appended: their own ascending run over the whole range.
    const int steps = static_cast<int>(rng() % 8);
    for (int i = 0; i < steps; ++i) keys.push_back(static_cast<int64_t>(i) * (t / 8 + 1));
    check(keys, "chunks, trial " + std::to_string(trial));
    std::vector<int64_t> random(rng() % 300);
    for (int64_t& k : random) k = static_cast<int64_t>(rng() % 40);
    check(random, "random, trial " + std::to_string(trial));
  }
}

}  // namespace
}  // namespace trainprof::analyze::trace
