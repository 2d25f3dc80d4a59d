#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "base/files.h"
#include "base/test_dir.h"
#include "base/time.h"
#include "report/report_html.h"
#include "report/report_json.h"
#include "report/report_model.h"
#include "report/synthetic_run.h"
#include "report/write_reports.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace trainprof::report {
namespace {

std::string TempDir() { return MakeTestDir("trainprof_report"); }

TEST(StatsTest, PercentilesAreNearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  Stats s = ComputeStats(v);
  EXPECT_EQ(s.count, 100);
  EXPECT_EQ(*s.min, 1);
  EXPECT_EQ(*s.p50, 50);
  EXPECT_EQ(*s.p95, 95);
  EXPECT_EQ(*s.p99, 99);
  EXPECT_EQ(*s.max, 100);
  EXPECT_DOUBLE_EQ(*s.mean, 50.5);
}

TEST(StatsTest, EmptyIsAbsentNotZero) {
  std::vector<double> v = {std::nan("")};
  Stats s = ComputeStats(v);
  EXPECT_EQ(s.count, 0);
  EXPECT_FALSE(s.p50.has_value());
  EXPECT_FALSE(s.max.has_value());
}

TEST(DownsampleTest, KeepsSpikesPerBucket) {
  std::vector<int64_t> ts;
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i) {
    ts.push_back(i);
    v.push_back(i == 503 ? 99.0 : (i == 7 ? -5.0 : 1.0));
  }
  Band b = Downsample(ts.data(), v.data(), ts.size(), 0, 1000, 10);
  ASSERT_EQ(b.size(), 10u);
  EXPECT_EQ(b.max[5], 99.0);
  EXPECT_EQ(b.min[0], -5.0);
  EXPECT_EQ(b.max[4], 1.0);
  EXPECT_NEAR(b.mean[5], (99.0 + 99) / 100, 1e-9);
}

TEST(DownsampleTest, EmptyBucketsAreLeftOut) {
  std::vector<int64_t> ts = {0, 950};
  std::vector<double> v = {1, 2};
  Band b = Downsample(ts.data(), v.data(), 2, 0, 1000, 10);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b.ts_ns[1], 900);
}

TEST(HistogramTest, CountsEveryValue) {
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i) v.push_back(i % 10);
  v.push_back(1e6);  // one huge outlier lands in the last bucket, not in its own range
  std::sort(v.begin(), v.end());
  Histogram h = MakeHistogram(v, 10);
  ASSERT_EQ(h.counts.size(), 10u);
  ASSERT_EQ(h.edges.size(), 11u);
  int64_t sum = 0;
  for (auto c : h.counts) sum += c;
  EXPECT_EQ(sum, 1001);
  EXPECT_LT(h.edges.back(), 100);
}

TEST(EscapeTest, HtmlAndScript) {
  EXPECT_EQ(HtmlEscape("<script>\"a\" & 'b'</script>"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;");
  EXPECT_EQ(JsonForScript(R"({"a":"</script><b>&"})"),
            R"({"a":"\u003c/script\u003e\u003cb\u003e\u0026"})");
  EXPECT_EQ(JsonForScript("\"\xe2\x80\xa8\""), "\"\\u2028\"");
}

class ReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempDir() + "/run");
    SyntheticRunOptions o;
    o.duration_s = 1200;
    o.interval_ms = 500;
    o.cores = 8;
    o.gpus = 2;
    ASSERT_TRUE(WriteSyntheticRun(*dir_, o).ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(std::filesystem::path(*dir_).parent_path());
    delete dir_;
  }
  Report Build() {
    auto reader = store::RunReader::Open(*dir_);
    EXPECT_TRUE(reader.ok()) << reader.status().message();
    auto report = BuildReport(**reader);
    EXPECT_TRUE(report.ok()) << report.status().message();
    return std::move(*report);
  }
  static std::string* dir_;
};
std::string* ReportTest::dir_ = nullptr;

TEST_F(ReportTest, SummaryAndVerdict) {
  Report r = Build();
  EXPECT_EQ(r.summary.node_count, 1);
  EXPECT_EQ(r.summary.gpu_count, 2);
  EXPECT_EQ(*r.summary.cpu_cores, 8);
  EXPECT_EQ(*r.summary.duration_ns, 1200 * kNanosPerSecond);
  ASSERT_TRUE(r.summary.gpu_utilization_mean);
  EXPECT_GT(*r.summary.gpu_utilization_mean, 0.2);
  EXPECT_LT(*r.summary.gpu_utilization_mean, 0.9);
  EXPECT_NE(r.summary.verdict.find("GPUs were busy"), std::string::npos) << r.summary.verdict;
  EXPECT_NE(r.summary.verdict.find("data loader is the bottleneck"), std::string::npos)
      << r.summary.verdict;
  ASSERT_EQ(r.summary.top_changes.size(), 3u);
  // The critical rule first, then the strongest heuristic.
  EXPECT_EQ(r.summary.top_changes[0].source, "rule Dataloader");
  EXPECT_EQ(r.summary.top_changes[1].title, "Feed the accelerators faster");
}

TEST_F(ReportTest, PhasesSystemAndTraining) {
  Report r = Build();
  ASSERT_EQ(r.phases.size(), 6u);
  EXPECT_EQ(r.phases[0].name, "download");
  EXPECT_NEAR(*r.phases[0].share_of_run, 0.03, 1e-6);
  ASSERT_EQ(r.nodes.size(), 1u);
  const NodeUsage& n = r.nodes[0];
  EXPECT_EQ(n.metrics[0].metric, "cpu_utilization_ratio");
  EXPECT_EQ(n.metrics[0].devices.size(), 9u);  // cpu0..cpu7 and total
  EXPECT_EQ(n.metrics[0].devices[0].device, "cpu0");
  EXPECT_EQ(n.metrics[0].devices[0].band.size(), 0u);  // per core: heatmap only
  EXPECT_EQ(n.metrics[0].devices[0].stats.count, 2400);
  EXPECT_EQ(n.heatmap.rows.size(), 10u);  // 8 cores + 2 GPUs
  EXPECT_EQ(n.heatmap.rows.back(), "gpu1");
  ASSERT_EQ(r.training.modes.size(), 2u);
  EXPECT_EQ(r.training.modes[0].mode, "eval");
  EXPECT_EQ(r.training.modes[1].mode, "train");
  EXPECT_GT(r.training.modes[1].outlier_count, 0);
  ASSERT_TRUE(r.training.train_eval_ratio);
  EXPECT_GT(*r.training.train_eval_ratio, 3);
  double sum = 0;
  for (const auto& p : r.training.parts) sum += *p.share;
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_EQ(r.training.parts[0].part, "data_wait");
}

TEST_F(ReportTest, OperatorsLoaderRulesCostQuality) {
  Report r = Build();
  ASSERT_FALSE(r.operators.gpu.empty());
  EXPECT_EQ(r.operators.gpu_breakdown.size(), 4u);
  EXPECT_EQ(r.operators.gpu_breakdown[3].part, "communication");
  EXPECT_GT(*r.operators.gpu_breakdown[3].share, 0.1);
  EXPECT_EQ(*r.data_loader.workers, 2);
  EXPECT_GT(*r.data_loader.wait_share, 0.2);
  ASSERT_EQ(r.rules.rules.size(), 3u);
  const RuleResult* low = nullptr;
  for (const auto& rule : r.rules.rules) {
    if (rule.name == "LowGPUUtilization") low = &rule;
  }
  ASSERT_NE(low, nullptr);
  EXPECT_TRUE(low->triggered);
  EXPECT_FALSE(low->datapoints.has_value());
  ASSERT_EQ(low->findings.size(), 1u);
  EXPECT_EQ(low->findings[0].evidence_metric, "gpu_utilization_ratio");
  EXPECT_GT(low->findings[0].evidence.size(), 10u);
  EXPECT_FALSE(r.cost.available);
  EXPECT_NE(r.cost.note.find("not available"), std::string::npos);
  bool overruns = false;
  for (const auto& [name, v] : r.data_quality.counters) {
    if (name == "sampling_overruns") overruns = v && *v == 3;
    if (name == "parse_errors") {
      EXPECT_FALSE(v.has_value());  // not measured: n/a
    }
  }
  EXPECT_TRUE(overruns);
}

// The synthetic run plants one cProfile profile (synthetic_run.cc WritePythonProfile): steps
// 40-42, six functions with known own / cumulative times, calls and callers.
TEST_F(ReportTest, PythonFunctionsFromThePlantedProfile) {
  Report r = Build();
  const PythonFunctions& py = r.python;
  EXPECT_EQ(py.profile_count, 1);
  EXPECT_EQ(py.unreadable, 0);
  EXPECT_TRUE(py.note.empty());
  ASSERT_EQ(py.profiles.size(), 1u);
  const PythonProfile& p = py.profiles[0];
  EXPECT_EQ(p.steps, "40-42");
  EXPECT_EQ(p.node, "algo-1");
  EXPECT_EQ(p.pid, 4242);
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.functions, 6);
  auto names = [](const std::vector<PythonFunctionRow>& rows) {
    std::vector<std::string> out;
    for (const auto& f : rows) out.push_back(f.function);
    return out;
  };
  const std::string hostile = "<script>alert(\"py\")</script>";
  EXPECT_EQ(names(p.by_total), (std::vector<std::string>{"forward", "load_batch", "fib",
                                                         "train_step", "main", hostile}));
  EXPECT_EQ(names(p.by_cumulative), (std::vector<std::string>{"main", "train_step", "forward",
                                                              "load_batch", "fib", hostile}));
  const PythonFunctionRow& fib = p.by_total[2];
  EXPECT_EQ(fib.file, "util.py");
  EXPECT_EQ(fib.line, 3);
  EXPECT_EQ(fib.calls, 300);
  EXPECT_EQ(fib.primitive_calls, 30);
  EXPECT_EQ(fib.total_ns, 150 * kNanosPerMilli);
  // pstats' per-call columns: own / calls, cumulative / primitive calls.
  EXPECT_DOUBLE_EQ(*fib.total_per_call_ns, 0.5 * kNanosPerMilli);
  EXPECT_DOUBLE_EQ(*fib.cumulative_per_call_ns, 5.0 * kNanosPerMilli);
  EXPECT_EQ(fib.caller_count, 2);
  ASSERT_EQ(fib.callers.size(), 2u);
  EXPECT_EQ(fib.callers[0].function, "forward");
  EXPECT_EQ(fib.callers[0].cumulative_ns, 150 * kNanosPerMilli);
  EXPECT_EQ(fib.callers[1].function, "fib");
  EXPECT_EQ(fib.callers[1].calls, 270);
  EXPECT_EQ(fib.callers[1].primitive_calls, 0);
  const PythonFunctionRow& main_fn = p.by_cumulative[0];
  EXPECT_EQ(main_fn.cumulative_ns, 900 * kNanosPerMilli);
  EXPECT_EQ(main_fn.caller_count, 0);
  EXPECT_TRUE(main_fn.callers.empty());

  nlohmann::json j = ReportToJson(r);
  const auto& jp = j["python"]["profiles"][0];
  EXPECT_EQ(jp["steps"], "40-42");
  EXPECT_EQ(jp["by_total"][0]["function"], "forward");
  EXPECT_EQ(jp["by_total"][0]["total_ns"], 450 * kNanosPerMilli);
  EXPECT_EQ(jp["by_cumulative"][1]["callers"][0]["function"], "main");
  EXPECT_EQ(jp["by_total"][2]["cumulative_per_call_ns"], 5.0 * kNanosPerMilli);

  std::string html = RenderHtml(r);
  EXPECT_NE(html.find("<section id=\"python\"><h2>Python functions</h2>"), std::string::npos);
  EXPECT_NE(html.find("Steps 40-42 · node algo-1 · rank 0 · pid 4242"), std::string::npos);
  EXPECT_NE(html.find("<td>300/30</td><td>150.0 ms</td><td>500.0 us</td>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&quot;py&quot;)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(html.find("onerror=alert(2)>"), std::string::npos);
}

// A run in `dir` (run.json with `run_id`, started at 1e18 ns: *meta) and the writer of its one
// node, n0, for a test to fill.
auto OpenOneNodeRun(const std::string& dir, const std::string& run_id, model::RunMetadata* meta) {
  meta->run_id = run_id;
  meta->start_ns = 1'000'000'000'000'000'000;
  EXPECT_TRUE(store::WriteRunMetadata(dir, *meta).ok());
  model::NodeInfo node;
  node.node = "n0";
  return store::OpenNodeWriter(dir, node);
}

// Kineto's python_function spans (torch.profiler with_stack) are not cProfile rows; an instant
// whose args are not a cProfile row is counted, not shown; without rows the section says how
// to record a profile.
TEST(ReportPythonTest, OnlyCProfileRowsMakeProfiles) {
  std::string dir = TempDir() + "/run";
  model::RunMetadata m;
  auto w = OpenOneNodeRun(dir, "py", &m);
  ASSERT_TRUE(w.ok()) << w.status().message();
  model::Event span;
  span.name = "train.py(12): step";
  span.category = "python_function";
  span.start_ns = m.start_ns + 10;
  span.duration_ns = 1000;
  (*w)->AppendEvent(span);
  model::Event bad = span;
  bad.kind = model::EventKind::kInstant;
  bad.duration_ns = 0;
  bad.args = R"({"function": "f", "calls": "many"})";
  (*w)->AppendEvent(bad);
  ASSERT_TRUE((*w)->Close().ok());
  auto reader = store::RunReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  auto r = BuildReport(**reader);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->python.profile_count, 0);
  EXPECT_EQ(r->python.unreadable, 1);
  std::string html = RenderHtml(*r);
  EXPECT_NE(html.find("trainprof record --python-profile 10-20"), std::string::npos);
  EXPECT_EQ(html.find("Top functions by own time"), std::string::npos);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

// Four train steps and two eval steps with known parts, and the two DataLoaders the zero-code
// instrumentation annotates (dataloader.<i> = its settings as JSON): the training figures are
// the train steps', the workers the loaders' (the report said "Workers n/a", counted the eval
// steps' waits and pooled their parts with the train steps').
TEST(ReportTrainingTest, TrainingFiguresAreTheTrainStepsAndWorkersComeFromTheLoaders) {
  std::string dir = TempDir() + "/run";
  model::RunMetadata m;
  auto w = OpenOneNodeRun(dir, "modes", &m);
  ASSERT_TRUE(w.ok()) << w.status().message();
  constexpr int64_t kMs = 1'000'000;
  int64_t t = m.start_ns;
  auto step = [&](int64_t n, const char* mode, int64_t wait, int64_t fwd, int64_t bwd,
                  int64_t opt) {
    auto span = [&](const char* cat, int64_t begin, int64_t dur) {
      model::Event e;
      e.name = cat;
      e.category = cat;
      e.mode = mode;
      e.step = n;
      e.start_ns = begin;
      e.duration_ns = dur;
      e.pid = e.tid = 1;
      (*w)->AppendEvent(e);
    };
    span("step", t, (wait + fwd + bwd + opt) * kMs);
    span("data_wait", t, wait * kMs);
    span("forward", t + wait * kMs, fwd * kMs);
    if (bwd > 0) span("backward", t + (wait + fwd) * kMs, bwd * kMs);
    if (opt > 0) span("optimizer", t + (wait + fwd + bwd) * kMs, opt * kMs);
    t += (wait + fwd + bwd + opt) * kMs;
  };
  // Train steps of 10, 10, 12 and 20 ms: waits 1, 2, 3, 10 ms; forward 3, backward 4.
  step(0, "train", 1, 3, 4, 2);
  step(1, "train", 2, 3, 4, 1);
  step(2, "train", 3, 3, 4, 2);
  step(3, "train", 10, 3, 4, 3);
  step(0, "eval", 50, 10, 0, 0);
  step(1, "eval", 50, 10, 0, 0);
  (*w)->Annotate(m.start_ns, "dataloader.0", R"({"num_workers": 2, "batch_size": 8})");
  (*w)->Annotate(m.start_ns, "dataloader.1", R"({"num_workers": 0, "batch_size": 64})");
  ASSERT_TRUE((*w)->Close().ok());
  auto reader = store::RunReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  auto r = BuildReport(**reader);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->data_loader.workers, 2);
  EXPECT_EQ(r->data_loader.steps_with_wait, 4);
  EXPECT_DOUBLE_EQ(*r->data_loader.wait_ms.max, 10.0);
  EXPECT_DOUBLE_EQ(*r->data_loader.wait_ms.mean, 4.0);
  // Parts over the 52 ms of train steps: waits 16, forward 12, backward 16, optimizer 8.
  std::map<std::string, double> share;
  for (const auto& p : r->training.parts) share[p.part] = *p.share;
  EXPECT_DOUBLE_EQ(share["data_wait"], 16.0 / 52);
  EXPECT_DOUBLE_EQ(share["forward"], 12.0 / 52);
  EXPECT_DOUBLE_EQ(share["backward"], 16.0 / 52);
  EXPECT_DOUBLE_EQ(share["optimizer"], 8.0 / 52);
  EXPECT_DOUBLE_EQ(share["other"], 0.0);
  // The outlier threshold from the median of the four train steps, 11 ms (the mean of the
  // middle two), and their median absolute deviation, 1 ms: max(11 + 5 x 1.4826, 1.2 x 11).
  for (const auto& mode : r->training.modes) {
    if (mode.mode == "train") {
      EXPECT_DOUBLE_EQ(*mode.outlier_above_ms, 11 + 5 * 1.4826);
    }
  }
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST_F(ReportTest, JsonHasStableKeys) {
  nlohmann::json j = ReportToJson(Build());
  for (const char* k : {"schema_version", "summary", "phases", "system", "training", "operators",
                        "python", "data_loader", "rules", "cost", "data_quality"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_TRUE(j["cost"]["total_usd"].is_null());
  EXPECT_EQ(j["summary"]["gpus"], 2);
  EXPECT_TRUE(j["system"]["nodes"][0]["metrics"][0]["devices"][0]["stats"].contains("p99"));
}

TEST_F(ReportTest, HtmlEscapesEverythingFromTracesAndUsers) {
  std::string html = RenderHtml(Build());
  // The only <script> tags are the page's own four: the chart data, dygraphs, the shared chart
  // layer (charts.js) and the report's script.
  size_t count = 0;
  for (size_t pos = html.find("<script"); pos != std::string::npos;
       pos = html.find("<script", pos + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 4u);
  EXPECT_EQ(html.find("<img src=x"), std::string::npos);
  EXPECT_EQ(html.find("<b>bold</b>"), std::string::npos);
  EXPECT_EQ(html.find("</td></tr></table> to do"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&quot;op&quot;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("--tag=&lt;script&gt;alert(&#39;cmd&#39;)&lt;/script&gt;"),
            std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);  // nothing to fetch
  EXPECT_EQ(html.find("https://cdn"), std::string::npos);
  for (const char* id : {"summary", "phases", "system", "training", "operators", "python",
                         "data-loader", "rules", "cost", "data-quality"}) {
    EXPECT_NE(html.find(std::string("<section id=\"") + id + "\""), std::string::npos) << id;
  }
}

TEST_F(ReportTest, AChartOfManyDevicesDrawsTheBusiestEight) {
  Report r = Build();
  ASSERT_FALSE(r.nodes.empty());
  MetricUsage m{.metric = "pid_cpu_utilization_ratio", .unit = "cores", .devices = {}};
  for (int i = 0; i < 20; ++i) {
    DeviceUsage d;
    d.device = "pid" + std::to_string(1000 + i);
    d.stats = {.count = 3, .min = 0.0, .p50 = i, .p95 = i, .p99 = i, .max = i + 1.0, .mean = i};
    d.band.ts_ns = {0, 1, 2};
    d.band.min = {0, 0, 0};
    d.band.mean = {0.0 + i, 0.0 + i, 0.0 + i};
    d.band.max = {i + 1.0, i + 1.0, i + 1.0};
    m.devices.push_back(d);
  }
  r.nodes[0].metrics.push_back(m);
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("the 8 highest by mean of 20"), std::string::npos);
  // Every device keeps its table row; only the 8 busiest (pid1012..pid1019) are drawn.
  for (int i = 0; i < 20; ++i) {
    const std::string name = "pid" + std::to_string(1000 + i);
    EXPECT_NE(html.find("<td>" + name + "</td>"), std::string::npos) << name;
    const bool drawn = html.find("\"label\":\"" + name + "\"") != std::string::npos;
    EXPECT_EQ(drawn, i >= 12) << name;
  }
}

TEST_F(ReportTest, WriteReportsDefaultsIntoTheRun) {
  std::string out = TempDir();
  WriteOptions w;
  w.html_path = out + "/r.html";
  w.json_path = out + "/r.json";
  auto written = WriteReports(*dir_, w);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_TRUE(PathExists(out + "/r.html"));
  EXPECT_GT(written->html_bytes, 100000);  // the charting library is inside
  auto json = ReadFileToString(out + "/r.json");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(nlohmann::json::parse(*json)["summary"]["nodes"], 1);
  std::filesystem::remove_all(out);
}

TEST_F(ReportTest, PdfWithoutChromiumSaysHowToGetIt) {
  std::string out = TempDir();
  WriteOptions w;
  w.html_path = out + "/r.html";
  w.write_json = false;
  w.pdf_path = out + "/r.pdf";
  w.chromium = "/nonexistent/chromium";
  auto written = WriteReports(*dir_, w);
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.status().message().find("chromium not found"), std::string::npos);
  std::filesystem::remove_all(out);
}

// Issue 20, 1 and 6: the report (it shows the command line) is written 0600, never through a
// link planted at its temporary name, and not into a run directory another user controls.
TEST_F(ReportTest, ReportFilesArePrivateAndNotWrittenThroughPlantedLinks) {
  std::string out = TempDir();
  std::string victim = out + "/victim";
  ASSERT_TRUE(WriteFileAtomically(victim, "root only", 0600).ok());
  ASSERT_EQ(symlink(victim.c_str(), (out + "/r.json.tmp." + std::to_string(getpid())).c_str()), 0);
  WriteOptions w;
  w.html_path = out + "/r.html";
  w.json_path = out + "/r.json";
  ASSERT_TRUE(WriteReports(*dir_, w).ok());
  EXPECT_EQ(*ReadFileToString(victim), "root only");
  for (const char* name : {"/r.html", "/r.json"}) {
    struct stat st {};
    ASSERT_EQ(stat((out + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u) << name;
  }
  // Into the run directory itself, when every user may write it: refused, nothing written.
  ASSERT_EQ(chmod(dir_->c_str(), 0777), 0);
  auto written = WriteReports(*dir_, WriteOptions{});
  ASSERT_EQ(chmod(dir_->c_str(), 0755), 0);
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.status().message().find("writable by every user"), std::string::npos)
      << written.status().message();
  EXPECT_FALSE(PathExists(*dir_ + "/report.json"));
  std::filesystem::remove_all(out);
}

TEST(ReportMissingTest, EmptyRunShowsNotAvailable) {
  std::string dir = TempDir() + "/run";
  model::RunMetadata m;
  m.run_id = "empty";
  m.name = "empty";
  m.start_ns = 1'000'000'000'000'000'000;
  ASSERT_TRUE(store::WriteRunMetadata(dir, m).ok());
  auto reader = store::RunReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  auto r = BuildReport(**reader);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->summary.gpu_utilization_mean.has_value());
  EXPECT_TRUE(r->training.modes.empty());
  std::string html = RenderHtml(*r);
  EXPECT_NE(html.find("No GPU utilisation was measured"), std::string::npos);
  EXPECT_NE(html.find("n/a: the run holds no step spans"), std::string::npos);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

}  // namespace
}  // namespace trainprof::report
