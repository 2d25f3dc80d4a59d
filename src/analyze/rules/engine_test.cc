// The engine: live (many small feeds) equals offline (one feed); configuration and parameter
// checks; rules added from outside through the registry.

#include "analyze/rules/engine.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "analyze/rules/live.h"
#include "analyze/rules/registry.h"
#include "analyze/rules/rules_test_util.h"

namespace trainprof::analyze::rules {
namespace {

using namespace testing;  // NOLINT

store::MetricTable SliceMetrics(const store::MetricTable& t, size_t begin, size_t end) {
  store::MetricTable out;
  for (size_t i = begin; i < end; ++i) {
    out.node.push_back(out.nodes.Code(t.nodes.at(t.node[i])));
    out.metric.push_back(out.metrics.Code(t.metrics.at(t.metric[i])));
    out.device.push_back(out.devices.Code(t.devices.at(t.device[i])));
    out.timestamp_ns.push_back(t.timestamp_ns[i]);
    out.value.push_back(t.value[i]);
  }
  return out;
}

store::StepTable SliceSteps(const store::StepTable& t, const std::vector<size_t>& rows) {
  store::StepTable out;
  for (size_t i : rows) {
    out.node.push_back(out.nodes.Code(t.nodes.at(t.node[i])));
    out.mode.push_back(out.modes.Code(t.modes.at(t.mode[i])));
    out.rank.push_back(t.rank[i]);
    out.pid.push_back(t.pid[i]);
    out.step.push_back(t.step[i]);
    out.start_ns.push_back(t.start_ns[i]);
    out.duration_ns.push_back(t.duration_ns[i]);
    out.data_wait_ns.push_back(t.data_wait_ns[i]);
    out.forward_ns.push_back(t.forward_ns[i]);
    out.backward_ns.push_back(t.backward_ns[i]);
    out.optimizer_ns.push_back(t.optimizer_ns[i]);
  }
  return out;
}

store::EventTable SliceEvents(const store::EventTable& t, const std::vector<size_t>& rows) {
  store::EventTable out;
  for (size_t i : rows) {
    out.node.push_back(out.nodes.Code(t.nodes.at(t.node[i])));
    out.name.push_back(out.names.Code(t.names.at(t.name[i])));
    out.category.push_back(out.categories.Code(t.categories.at(t.category[i])));
    out.mode.push_back(out.modes.Code(t.modes.at(t.mode[i])));
    out.kind.push_back(t.kind[i]);
    out.rank.push_back(t.rank[i]);
    out.pid.push_back(t.pid[i]);
    out.tid.push_back(t.tid[i]);
    out.step.push_back(t.step[i]);
    out.start_ns.push_back(t.start_ns[i]);
    out.duration_ns.push_back(t.duration_ns[i]);
    out.args.push_back(t.args[i]);
  }
  return out;
}

// Two nodes, 25 minutes, with a problem for most rules: idle GPUs, a saturated core, a GPU
// memory climb, an RSS leak, throttling, data-loading stalls, a straggler, heavy collectives,
// a checkpoint pause, step outliers and data-loader worker events; with series no rule reads
// (GPU power, a process's own memory), optionally running on past the rest (`extra_tail_s`).
std::string RichRun(int64_t extra_tail_s = 0) {
  Scenario s("rich");
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-0.03, 0.03);
  int64_t i = 0;
  for (const char* node : {"algo-1", "algo-2"}) {
    i = 0;
    s.System(node, 1500, 500, 8, 4, [&](Scenario::Tick& t) {
      for (size_t g = 0; g < t.gpu.size(); ++g)
        t.gpu[g] = std::max(0.0, (g == 1 ? 0.07 : 0.45) + u(rng));
      t.core[0] = 0.97;
      t.gpu_mem[2] = (i < 1500 ? 0.3 : std::min(0.9, 0.3 + 0.01 * static_cast<double>(i - 1500)));
      t.rss_bytes = 3e9 + 1e9 * t.seconds / 600;
      t.throttled = t.seconds > 900 ? 0.3 : 0.0;
      t.iowait = 0.02;
      ++i;
    });
  }
  for (int64_t t = 0; t < (1500 + extra_tail_s) * 1000; t += 500) {
    for (int g = 0; g < 4; ++g) {
      s.Value("algo-1", "gpu_power_watts", "gpu" + std::to_string(g), kStart + t * kMs,
              300 + static_cast<double>((t / 500 + g) % 50));
    }
    s.Value("algo-2", "process_resident_memory_bytes", "pid 7", kStart + t * kMs + 130 * kMs,
            1e9 + static_cast<double>(t) * 1e6);
  }
  for (int64_t rank = 0; rank < 4; ++rank) {
    const char* node = rank < 2 ? "algo-1" : "algo-2";
    int64_t t = kStart + 60 * kSec;
    for (int64_t step = 0; t < kStart + 1490 * kSec; ++step) {
      int64_t wait = step > 3000 ? 90 * kMs : 6 * kMs;
      int64_t compute = (200 + (step * 7919 + rank) % 9 - 4) * kMs;
      if (rank == 3) compute = compute * 13 / 10;
      if (step % 400 == 399) compute = 1500 * kMs;
      if (step == 2000) {
        s.Span(node, "phase", "checkpoint", t, 90 * kSec, rank, 1000 + rank);
        t += 95 * kSec;
      }
      s.Step(node, rank, step, t, wait, compute * 3 / 10, compute * 6 / 10, compute / 10);
      s.Span(node, "collective", "all_reduce", t + wait + compute * 4 / 10, compute / 2, rank,
             1000 + rank);
      t += wait + compute + 10 * kMs;
    }
  }
  for (int sec = 60; sec < 1490; ++sec) {
    for (int w = 0; w < 2; ++w) {
      s.Span("algo-1", "dataloader", "fetch", kStart + sec * kSec + w * 3 * kMs, 200 * kMs, 0,
             3000 + w);
    }
  }
  s.Span("algo-1", "phase", "initialization", kStart, 60 * kSec);
  return s.Finish();
}

struct Tables {
  store::MetricTable metrics;
  store::StepTable steps;
  store::EventTable events;
  model::RunMetadata meta;
  std::vector<model::NodeInfo> infos;
};

Tables Read(const std::string& dir) {
  auto reader = store::RunReader::Open(dir);
  TP_CHECK(reader.ok());
  Tables t;
  t.metrics = std::move((*reader)->SystemMetrics({})).value();
  t.steps = std::move((*reader)->Steps()).value();
  store::EventQuery q;
  q.categories = {"phase", "collective", "dataloader"};
  t.events = std::move((*reader)->Events(q)).value();
  t.meta = (*reader)->metadata();
  for (const auto* info : (*reader)->node_infos()) t.infos.push_back(*info);
  return t;
}

// Feeds the run as a live recorder would: every `slice_ns` of time, what became known in it.
std::string LiveJson(const Tables& t, int64_t slice_ns, const EngineOptions& options,
                     std::vector<model::Finding>* live_findings) {
  RuleConfig config;
  auto engine = RuleEngine::Create(config, t.meta, options);
  TP_CHECK(engine.ok());
  for (const auto& info : t.infos) (*engine)->SetNodeInfo(info);
  // Metric rows in time order (a sampler appends each tick's values together).
  std::vector<size_t> order(t.metrics.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return t.metrics.timestamp_ns[a] < t.metrics.timestamp_ns[b];
  });
  store::MetricTable sorted_metrics;
  {
    store::MetricTable tmp;
    for (size_t i : order) {
      tmp.node.push_back(tmp.nodes.Code(t.metrics.nodes.at(t.metrics.node[i])));
      tmp.metric.push_back(tmp.metrics.Code(t.metrics.metrics.at(t.metrics.metric[i])));
      tmp.device.push_back(tmp.devices.Code(t.metrics.devices.at(t.metrics.device[i])));
      tmp.timestamp_ns.push_back(t.metrics.timestamp_ns[i]);
      tmp.value.push_back(t.metrics.value[i]);
    }
    sorted_metrics = std::move(tmp);
  }
  size_t m = 0;
  for (int64_t now = kStart; now < kStart + 1600 * kSec; now += slice_ns) {
    size_t m_end = m;
    while (m_end < sorted_metrics.size() && sorted_metrics.timestamp_ns[m_end] < now + slice_ns)
      ++m_end;
    (*engine)->Feed(SliceMetrics(sorted_metrics, m, m_end));
    m = m_end;
    std::vector<size_t> steps, events;
    for (size_t i = 0; i < t.steps.size(); ++i) {
      const int64_t end = t.steps.start_ns[i] + t.steps.duration_ns[i];
      if (end >= now && end < now + slice_ns) steps.push_back(i);
    }
    for (size_t i = 0; i < t.events.size(); ++i) {
      const int64_t end = t.events.start_ns[i] + t.events.duration_ns[i];
      if (end >= now && end < now + slice_ns) events.push_back(i);
    }
    (*engine)->Feed(SliceEvents(t.events, events));
    (*engine)->Feed(SliceSteps(t.steps, steps));
    for (auto& f : (*engine)->TakeNewFindings()) live_findings->push_back(std::move(f));
  }
  (*engine)->Finalize();
  for (auto& f : (*engine)->TakeNewFindings()) live_findings->push_back(std::move(f));
  EXPECT_EQ((*engine)->stats().late_items, 0);
  return ResultsToJson((*engine)->Results()).dump(1);
}

TEST(EngineTest, LiveFeedingInSmallIncrementsEqualsOfflineEvaluation) {
  const std::string dir = RichRun();
  auto reader = store::RunReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  auto offline = EvaluateRun(**reader, RuleConfig{});
  ASSERT_TRUE(offline.ok()) << offline.status().message();
  const auto offline_results = (*offline)->Results();
  const std::string offline_json = ResultsToJson(offline_results).dump(1);

  // Most rules have something to say about this run: the comparison is not between empties.
  int triggered = 0;
  for (const auto& r : offline_results) triggered += r.triggered ? 1 : 0;
  EXPECT_GE(triggered, 10) << offline_json.substr(0, 4000);

  const Tables t = Read(dir);
  for (int64_t slice_ms : {500, 1300, 7000}) {
    for (int64_t lag_s : {2, 10}) {
      // The lag must cover how far apart in time the sources are fed (here: one slice).
      if (lag_s * 1000 <= slice_ms) continue;
      EngineOptions options;
      options.release_lag_ns = lag_s * kSec;
      std::vector<model::Finding> live_findings;
      const std::string live_json = LiveJson(t, slice_ms * kMs, options, &live_findings);
      EXPECT_EQ(live_json, offline_json) << "slice " << slice_ms << " ms, lag " << lag_s << " s";
      // Every finding was handed out live, once.
      size_t total = 0;
      for (const auto& r : offline_results) total += r.findings.size();
      EXPECT_EQ(live_findings.size(), total);
    }
  }
}

TEST(EngineTest, SeriesNoRuleReadsAreNeitherReadNorKept) {
  // The built-in rules read the metrics MetricsRead() names; the engine keeps no other series,
  // so reading only those (as `rules` and the live polls do) changes no result, not even when
  // the other series run on for 5 minutes past the rest.
  auto read_all = [](const std::string& dir) {
    const Tables t = Read(dir);
    EngineOptions offline;  // as EvaluateRun: everything held until Finalize
    offline.release_lag_ns = std::numeric_limits<int64_t>::max() / 4;
    auto engine = RuleEngine::Create(RuleConfig{}, t.meta, offline);
    EXPECT_TRUE(engine.ok());
    for (const auto& info : t.infos) (*engine)->SetNodeInfo(info);
    (*engine)->Feed(t.metrics);
    (*engine)->Feed(t.steps);
    (*engine)->Feed(t.events);
    (*engine)->Finalize();
    return std::make_pair(ResultsToJson((*engine)->Results()).dump(1), (*engine)->stats());
  };
  const std::string dir = RichRun();
  auto reader = store::RunReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  auto selected = EvaluateRun(**reader, RuleConfig{});
  ASSERT_TRUE(selected.ok());
  const std::string selected_json = ResultsToJson((*selected)->Results()).dump(1);
  const auto [all_json, all_stats] = read_all(dir);
  EXPECT_EQ(all_json, selected_json);
  EXPECT_EQ(all_stats.values_fed, (*selected)->stats().values_fed);
  EXPECT_EQ(read_all(RichRun(/*extra_tail_s=*/300)).first, all_json);

  const std::vector<std::string> read = (*selected)->MetricsRead();
  for (const char* m : {"cpu_utilization_ratio", "gpu_utilization_ratio", "gpu_memory_used_ratio",
                        "memory_used_bytes", "process_resident_memory_bytes"}) {
    EXPECT_NE(std::find(read.begin(), read.end(), m), read.end()) << m;
  }
  EXPECT_EQ(std::find(read.begin(), read.end(), "gpu_power_watts"), read.end());
}

TEST(EngineTest, FindingsAreHandedOutAsTheyHappen) {
  const Tables t = Read(RichRun());
  std::vector<model::Finding> live;
  EngineOptions options;
  LiveJson(t, 1000 * kMs, options, &live);
  // Findings come out in time order of the data that made them fire (within a lag window),
  // most of them long before the end.
  int before_end = 0;
  for (const auto& f : live) before_end += f.end_ns < kStart + 1400 * kSec ? 1 : 0;
  EXPECT_GT(before_end, 5);
}

// A run being recorded (run.json and node algo-1 of 8 cores) and a live evaluator on it; Span
// appends one train-mode event of process 4321 to its store.
struct LiveRun {
  std::string dir;
  std::unique_ptr<store::NodeStoreWriter> writer;
  std::unique_ptr<LiveEvaluator> live;

  static LiveRun Start(const std::string& name, const RuleConfig& config) {
    LiveRun r;
    r.dir = TempDir(name);
    model::RunMetadata meta;
    meta.run_id = name;
    meta.start_ns = kStart;
    TP_CHECK(store::WriteRunMetadata(r.dir, meta).ok());
    model::NodeInfo info;
    info.node = "algo-1";
    info.cpu_cores = 8;
    auto writer = store::OpenNodeWriter(r.dir, info);
    TP_CHECK(writer.ok());
    r.writer = std::move(*writer);
    auto live = LiveEvaluator::Open(r.dir, config);
    TP_CHECK(live.ok());
    r.live = std::move(*live);
    return r;
  }
  void Span(const char* category, int64_t step, int64_t start, int64_t duration) {
    model::Event e;
    e.name = category;
    e.category = category;
    e.mode = "train";
    e.step = step;
    e.start_ns = start;
    e.duration_ns = duration;
    e.pid = e.tid = 4321;
    e.rank = 0;
    writer->AppendEvent(std::move(e));
  }
};

TEST(LiveEvaluatorTest, StepPartsFlushedBeforeTheirStepStillCount) {
  // The recorder writes a step's parts as they end, and its span after them: a flush (and a
  // live poll) can fall in between. The live evaluator must join them as the offline one does.
  LiveRun run = LiveRun::Start("live_parts", RuleConfig{});
  const std::string& dir = run.dir;
  auto& writer = run.writer;
  auto& live = run.live;
  auto span = [&](const char* category, int64_t step, int64_t start, int64_t duration) {
    run.Span(category, step, start, duration);
  };
  for (int64_t s = 0; s < 200; ++s) {
    const int64_t t = kStart + s * 100 * kMs;
    span("data_wait", s, t, 60 * kMs);  // the loop waits 60 % of each step
    span("forward", s, t + 60 * kMs, 15 * kMs);
    span("backward", s, t + 75 * kMs, 25 * kMs);
    ASSERT_TRUE(writer->Flush().ok());
    ASSERT_TRUE(live->Poll().ok());
    span("step", s, t, 100 * kMs);
    if (s % 7 == 0) {
      ASSERT_TRUE(writer->Flush().ok());
      ASSERT_TRUE(live->Poll().ok());
    }
  }
  ASSERT_TRUE(writer->Close().ok());
  ASSERT_TRUE(live->Finish().ok());
  EXPECT_EQ(live->stats().steps_read, 200);

  auto reader = store::RunReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  auto offline = EvaluateRun(**reader, RuleConfig{});
  ASSERT_TRUE(offline.ok());
  const auto offline_results = (*offline)->Results();
  bool starved = false;
  for (const auto& r : offline_results) starved |= r.name == "DataLoaderStarvation" && r.triggered;
  EXPECT_TRUE(starved);
  EXPECT_EQ(ResultsToJson(live->engine().Results()).dump(1),
            ResultsToJson(offline_results).dump(1));
}

TEST(LiveEvaluatorTest, AFirstStepLongerThanTheInitialisationLimitIsNoSlowStart) {
  // The first step begins 10 s into the job and ends 90 s later; MaxInitializationTime's limit
  // is 1 minute. Its parts, written as they end, tell the live rules that it began: no finding
  // live or offline, and the same results both ways.
  RuleConfig config;
  config.rules = {"MaxInitializationTime"};
  ASSERT_TRUE(ApplyParamOverride("MaxInitializationTime.threshold=1", &config).ok());
  LiveRun run = LiveRun::Start("live_first_step", config);
  const std::string& dir = run.dir;
  auto& writer = run.writer;
  auto& live = run.live;
  auto span = [&](const char* category, int64_t start, int64_t duration) {
    run.Span(category, 0, start, duration);
  };
  const store::SeriesId cpu = writer->Series("cpu_utilization_ratio", "total");
  std::vector<model::Finding> live_findings;
  for (int64_t second = 0; second <= 150; ++second) {
    const int64_t t = kStart + second * kSec;
    writer->Append(cpu, t, 0.5);
    if (second == 12) span("data_wait", kStart + 10 * kSec, 2 * kSec);
    if (second == 30) span("forward", kStart + 12 * kSec, 18 * kSec);
    if (second == 100) span("step", kStart + 10 * kSec, 90 * kSec);
    ASSERT_TRUE(writer->Flush().ok());
    auto found = live->Poll();
    ASSERT_TRUE(found.ok());
    live_findings.insert(live_findings.end(), found->begin(), found->end());
  }
  ASSERT_TRUE(writer->Close().ok());
  auto rest = live->Finish();
  ASSERT_TRUE(rest.ok());
  live_findings.insert(live_findings.end(), rest->begin(), rest->end());
  EXPECT_TRUE(live_findings.empty()) << live_findings.front().message;
  auto reader = store::RunReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  auto offline = EvaluateRun(**reader, config);
  ASSERT_TRUE(offline.ok());
  const auto results = (*offline)->Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].triggered);
  EXPECT_EQ(results[0].details["first_step_ns"], kStart + 10 * kSec);
  EXPECT_EQ(ResultsToJson(live->engine().Results()).dump(1), ResultsToJson(results).dump(1));
}

TEST(EngineTest, UnknownRulesParametersAndActionsAreUsageErrors) {
  model::RunMetadata meta;
  RuleConfig config;
  config.rules = {"NoSuchRule"};
  auto e1 = RuleEngine::Create(config, meta);
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.status().message().find("NoSuchRule"), std::string::npos);

  RuleConfig bad_param;
  ASSERT_TRUE(ApplyParamOverride("LowGPUUtilization.threshold_p99=3", &bad_param).ok());
  auto e2 = RuleEngine::Create(bad_param, meta);
  ASSERT_FALSE(e2.ok());
  EXPECT_EQ(e2.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e2.status().message().find("threshold_p95"), std::string::npos);  // lists the real ones

  RuleConfig bad_type;
  ASSERT_TRUE(ApplyParamOverride("StepOutlier.stddev=lots", &bad_type).ok());
  EXPECT_FALSE(RuleEngine::Create(bad_type, meta).ok());

  EXPECT_FALSE(ApplyParamOverride("StepOutlier=3", &bad_type).ok());
  EXPECT_FALSE(ApplyParamOverride(".x=3", &bad_type).ok());

  auto cfg =
      ParseRuleConfig(R"({"rules": {"StepOutlier": {"actions": [{"type": "stop"}]}}})", "c.json");
  ASSERT_TRUE(cfg.ok());
  cfg->rules = {"CPUBottleneck"};
  EXPECT_FALSE(RuleEngine::Create(*cfg, meta).ok());  // actions for a rule not evaluated
}

TEST(EngineTest, HugeParametersSaturateInsteadOfOverflowing) {
  // Every numeric parameter of every built-in rule at 1e300: the rules are built and run, and a
  // time in seconds is held below the int64 limit when turned into nanoseconds (no overflow).
  RuleConfig config;
  for (const RuleSpec& spec : RuleRegistry::Global().Specs()) {
    config.rules.push_back(spec.name);
    for (const ParamSpec& p : spec.params) {
      if (p.default_value.is_number()) config.parameters[spec.name][p.name] = 1e300;
    }
  }
  auto engine = RuleEngine::Create(config, model::RunMetadata{});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  EXPECT_EQ((*engine)->Results().size(), config.rules.size());

  Params p(nlohmann::json{{"a_s", 1e300}, {"b_s", 2.5}, {"n", 1e30}});
  EXPECT_EQ(p.Nanoseconds("a_s"), 9'000'000'000'000'000'000);
  EXPECT_EQ(p.Nanoseconds("b_s"), 2'500'000'000);
  EXPECT_EQ(p.Integer("n"), 9'000'000'000'000'000'000);

  auto too_long = ParseRuleConfig(
      R"({"rules": {"StepOutlier": {"actions": [{"type": "stop", "grace_s": 1e300}]}}})", "c.json");
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("grace_s"), std::string::npos);
}

TEST(EngineTest, ConfigFileSelectsRulesParametersAndActions) {
  auto cfg = ParseRuleConfig(R"({"rules": {
      "StepOutlier": {"parameters": {"stddev": 2, "mode": "train"},
                      "actions": [{"type": "webhook", "url": "http://127.0.0.1:9/x"},
                                  {"type": "command", "command": "cat > /dev/null"},
                                  {"type": "stop", "grace_s": 1.5}]},
      "LowGPUUtilization": {}}})",
                             "c.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  EXPECT_EQ(cfg->rules.size(), 2u);
  ASSERT_EQ(cfg->actions["StepOutlier"].size(), 3u);
  EXPECT_EQ(cfg->actions["StepOutlier"][1].command.size(), 3u);  // /bin/sh -c ...
  EXPECT_EQ(cfg->actions["StepOutlier"][2].grace_ns, 1'500'000'000);
  auto engine = RuleEngine::Create(*cfg, model::RunMetadata{});
  ASSERT_TRUE(engine.ok());
  auto results = (*engine)->Results();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].name, "StepOutlier");
  EXPECT_EQ(results[1].parameters["stddev"], 2);
  EXPECT_EQ(results[1].parameters["n_outliers"], 10);  // default kept

  EXPECT_FALSE(ParseRuleConfig("{", "c.json").ok());
  EXPECT_FALSE(
      ParseRuleConfig(R"({"rules": {"X": {"actions": [{"type": "email"}]}}})", "c.json").ok());
  EXPECT_FALSE(ParseRuleConfig(R"({"rules": {"X": {"params": {}}}})", "c.json").ok());
}

TEST(EngineTest, CustomRuleEntriesLeaveTheConfigForTheRunner) {
  auto cfg = ParseRuleConfig(R"({"rules": {
      "StepOutlier": {"parameters": {"stddev": 2}},
      "LongDataWaits": {"parameters": {"min_waits": 15, "label": "x"},
                        "actions": [{"type": "stop"}]},
      "OnlyActions": {"actions": [{"type": "log"}]}}})",
                             "c.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  CustomRuleEntries custom = TakeCustomRules(&*cfg);
  EXPECT_EQ(custom.names, (std::vector<std::string>{"LongDataWaits", "OnlyActions"}));
  EXPECT_EQ(custom.overrides,
            (std::vector<std::string>{"LongDataWaits.label=x", "LongDataWaits.min_waits=15"}));
  EXPECT_EQ(custom.actions["LongDataWaits"].size(), 1u);
  EXPECT_EQ(cfg->rules, (std::vector<std::string>{"StepOutlier"}));
  EXPECT_FALSE(cfg->no_builtin);
  EXPECT_EQ(cfg->parameters.size(), 1u);
  EXPECT_TRUE(cfg->actions.empty());
  EXPECT_TRUE(RuleEngine::Create(*cfg, model::RunMetadata{}).ok());

  // Listing only custom rules selects no built-in one (not ProfilerReport).
  auto only = ParseRuleConfig(R"({"rules": {"LongDataWaits": {}}})", "c.json");
  ASSERT_TRUE(only.ok());
  TakeCustomRules(&*only);
  EXPECT_TRUE(only->no_builtin);
  auto engine = RuleEngine::Create(*only, model::RunMetadata{});
  ASSERT_TRUE(engine.ok());
  EXPECT_TRUE((*engine)->Results().empty());
}

// A rule added from outside the library: counts eval steps and fires on the first.
class EvalSeen : public Rule {
 public:
  using Rule::Rule;
  void OnStep(const StepRow& s) override {
    ++result().datapoints;
    if (s.mode == params().Text("mode") && !result().triggered) {
      model::Finding f;
      f.node = ctx().NodeName(s.node);
      f.start_ns = s.start_ns;
      f.end_ns = s.end_ns();
      f.message = "saw a step of mode " + s.mode;
      Emit(std::move(f));
    }
  }
};

TEST(EngineTest, CustomRulesRegisterAndRunLikeBuiltins) {
  RuleRegistry registry;
  RuleSpec spec{"EvalSeen", "test rule", false, {{"mode", "eval", "mode to look for"}}};
  ASSERT_TRUE(registry
                  .Register(spec,
                            [](const RuleSpec& s, Params p) -> std::unique_ptr<Rule> {
                              return std::make_unique<EvalSeen>(s, std::move(p));
                            })
                  .ok());
  EXPECT_FALSE(registry.Register(spec, nullptr).ok());  // names are unique
  Scenario s("custom");
  s.Step("n0", 0, 0, kStart, 0, kMs, kMs, kMs, "train");
  s.Step("n0", 0, 1, kStart + kSec, 0, kMs, kMs, kMs, "eval");
  const Tables t = Read(s.Finish());
  RuleConfig config;
  config.rules = {"EvalSeen"};
  auto engine = RuleEngine::Create(config, t.meta, {}, &registry);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  EXPECT_TRUE((*engine)->MetricsRead().empty());  // a rule not built in may read any metric
  (*engine)->Feed(t.steps);
  (*engine)->Finalize();
  auto results = (*engine)->Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].triggered);
  EXPECT_EQ(results[0].datapoints, 2);
  EXPECT_EQ(results[0].findings[0].rule, "EvalSeen");
}

TEST(EngineTest, ResultsJsonFollowsTheContract) {
  Scenario s("json");
  s.Steps("n0", 0, kStart, kStart + 300 * kSec, [](int64_t, int64_t* wait, int64_t* c, int64_t*) {
    *wait = 100 * kMs;
    *c = 100 * kMs;
  });
  auto j = ResultsToJson(Evaluate(s.Finish(), {"DataLoaderStarvation"}));
  ASSERT_EQ(j["rules"].size(), 1u);
  const auto& r = j["rules"][0];
  for (const char* key :
       {"name", "triggered", "violations", "datapoints", "parameters", "findings"}) {
    EXPECT_TRUE(r.contains(key)) << key;
  }
  ASSERT_FALSE(r["findings"].empty());
  for (const char* key : {"severity", "node", "device", "start_ns", "end_ns", "message",
                          "recommendation", "evidence"}) {
    EXPECT_TRUE(r["findings"][0].contains(key)) << key;
  }
  EXPECT_TRUE(r["findings"][0]["evidence"].is_object());
  EXPECT_EQ(r["findings"][0]["severity"], "warning");
}

}  // namespace
}  // namespace trainprof::analyze::rules
