// A long recording at accelerated speed (issue 20, "a 24-hour, 8-GPU, 100 ms recording"): the
// recorder's own parts -- the node's collectors (BuildCollectors: /proc, cgroup, filesystems and
// NVML, here the replay library with generated GPUs), the sampling loop, the store writer, the
// live rules -- driven tick after tick as fast as they go, with the tick's clock simulated
// (100 ms apart), instead of sleeping between ticks. What `record` does each simulated second
// (flush), each live-rules interval (LiveEvaluator::Poll) and what a dashboard does (a reader
// opened on the run, the last minutes queried) happens at the same simulated times.
//
// Measured as it goes, against simulated time: the process's resident memory (VmRSS, with its
// anonymous / file / shared parts, and the heap in use) every --rss-every-s, the live rules' Poll
// and the reader's query, each timed (wall). Printed at the end as one JSON document
// (bench/soak_bench.py judges it).
//
//   soak_recorder --run DIR --hours 24 [--interval-ms 100] [--live-every-s 5]
//                 [--query-every-s 300] [--query-window-s 300] [--rss-every-s 60]
//                 [--seal-values 4096] [--rules-config FILE (as record --rules-config)]
// The GPUs come from $TRAINPROF_NVML_LIBRARY (the replay library) and $TRAINPROF_NVML_REPLAY.

#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/latest_values.h"
#include "agent/sampling_loop.h"
#include "agent/summary_stats.h"
#include "analyze/rules/config.h"
#include "analyze/rules/live.h"
#include "base/time.h"
#include "collect/collector_factory.h"
#include "model/run_metadata.h"
#include "store/node_store_writer.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace {

using namespace trainprof;

// VmRSS and its parts (KiB): anonymous memory (the heap: what the recorder holds), file pages
// and shared memory mapped (SQLite's WAL index, the libraries).
// heap: the bytes malloc has handed out and not had back (mallinfo2: in use in the heap and
// in mmapped blocks): what the recorder holds, apart from what the allocator keeps in reserve.
struct Rss {
  int64_t total = -1, anon = -1, file = -1, shmem = -1, heap = -1;
};

Rss ReadRss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  Rss r;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) r.total = std::atoll(line.c_str() + 6);
    if (line.rfind("RssAnon:", 0) == 0) r.anon = std::atoll(line.c_str() + 8);
    if (line.rfind("RssFile:", 0) == 0) r.file = std::atoll(line.c_str() + 8);
    if (line.rfind("RssShmem:", 0) == 0) r.shmem = std::atoll(line.c_str() + 9);
  }
  const struct mallinfo2 mi = mallinfo2();
  r.heap = static_cast<int64_t>((mi.uordblks + mi.hblkhd) / 1024);
  return r;
}

double Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "soak_recorder: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string run_dir;
  double hours = 1;
  int64_t interval_ms = 100, live_every_s = 5, query_every_s = 300, query_window_s = 300,
          rss_every_s = 60;
  int64_t seal_values = store::WriterOptions{}.seal_values;
  std::string rules_config;  // "" -> the default rules (as record)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--run") {
      run_dir = v;
    } else if (k == "--hours") {
      hours = std::atof(v);
    } else if (k == "--interval-ms") {
      interval_ms = std::atoll(v);
    } else if (k == "--live-every-s") {
      live_every_s = std::atoll(v);
    } else if (k == "--query-every-s") {
      query_every_s = std::atoll(v);
    } else if (k == "--query-window-s") {
      query_window_s = std::atoll(v);
    } else if (k == "--rules-config") {
      rules_config = v;
    } else if (k == "--seal-values") {
      seal_values = std::atoll(v);
    } else if (k == "--rss-every-s") {
      rss_every_s = std::atoll(v);
    } else {
      return Fail("unknown option " + k);
    }
  }
  if (run_dir.empty() || hours <= 0 || hours > 48 || interval_ms < 10 || live_every_s < 1 ||
      query_every_s < 1 || rss_every_s < 1 || seal_values < 16 || seal_values > 65536) {
    return Fail("usage: --run DIR --hours H (0-48] [--interval-ms >= 10] [--live-every-s N] ...");
  }
  if (::mkdir(run_dir.c_str(), 0755) != 0) return Fail("cannot create " + run_dir);

  const int64_t interval_ns = interval_ms * kNanosPerMilli;
  const int64_t ticks = static_cast<int64_t>(hours * 3600e3 / static_cast<double>(interval_ms));
  // The simulated run ends about now (nothing reads a timestamp from the future).
  const int64_t start_ns = WallNowNs() - ticks * interval_ns;
  const int64_t mono0 = MonotonicNowNs();

  model::RunMetadata meta;
  meta.run_id = "soak";
  meta.name = "soak";
  meta.command = {"soak_recorder"};
  meta.start_ns = start_ns;
  meta.source = "record";
  if (Status s = store::WriteRunMetadata(run_dir, meta); !s.ok()) return Fail(s.message());

  model::NodeInfo node = model::DetectLocalNode("soak-node");
  store::WriterOptions wo;       // as RecordingSession, with the flush driven by simulated time
  wo.seal_values = seal_values;  // smaller in the short form: steady state sooner
  auto writer = store::OpenNodeWriter(run_dir, node, wo);
  if (!writer.ok()) return Fail(writer.status().message());

  collect::CollectorContext context;
  context.root_pids = {static_cast<int>(::getpid())};
  context.fs_paths = {run_dir};
  if (const char* nvml = std::getenv("TRAINPROF_NVML_LIBRARY"); nvml != nullptr && *nvml) {
    context.nvml_library = nvml;
  }
  collect::CollectorSet set = collect::BuildCollectors(context);
  for (const auto& c : set.collectors) c->Describe(&node);
  (*writer)->SetMeta("node_info", model::NodeInfoToJson(node));
  int gpus = node.gpus.empty() ? 0 : static_cast<int>(node.gpus.size());

  agent::LatestValues latest;
  agent::SummaryStats summary;
  agent::SamplingOptions so;
  so.interval_ns = interval_ns;
  agent::SamplingLoop loop(std::move(set.collectors), writer->get(), &latest, &summary, so);

  std::unique_ptr<analyze::rules::LiveEvaluator> live;
  nlohmann::json rss = nlohmann::json::array(), polls = nlohmann::json::array(),
                 queries = nlohmann::json::array();
  int64_t findings = 0, query_rows = 0;
  const int64_t per_s = 1000 / interval_ms;  // ticks per simulated second (flush cadence)
  const auto wall0 = std::chrono::steady_clock::now();
  for (int64_t k = 1; k <= ticks; ++k) {
    const int64_t ts = start_ns + k * interval_ns;
    loop.RunTick({ts, mono0 + k * interval_ns});
    if (k % per_s != 0) continue;
    const int64_t sim_s = k / per_s;
    if (Status s = (*writer)->Flush(); !s.ok()) return Fail("flush: " + s.message());
    if (sim_s % rss_every_s == 0) {
      const Rss r = ReadRss();
      rss.push_back({sim_s, r.total, r.anon, r.file, r.shmem, r.heap});
    }
    if (sim_s % 3600 == 0) {  // progress, for whoever watches a long run
      std::fprintf(stderr, "simulated hour %lld: %.0f s wall, RSS %lld KiB\n",
                   static_cast<long long>(sim_s / 3600), Ms(wall0) / 1e3,
                   static_cast<long long>(ReadRss().total));
    }
    if (sim_s % live_every_s == 0) {
      const auto t = std::chrono::steady_clock::now();
      if (!live) {
        analyze::rules::RuleConfig config;
        if (!rules_config.empty()) {
          auto loaded = analyze::rules::LoadRuleConfig(rules_config);
          if (!loaded.ok()) return Fail("rules config: " + loaded.status().message());
          config = std::move(*loaded);
        }
        auto opened = analyze::rules::LiveEvaluator::Open(run_dir, config);
        if (!opened.ok()) return Fail("live rules: " + opened.status().message());
        live = std::move(*opened);
      }
      auto got = live->Poll();
      if (!got.ok()) return Fail("live rules: " + got.status().message());
      for (model::Finding& f : *got) (*writer)->AddFinding(std::move(f)), ++findings;
      polls.push_back({sim_s, Ms(t)});
    }
    if (sim_s % query_every_s == 0) {  // a dashboard: a reader opened, the last minutes read
      const auto t = std::chrono::steady_clock::now();
      auto reader = store::RunReader::Open(run_dir);
      if (!reader.ok()) return Fail("reader: " + reader.status().message());
      store::MetricQuery q;
      q.start_ns = ts - query_window_s * kNanosPerSecond;
      q.end_ns = ts + 1;
      auto table = (*reader)->SystemMetrics(q);
      if (!table.ok()) return Fail("reader: " + table.status().message());
      query_rows = static_cast<int64_t>(table->size());
      queries.push_back({sim_s, Ms(t), query_rows});
    }
  }
  const double record_wall_s = Ms(wall0) / 1e3;
  const auto fin = std::chrono::steady_clock::now();
  if (live) {
    auto last = live->Finish();
    if (last.ok()) findings += static_cast<int64_t>(last->size());
  }
  const double finish_ms = Ms(fin);
  store::WriterStats ws = (*writer)->stats();
  if (Status s = (*writer)->Close(); !s.ok()) return Fail("close: " + s.message());
  meta.end_ns = start_ns + ticks * interval_ns;
  meta.exit_status = 0;
  if (Status s = store::WriteRunMetadata(run_dir, meta); !s.ok()) return Fail(s.message());
  agent::SamplingStats st = loop.stats();

  nlohmann::json out;
  out["hours"] = hours;
  out["interval_ms"] = interval_ms;
  out["seal_values"] = seal_values;
  out["ticks"] = ticks;
  out["gpus"] = gpus;
  out["start_ns"] = start_ns;
  out["end_ns"] = *meta.end_ns;
  out["values"] = st.values;
  out["values_written"] = ws.values_written;
  out["dropped_values"] = ws.dropped_values;
  out["write_errors"] = ws.write_errors;
  out["flushes"] = ws.flushes;
  out["collector_errors"] = st.collector_errors;
  out["findings"] = findings;
  out["record_wall_s"] = record_wall_s;
  out["live_finish_ms"] = finish_ms;
  out["query_window_s"] = query_window_s;
  out["rss_kb"] = rss;
  out["live_poll_ms"] = polls;
  out["query_ms"] = queries;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
