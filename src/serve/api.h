#pragma once
// The dashboard's JSON API over the readers (docs/serve.md). Each function answers one GET
// with a JSON document, from a run opened by the caller; the server maps URLs onto them.
//
// Large runs stay cheap: time series come back reduced to the `points` buckets asked for (min,
// mean and max per bucket, report::Downsample), steps likewise per rank, events capped.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "report/report_model.h"
#include "serve/run_index.h"
#include "store/run_reader.h"

namespace trainprof::serve {

inline constexpr int kMaxPoints = 4000;
inline constexpr int kDefaultPoints = 600;
inline constexpr int64_t kMaxEvents = 20000;
inline constexpr size_t kMaxProcesses = 1000;  // processes listed per run by /processes
inline constexpr size_t kMaxCompiles = 1000;   // compile events listed by /steps
// A run with no end recorded whose newest data is older than this is not "running".
inline constexpr int64_t kRunningWithinNs = 30'000'000'000;

// Query parameters of a request, already URL-decoded.
using Params = std::multimap<std::string, std::string>;

// One row of the runs page: name, status (running / finished / failed / crashed), start,
// duration, nodes, GPUs, findings.
nlohmann::json RunRowJson(const IndexedRun& run, store::RunReader& reader, int64_t now_ns);
// {"runs": [...]}, newest first.
nlohmann::json RunsJson(RunIndex& index, int64_t now_ns);
// The run overview: the report's model (summary, findings with evidence and dollars, steps,
// phases, cost), plus the row above and the run's newest timestamp.
StatusOr<nlohmann::json> OverviewJson(const IndexedRun& run, store::RunReader& reader,
                                      const report::BuildOptions& build, int64_t now_ns);
// What every page of a run shows at its top, without building the report (cheap on a 24-hour
// run): {"run": the row above, "command": [...] (secrets redacted)}.
nlohmann::json RunInfoJson(const IndexedRun& run, store::RunReader& reader, int64_t now_ns);
// Series stored: [{"node", "metric", "device", "count", "first_ns", "last_ns"}].
StatusOr<nlohmann::json> SeriesListJson(store::RunReader& reader);
// One chart's data: metric= (required), node=, device= (repeatable), start=, end= (ns),
// points= (buckets, <= kMaxPoints). {"metric", "unit", "start_ns", "end_ns", "series":
// [{"node", "device", "ts_ns", "min", "mean", "max"}]}.
StatusOr<nlohmann::json> MetricJson(store::RunReader& reader, const Params& params);
// Step times per (node, rank, pid, mode), bucketed: {"series": [{"label", "ts_ns", "min",
// "mean", "max"}], "parts": {data_wait/forward/backward/optimizer shares}, "steps": count,
// "compiles": [{"node", "name" (compile / recompile), "step", "start_ns", "duration_ns",
// "new_graphs"}] (at most kMaxCompiles), "compiles_total"}.
StatusOr<nlohmann::json> StepsJson(store::RunReader& reader, const Params& params);
// Events overlapping [start, end) (category=, limit= <= kMaxEvents): {"events": [...],
// "truncated": bool}.
StatusOr<nlohmann::json> EventsJson(store::RunReader& reader, const Params& params);
// The processes per node, as far as the store knows them: the process tree's totals (newest
// sample, and the largest in "tree_max", of process_cpu_utilization_ratio,
// process_resident_memory_bytes, process_threads, process_count, ...); the tree's processes
// that the recorder kept series for (pid_* metrics; at most 64 per recorder, the rest summed in
// "tree_other"), with parent, name, command line (redacted) and newest CPU, RSS, threads and
// GPU memory; and the pids that wrote steps (training processes) or data-loader batches (their
// workers), with ranks, counts and first/last times: {"command", "nodes": [{"node", "tree":
// {...} | null, "tree_max": {...} | null, "tree_processes": [{"pid", "ppid", "name", "cmdline",
// "first_ns", "last_ns", "alive", "cpu_cores", "rss_bytes", "threads", "gpu_memory_bytes"}],
// "tree_other": {"cpu_cores", "rss_bytes", "threads", "last_ns"} | null, "processes": [{"pid",
// "role", "ranks", "steps", "batches", "first_ns", "last_ns"}]}]}.
StatusOr<nlohmann::json> ProcessesJson(store::RunReader& reader);
// The newest timestamp of the run (what the live stream watches), null when empty.
StatusOr<std::optional<int64_t>> Latest(store::RunReader& reader);

}  // namespace trainprof::serve
