// Tests of `export chrome-trace` and `export smdebug`: a run written through the store writer
// (two nodes, ranks, args with characters that need escaping, an instant, findings) and real
// SageMaker Debugger data (../shared/data/smdebug) are exported, then parsed back with
// nlohmann::json and re-imported with our own importers, and compared with what the store holds.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "base/files.h"
#include "base/test_dir.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/export_writer.h"
#include "importers/kineto/kineto_importer.h"
#include "importers/smdebug/smdebug_importer.h"
#include "model/event.h"
#include "model/finding.h"
#include "model/run_metadata.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace trainprof::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string TempDir() { return MakeTestDir("trainprof_export_test"); }

std::string Gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr);
  std::string out;
  char buf[65536];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(n, 0);
  gzclose(f);
  return out;
}

constexpr int64_t kStart = 1764541200'000'000'000LL + 123'456'789;  // 2025-11-30T22:20:00.123Z
const std::string kTricky =
    std::string("quote \" backslash \\ newline \n tab \t ctrl \x01 del \x7f é ✓ bad \xff end");

// Two nodes: host-a with ranks 0 and 1 (steps, phases, an instant, args that need escaping),
// host-b without ranks; 150 s of metrics at 1 s (three UTC minutes), mapped and unmapped; two
// findings.
std::string WriteFixtureRun(const std::string& dir) {
  std::string run = dir + "/run";
  model::RunMetadata m;
  m.name = "export-fixture";
  m.run_id = model::NewRunId(m.name, kStart);
  m.start_ns = kStart;
  m.end_ns = kStart + 150 * 1'000'000'000LL;
  m.exit_status = 0;
  m.source = "test";
  EXPECT_TRUE(store::WriteRunMetadata(run, m).ok());
  for (const std::string node_name : {"host-a", "host-b"}) {
    model::NodeInfo node;
    node.node = node_name;
    auto w = store::OpenNodeWriter(run, node);
    EXPECT_TRUE(w.ok());
    auto& writer = *w;
    std::vector<std::pair<store::SeriesId, double>> series = {
        {writer->Series("cpu_utilization_ratio", "cpu0"), 0.25},
        {writer->Series("cpu_utilization_ratio", "cpu1"), 0.5},
        {writer->Series("cpu_utilization_ratio", "total"), 0.375},
        {writer->Series("cpu_iowait_ratio", "cpu0"), 0.0123},
        {writer->Series("gpu_utilization_ratio", "gpu0"), 0.9},
        {writer->Series("gpu_memory_used_ratio", "gpu0"), 0.4567},
        {writer->Series("memory_used_bytes", ""), 12e9},
    };
    for (int t = 0; t < 150; ++t) {
      for (auto& [id, v] : series) {
        writer->Append(id, kStart + t * 1'000'000'000LL + 7, v + (v < 1 ? t * 1e-4 : t));
      }
    }
    std::vector<int64_t> ranks =
        node_name == "host-a" ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{model::kMissing};
    for (int64_t rank : ranks) {
      for (int s = 0; s < 5; ++s) {
        int64_t begin = kStart + 2'000'000'000LL + s * 300'000'001LL + (rank == 1 ? 17 : 0);
        auto span = [&](const std::string& name, const std::string& cat, int64_t at, int64_t dur,
                        const std::string& args) {
          model::Event e;
          e.name = name;
          e.category = cat;
          e.mode = "train";
          e.step = s;
          e.rank = rank;
          e.pid = 4000 + (rank == model::kMissing ? 9 : rank);
          e.tid = 4100;
          e.start_ns = at;
          e.duration_ns = dur;
          e.args = args;
          writer->AppendEvent(std::move(e));
        };
        span("step", "step", begin, 250'000'123, "");
        json args = {{"note", kTricky.substr(0, kTricky.find("\xff"))}, {"step", 99}, {"n", s}};
        span("forward", "forward", begin + 10, 100'000'001, args.dump());
        span("loader \"next\"", "data_wait", begin + 100'000'100, 5'000'000, "not json");
      }
    }
    model::Event mark;
    mark.kind = model::EventKind::kInstant;
    mark.name = kTricky;
    mark.category = "mark";
    mark.start_ns = kStart + 1'500'000'001;
    writer->AppendEvent(std::move(mark));
    model::Finding f;
    f.rule = "LowGPUUtilization";
    f.node = node_name;
    f.device = "gpu0";
    f.start_ns = kStart + 10'000'000'000LL;
    f.end_ns = kStart + 70'000'000'000LL;
    f.message = "GPU 0 busy 31 % of the time \"low\"";
    f.recommendation = "check the data loader";
    f.evidence_json = R"({"p95":0.31})";
    if (node_name == "host-b") f.end_ns = f.start_ns;  // a point-in-time finding
    writer->AddFinding(f);
    EXPECT_TRUE(writer->Close().ok());
  }
  return run;
}

TEST(ExportWriterTest, NumbersAndStrings) {
  std::string s;
  AppendMicros(1'234'567, &s);
  EXPECT_EQ(s, "1234.567");
  s.clear();
  AppendMicros(-1500, &s);
  EXPECT_EQ(s, "-1.500");
  s.clear();
  AppendMicros(1764541200'123'456'789LL, &s);
  EXPECT_EQ(s, "1764541200123456.789");
  s.clear();
  AppendSeconds(1591160699'457'089'400LL, &s);
  EXPECT_EQ(s, "1591160699.457089400");
  s.clear();
  AppendDouble(0.1, &s);
  EXPECT_EQ(s, "0.1");
  s.clear();
  AppendJsonString(kTricky, &s);
  json j = json::parse(s);  // throws on invalid JSON or invalid UTF-8
  std::string expected = kTricky;
  expected.replace(expected.find("\xff"), 1, "\xEF\xBF\xBD");
  EXPECT_EQ(j.get<std::string>(), expected);
  s.clear();
  AppendJsonString(std::string("a\0b\xe0\x80\x80\xed\xa0\x80", 9), &s);  // NUL, overlong, surrogate
  EXPECT_EQ(json::parse(s).get<std::string>(),
            std::string("a\0b", 3) + "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" +
                "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(ExportChromeTraceTest, StructureCountsValuesAndGzip) {
  std::string dir = TempDir();
  std::string run = WriteFixtureRun(dir);
  auto reader = store::RunReader::Open(run);
  ASSERT_TRUE(reader.ok());
  auto events = (*reader)->Events({});
  auto metrics = (*reader)->SystemMetrics({});
  ASSERT_TRUE(events.ok() && metrics.ok());
  ASSERT_EQ(events->size(), 2u * 15 + 15 + 2);
  ASSERT_EQ(metrics->size(), 2u * 7 * 150);

  std::ostringstream out;
  ExportChromeTraceOptions o{run, dir + "/trace.json"};
  ASSERT_TRUE(RunExportChromeTrace(o, out).ok()) << out.str();
  auto text = ReadFileToString(dir + "/trace.json");
  ASSERT_TRUE(text.ok());
  json doc = json::parse(*text);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  ASSERT_TRUE(doc["traceEvents"].is_array());

  int64_t x = 0, instants = 0, counters = 0, findings = 0;
  std::set<int64_t> named_pids, used_pids;
  std::set<std::pair<int64_t, int64_t>> named_threads, used_threads;
  std::map<std::string, std::vector<double>> counter_values;  // "<pid> <name>" -> values
  const json* forward = nullptr;
  const json* mark = nullptr;
  for (const json& e : doc["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"))
        << e.dump();
    std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "process_name") named_pids.insert(e["pid"].get<int64_t>());
      if (e["name"] == "thread_name")
        named_threads.insert({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
      ASSERT_TRUE(e["args"]["name"].is_string());
      continue;
    }
    ASSERT_TRUE(e["ts"].is_number()) << e.dump();
    used_pids.insert(e["pid"].get<int64_t>());
    if (ph != "C") used_threads.insert({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
    if (ph == "X") {
      ASSERT_TRUE(e["dur"].is_number()) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0);
    }
    if (e.value("cat", "") == "finding") {
      ++findings;
      EXPECT_EQ(e["name"], "LowGPUUtilization");
      EXPECT_EQ(e["args"]["message"], "GPU 0 busy 31 % of the time \"low\"");
      EXPECT_EQ(e["args"]["evidence"]["p95"], 0.31);
      EXPECT_EQ(ph, e["args"]["node"] == "host-a" ? "X" : "i");
      continue;
    }
    if (ph == "X") ++x;
    if (ph == "i") {
      ++instants;
      EXPECT_EQ(e["s"], "t");
      mark = &e;
    }
    if (ph == "C") {
      ++counters;
      counter_values[std::to_string(e["pid"].get<int64_t>()) + " " + e["name"].get<std::string>()]
          .push_back(e["args"]["value"].get<double>());
    }
    if (e["name"] == "forward" && e["args"].value("rank", -1) == 1 && e["args"]["step"] == 3) {
      forward = &e;
    }
  }
  EXPECT_EQ(x + instants, static_cast<int64_t>(events->size()));
  EXPECT_EQ(instants, 2);
  EXPECT_EQ(counters, static_cast<int64_t>(metrics->size()));
  EXPECT_EQ(findings, 2);
  for (int64_t pid : used_pids) EXPECT_TRUE(named_pids.count(pid)) << pid;
  for (const auto& t : used_threads) EXPECT_TRUE(named_threads.count(t)) << t.first;
  // Events: host-a ranks 0/1, host-b, and each node's marks (no rank, no pid); metrics per
  // node; findings.
  EXPECT_EQ(named_pids.size(), 5u + 2u + 1u);

  // The event's own args beside ours; ours win on a clash (step 3, not the args' 99).
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ((*forward)["args"]["note"], kTricky.substr(0, kTricky.find("\xff")));
  EXPECT_EQ((*forward)["args"]["mode"], "train");
  EXPECT_EQ((*forward)["args"]["node"], "host-a");
  EXPECT_EQ((*forward)["args"]["n"], 3);
  EXPECT_EQ((*forward)["cat"], "forward");
  ASSERT_NE(mark, nullptr);
  EXPECT_EQ((*mark)["name"].get<std::string>().substr(0, 10), "quote \" ba");
  EXPECT_FALSE((*mark)["args"].contains("step"));  // missing is not 0
  // Exact ns in the text: step 3 of rank 1 starts at kStart + 2 s + 3 x 300000001 + 17 + 10.
  std::string ts;
  AppendMicros(kStart + 2'000'000'000LL + 3 * 300'000'001LL + 17 + 10, &ts);
  EXPECT_NE(text->find("\"ts\":" + ts + ",\"dur\":100000.001"), std::string::npos) << ts;
  EXPECT_NE(text->find("\"args_text\":\"not json\""), std::string::npos);

  // Counter values equal the stored values, series by series, in order.
  std::map<std::string, std::vector<double>> by_series;
  for (size_t i = 0; i < metrics->size(); ++i) {
    std::string dev = metrics->devices.at(metrics->device[i]);
    std::string name = metrics->metrics.at(metrics->metric[i]) + (dev.empty() ? "" : " " + dev);
    by_series[metrics->nodes.at(metrics->node[i]) + " " + name].push_back(metrics->value[i]);
  }
  ASSERT_EQ(counter_values.size(), by_series.size());
  std::multiset<std::vector<double>> a, b;
  for (auto& [k, v] : counter_values) a.insert(v);
  for (auto& [k, v] : by_series) b.insert(v);
  EXPECT_EQ(a, b);

  // .gz: the same document, compressed.
  std::ostringstream gz_out;
  ExportChromeTraceOptions og{run, dir + "/trace.json.gz"};
  ASSERT_TRUE(RunExportChromeTrace(og, gz_out).ok());
  EXPECT_NE(gz_out.str().find("(gzip)"), std::string::npos);
  EXPECT_LT(fs::file_size(dir + "/trace.json.gz"), text->size() / 4);
  EXPECT_EQ(Gunzip(dir + "/trace.json.gz"), *text);

  // Round trip through our Kineto importer: every span, instant (framework and findings) and
  // counter sample comes back.
  std::ostringstream imp_out;
  ImportOptions io;
  io.sources = {dir + "/trace.json.gz"};
  io.out = dir + "/reimported";
  io.json = true;
  ASSERT_TRUE(RunImportKineto(io, imp_out).ok()) << imp_out.str();
  json imp = json::parse(imp_out.str());
  EXPECT_EQ(imp["events_stored"], x + instants + findings);
  EXPECT_EQ(imp["files"][0]["metric_samples"], counters);
  EXPECT_EQ(imp["files"][0]["timestamp_format"], "decimal_us");
  EXPECT_EQ(imp["files"][0]["start_ns"], kStart + 1'500'000'001);  // the mark, exact to the ns
}

// What an independent reading (nlohmann::json, event by event) of a Chrome/Kineto trace says
// about its flows and the tracks of its complete events.
struct TraceFacts {
  // (ph, id, ts, bp, cat, name) of every flow event (ph s, t, f).
  std::multiset<std::tuple<std::string, int64_t, double, std::string, std::string, std::string>>
      flows;
  // (name, ts, dur, process label, thread name) of every X event whose process has a name. The
  // process label is the process_labels entry when it names a device ("GPU 1"), else the
  // process_name; the thread name is the thread_name entry ("" when none).
  std::multiset<std::tuple<std::string, double, double, std::string, std::string>> spans;
  int64_t x_events = 0;
};

TraceFacts ReadTraceFacts(const std::string& text) {
  std::map<int64_t, std::string> process_name, process_labels;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_name;
  std::vector<std::tuple<std::string, double, double, int64_t, int64_t>> xs;
  TraceFacts facts;
  auto track_id = [](const json& v) -> int64_t {
    if (v.is_number_integer()) return v.get<int64_t>();
    return INT64_MIN;  // "Spans", "Traces": no number
  };
  // Each event is looked at when its object closes and then discarded: the 50 MB traces are
  // never held as one DOM.
  json::parser_callback_t visit = [&](int depth, json::parse_event_t ev, json& e) {
    if (ev != json::parse_event_t::object_end || depth != 2 || !e.is_object() ||
        !e.contains("ph")) {
      return true;
    }
    const std::string ph = e["ph"].get<std::string>();
    const int64_t pid = e.contains("pid") ? track_id(e["pid"]) : INT64_MIN;
    const int64_t tid = e.contains("tid") ? track_id(e["tid"]) : INT64_MIN;
    if (ph == "M") {
      const std::string name = e.value("name", "");
      if (name == "process_name") process_name[pid] = e["args"]["name"].get<std::string>();
      if (name == "process_labels") process_labels[pid] = e["args"]["labels"].get<std::string>();
      if (name == "thread_name") thread_name[{pid, tid}] = e["args"]["name"].get<std::string>();
    } else if (ph == "s" || ph == "t" || ph == "f") {
      facts.flows.insert({ph, e["id"].get<int64_t>(), e["ts"].get<double>(), e.value("bp", ""),
                          e.value("cat", ""), e.value("name", "")});
    } else if (ph == "X") {
      ++facts.x_events;
      xs.emplace_back(e["name"].get<std::string>(), e["ts"].get<double>(), e["dur"].get<double>(),
                      pid, tid);
    }
    return false;
  };
  json top = json::parse(text, visit);
  EXPECT_TRUE(top.is_object() && top.contains("traceEvents"));
  for (const auto& [name, ts, dur, pid, tid] : xs) {
    auto p = process_name.find(pid);
    if (p == process_name.end()) continue;
    std::string label = p->second;
    auto l = process_labels.find(pid);
    if (l != process_labels.end() && l->second != "CPU") label = l->second;
    auto t = thread_name.find({pid, tid});
    facts.spans.insert({name, ts, dur, label, t == thread_name.end() ? "" : t->second});
  }
  return facts;
}

// Issue 16 item 6: a real Kineto trace (HTA's df_index_resolver: rank 1, 64 663 ac2g
// kernel-launch flows, GPU 1 streams 7 and 14) imported and exported again keeps its flows as
// flows (ph, id, binding point, category, name, ts) and its tracks' device and stream names,
// and the exported file imports again with the same flows and names.
TEST(ExportChromeTraceTest, KinetoFlowsAndTrackNamesSurviveImportExport) {
  const std::string trace = std::string(TRAINPROF_SOURCE_DIR) +
                            "/../shared/data/traces/HolisticTraceAnalysis/tests/data/"
                            "df_index_resolver/df_index_resolver.json.gz";
  if (!PathExists(trace)) GTEST_SKIP() << "shared data not found at " << trace;
  const TraceFacts original = ReadTraceFacts(Gunzip(trace));
  ASSERT_EQ(original.flows.size(), 64663u);
  std::string dir = TempDir();
  std::ostringstream log;
  ImportOptions io;
  io.sources = {trace};
  io.out = dir + "/imported";
  ASSERT_TRUE(RunImportKineto(io, log).ok()) << log.str();
  ASSERT_TRUE(RunExportChromeTrace({io.out, dir + "/once.json"}, log).ok()) << log.str();
  auto once_text = ReadFileToString(dir + "/once.json");
  ASSERT_TRUE(once_text.ok());
  const TraceFacts once = ReadTraceFacts(*once_text);
  EXPECT_EQ(once.flows, original.flows);
  // Every span of the trace on its device/stream or process/thread, by the names the trace
  // gave them; the export adds the 5 derived step spans (ProfilerStep#N), nothing else.
  EXPECT_TRUE(std::includes(once.spans.begin(), once.spans.end(), original.spans.begin(),
                            original.spans.end()));
  // All but the profiler's own "Trace" span, on the unnamed "Spans" track.
  EXPECT_EQ(original.spans.size() + 1, static_cast<size_t>(original.x_events));
  EXPECT_EQ(once.x_events, original.x_events + 5);
  EXPECT_TRUE(once.spans.count(
      {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
       "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
       "at::detail::Array<char*, 1>)",
       1669783687389324.0, 3.0, "GPU 1", "stream 7 "}));

  // Imported again: the flows are flows, and a second export names the tracks alike.
  ImportOptions again;
  again.sources = {dir + "/once.json"};
  again.out = dir + "/again";
  again.json = true;
  std::ostringstream imp;
  ASSERT_TRUE(RunImportKineto(again, imp).ok()) << imp.str();
  EXPECT_EQ(json::parse(imp.str())["files"][0]["flows"], 64663);
  ASSERT_TRUE(RunExportChromeTrace({again.out, dir + "/twice.json"}, log).ok()) << log.str();
  auto twice_text = ReadFileToString(dir + "/twice.json");
  ASSERT_TRUE(twice_text.ok());
  const TraceFacts twice = ReadTraceFacts(*twice_text);
  EXPECT_EQ(twice.flows, original.flows);
  EXPECT_TRUE(std::includes(twice.spans.begin(), twice.spans.end(), original.spans.begin(),
                            original.spans.end()));
}

// Two ranks of one job, each with Kineto's per-process ids and pids: the same flow id (7) and
// the same CPU pid (100) and GPU pid (0) on both. Flows must not join across ranks, each rank's
// tracks keep their names with the rank added, and the colliding pids are renumbered.
TEST(ExportChromeTraceTest, FlowsAndTracksOfSeveralRanksStayApart) {
  std::string dir = TempDir();
  std::string run = dir + "/run";
  model::RunMetadata m;
  m.name = "two-ranks";
  m.run_id = model::NewRunId(m.name, kStart);
  m.start_ns = kStart;
  ASSERT_TRUE(store::WriteRunMetadata(run, m).ok());
  model::NodeInfo node;
  node.node = "host";
  auto w = store::OpenNodeWriter(run, node);
  ASSERT_TRUE(w.ok());
  for (int64_t rank : {0, 1}) {
    const int64_t t0 = kStart + rank * 1000;
    auto add = [&](model::EventKind kind, int64_t pid, int64_t tid, int64_t at, int64_t dur,
                   const std::string& name, const std::string& cat, const std::string& args) {
      model::Event e;
      e.kind = kind;
      e.name = name;
      e.category = cat;
      e.rank = rank;
      e.pid = pid;
      e.tid = tid;
      e.start_ns = at;
      e.duration_ns = dur;
      e.args = args;
      (*w)->AppendEvent(std::move(e));
    };
    add(model::EventKind::kSpan, 100, 100, t0, 500, "cudaLaunchKernel", "cuda_runtime", "");
    add(model::EventKind::kInstant, 100, 100, t0, 0, "ac2g", "ac2g",
        R"({"flow_phase":"s","flow_id":7})");
    add(model::EventKind::kSpan, 0, 7, t0 + 600, 300, "kernel", "kernel", "");
    add(model::EventKind::kInstant, 0, 7, t0 + 600, 0, "ac2g", "ac2g",
        R"({"flow_phase":"f","flow_id":7,"bp":"e"})");
    using importers::kineto::TrackNameKey;
    (*w)->SetMeta(TrackNameKey("process_name", rank, 100), "python3");
    (*w)->SetMeta(TrackNameKey("process_labels", rank, 100), "CPU");
    (*w)->SetMeta(TrackNameKey("process_name", rank, 0), "python3");
    (*w)->SetMeta(TrackNameKey("process_labels", rank, 0), "GPU 0");
    (*w)->SetMeta(TrackNameKey("thread_name", rank, 0, 7), "stream 7 ");
  }
  ASSERT_TRUE((*w)->Close().ok());
  std::ostringstream out;
  ASSERT_TRUE(RunExportChromeTrace({run, dir + "/t.json"}, out).ok()) << out.str();
  EXPECT_NE(out.str().find("4 flow events"), std::string::npos) << out.str();
  auto text = ReadFileToString(dir + "/t.json");
  ASSERT_TRUE(text.ok());
  json doc = json::parse(*text);
  std::map<int64_t, std::string> process_names;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;
  std::map<int64_t, std::vector<std::string>> flows_by_id;  // id -> "ph process/thread"
  for (const json& e : doc["traceEvents"]) {
    const int64_t pid = e["pid"], tid = e["tid"];
    if (e["ph"] == "M" && e["name"] == "process_name") process_names[pid] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names[{pid, tid}] = e["args"]["name"];
  }
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "s" && e["ph"] != "f") continue;
    const int64_t pid = e["pid"], tid = e["tid"];
    flows_by_id[e["id"].get<int64_t>()].push_back(
        e["ph"].get<std::string>() + " " + process_names[pid] + "/" + thread_names[{pid, tid}]);
  }
  ASSERT_EQ(flows_by_id.size(), 2u);  // one arrow per rank, not one id shared by both
  for (const auto& [id, ends] : flows_by_id) {
    const std::string rank = id == 7 ? "0" : "1";
    EXPECT_EQ(ends, (std::vector<std::string>{"s python3 (host rank " + rank + ")/tid 100",
                                              "f GPU 0 (host rank " + rank + ")/stream 7 "}))
        << id;
  }
  // Neither rank keeps pid 0 or 100 (both use them), and no two groups share a pid.
  std::set<std::string> names;
  for (const auto& [pid, name] : process_names) {
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_NE(pid, 0);
    EXPECT_NE(pid, 100);
  }
}

TEST(ExportChromeTraceTest, Errors) {
  std::string dir = TempDir();
  EXPECT_EQ(Main({"trainprof", "export", "chrome-trace", "/nonexistent", "--out", dir + "/t.json"}),
            kExitFailure);
  std::string run = WriteFixtureRun(dir);
  EXPECT_EQ(Main({"trainprof", "export", "chrome-trace", run, "--out", dir + "/no/such/t.json"}),
            kExitFailure);
  EXPECT_EQ(Main({"trainprof", "export", "chrome-trace", run}), kExitUsage);
  EXPECT_EQ(Main({"trainprof", "export", "chrome-trace", run, "--out", dir + "/t.json"}), kExitOk);
}

// Samples of a run by (node, metric, device, ts) -> value.
std::map<std::tuple<std::string, std::string, std::string, int64_t>, double> Samples(
    const std::string& run) {
  std::map<std::tuple<std::string, std::string, std::string, int64_t>, double> out;
  auto reader = store::RunReader::Open(run);
  EXPECT_TRUE(reader.ok());
  auto t = (*reader)->SystemMetrics({});
  EXPECT_TRUE(t.ok());
  for (size_t i = 0; i < t->size(); ++i) {
    out[{t->nodes.at(t->node[i]), t->metrics.at(t->metric[i]), t->devices.at(t->device[i]),
         t->timestamp_ns[i]}] = t->value[i];
  }
  return out;
}

TEST(ExportSmdebugTest, RoundTripsThroughImportSmdebug) {
  std::string dir = TempDir();
  std::string run = WriteFixtureRun(dir);
  std::ostringstream out;
  ExportSmdebugOptions o{run, dir + "/smdebug"};
  ASSERT_TRUE(RunExportSmdebug(o, out).ok()) << out.str();
  // Mapped: cpu0, cpu1 (CPUUtilization), cpu0 iowait, gpu0 util, gpu0 memory = 5 of 7 series.
  EXPECT_NE(out.str().find("1500 system metric samples in 6 files"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("skipped 600 metric samples"), std::string::npos);
  EXPECT_NE(out.str().find("cpu_utilization_ratio (device total): 300"), std::string::npos);
  EXPECT_NE(out.str().find("memory_used_bytes: 300"), std::string::npos);
  EXPECT_NE(out.str().find("node host-a -> algo-1"), std::string::npos);
  // The layout: 3 minutes (22:20, 22:21, 22:22 UTC) x 2 nodes, hour folder 2025113022.
  const std::string sys = dir + "/smdebug/system/incremental/2025113022/";
  for (int64_t minute : {1764541200, 1764541260, 1764541320}) {
    for (const char* node : {"algo-1", "algo-2"}) {
      EXPECT_TRUE(PathExists(sys + std::to_string(minute) + "." + node + ".json"));
    }
  }
  auto line = ReadFileToString(sys + "1764541200.algo-1.json");
  ASSERT_TRUE(line.ok());
  json first = json::parse(line->substr(0, line->find('\n')));
  EXPECT_EQ(first["NodeId"], "algo-1");
  EXPECT_TRUE(first["Type"] == "cpu" || first["Type"] == "gpu");
  EXPECT_NE(line->find("\"Timestamp\":1764541200.123456796"), std::string::npos);
  EXPECT_TRUE(PathExists(dir + "/smdebug/training_job_end.ts"));
  int timelines = 0;
  for (auto& p : fs::recursive_directory_iterator(dir + "/smdebug/framework/pevents")) {
    if (p.is_regular_file()) {
      ++timelines;
      auto t = ReadFileToString(p.path().string());
      ASSERT_TRUE(t.ok());
      json arr = json::parse(*t);  // valid JSON array (smdebug's readers json.load it)
      ASSERT_TRUE(arr.is_array());
      EXPECT_TRUE(arr[0]["args"].contains("start_time_since_epoch_in_micros"));
    }
  }
  EXPECT_EQ(timelines, 4);  // algo-1 ranks 0 and 1, algo-1 without rank (the mark), algo-2

  importers::smdebug::SmdebugImportOptions io;
  io.dir = dir + "/smdebug";
  io.out = dir + "/reimported";
  auto imported = importers::smdebug::ImportSmdebug(io);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->system_samples, 1500);
  EXPECT_EQ(imported->parse_errors, 0);
  EXPECT_TRUE(imported->skipped.empty());
  EXPECT_EQ(imported->framework_files, 4);
  EXPECT_EQ(imported->framework_events, 47);
  EXPECT_EQ(imported->steps, 15);

  // Every mapped sample comes back with its exact timestamp, value within the x100 / x0.01.
  auto before = Samples(run);
  auto after = Samples(dir + "/reimported");
  const std::map<std::string, std::pair<std::string, std::string>> kMapped = {
      {"cpu_utilization_ratio", {"cpu", "CPUUtilization"}},
      {"cpu_iowait_ratio", {"cpu", "I/OWaitPercentage"}},
      {"gpu_utilization_ratio", {"gpu", "GPUUtilization"}},
      {"gpu_memory_used_ratio", {"gpu", "GPUMemoryUtilization"}},
  };
  int64_t compared = 0;
  for (const auto& [key, value] : before) {
    auto [node, metric, device, ts] = key;
    auto it = kMapped.find(metric);
    if (it == kMapped.end() || device == "total") continue;
    std::string back =
        importers::smdebug::MapSystemMetric(it->second.first, it->second.second).metric;
    auto found = after.find({node == "host-a" ? "algo-1" : "algo-2", back, device, ts});
    ASSERT_NE(found, after.end()) << node << " " << metric << " " << device << " " << ts;
    EXPECT_NEAR(found->second, value, 1e-12) << metric;
    ++compared;
  }
  EXPECT_EQ(compared, 1500);
  EXPECT_EQ(after.size(), 1500u);

  // Steps: the same count, numbers, modes, starts and durations.
  auto r1 = store::RunReader::Open(run);
  auto r2 = store::RunReader::Open(dir + "/reimported");
  ASSERT_TRUE(r1.ok() && r2.ok());
  auto s1 = (*r1)->Steps();
  auto s2 = (*r2)->Steps();
  ASSERT_TRUE(s1.ok() && s2.ok());
  ASSERT_EQ(s1->size(), 15u);
  ASSERT_EQ(s2->size(), s1->size());
  std::multiset<std::tuple<int64_t, std::string, int64_t, int64_t>> a, b;
  for (size_t i = 0; i < s1->size(); ++i) {
    a.insert({s1->step[i], s1->modes.at(s1->mode[i]), s1->start_ns[i], s1->duration_ns[i]});
    b.insert({s2->step[i], s2->modes.at(s2->mode[i]), s2->start_ns[i], s2->duration_ns[i]});
  }
  EXPECT_EQ(a, b);
  // The run's end travels in training_job_end.ts (the importer keeps its text as a tag).
  EXPECT_EQ((*r2)->metadata().tags.at("training_job_end"), "1764541350.123456789");
}

// Real SageMaker Debugger output: import, export, import again; samples and steps survive.
TEST(ExportSmdebugTest, RealSmdebugDataRoundTrips) {
  const std::string res =
      std::string(TRAINPROF_SOURCE_DIR) + "/../shared/data/smdebug/tests/profiler/resources/";
  if (!IsDirectory(res)) GTEST_SKIP() << "shared data not found at " << res;
  std::string dir = TempDir();
  for (const char* sub : {"test_traces", "merge_traces"}) {
    importers::smdebug::SmdebugImportOptions io;
    io.dir = res + sub;
    io.out = dir + "/" + sub + "-1";
    ASSERT_TRUE(importers::smdebug::ImportSmdebug(io).ok());
    std::ostringstream out;
    ASSERT_TRUE(RunExportSmdebug({io.out, dir + "/" + sub + "-smdebug"}, out).ok()) << out.str();
    io.dir = dir + "/" + sub + "-smdebug";
    io.out = dir + "/" + sub + "-2";
    auto again = importers::smdebug::ImportSmdebug(io);
    ASSERT_TRUE(again.ok()) << again.status().message();
    auto r1 = store::RunReader::Open(dir + "/" + sub + "-1");
    auto r2 = store::RunReader::Open(io.out);
    ASSERT_TRUE(r1.ok() && r2.ok());
    auto e1 = (*r1)->EventCount();
    auto e2 = (*r2)->EventCount();
    ASSERT_TRUE(e1.ok() && e2.ok());
    EXPECT_EQ(*e2, *e1) << sub;
    auto s1 = (*r1)->Steps();
    auto s2 = (*r2)->Steps();
    ASSERT_TRUE(s1.ok() && s2.ok());
    EXPECT_EQ(s2->size(), s1->size()) << sub;
    auto before = Samples(dir + "/" + sub + "-1");
    auto after = Samples(io.out);
    int64_t compared = 0;
    for (const auto& [key, value] : before) {
      auto found = after.find(key);
      ASSERT_NE(found, after.end()) << std::get<1>(key) << " " << std::get<2>(key);
      EXPECT_NEAR(found->second, value, 1e-12);
      ++compared;
    }
    if (std::string(sub) == "test_traces") {
      // smdebug's expected 78 samples all come back (GPUMemoryUtilization included).
      EXPECT_EQ(compared, 78);
      EXPECT_EQ(after.size(), 78u);
    } else {
      EXPECT_GT(s1->size(), 0u);  // Step:ModeKeys.TRAIN spans of the pythontimeline
    }
  }
}

}  // namespace
}  // namespace trainprof::cli
