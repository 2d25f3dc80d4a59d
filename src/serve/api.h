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
// Series stored: [{"node", "metric", "device", "count", "first_ns", "last_ns"}].
StatusOr<nlohmann::json> SeriesListJson(store::RunReader& reader);
// One chart's data: metric= (required), node=, device= (repeatable), start=, end= (ns),
// points= (buckets, <= kMaxPoints). {"metric", "unit", "start_ns", "end_ns", "series":
// [{"node", "device", "ts_ns", "min", "mean", "max"}]}.
StatusOr<nlohmann::json> MetricJson(store::RunReader& reader, const Params& params);
// Step times per (node, rank, pid, mode), bucketed: {"series": [{"label", "ts_ns", "min",
// "mean", "max"}], "parts": {data_wait/forward/backward/optimizer shares}, "steps": count}.
StatusOr<nlohmann::json> StepsJson(store::RunReader& reader, const Params& params);
// Events overlapping [start, end) (category=, limit= <= kMaxEvents): {"events": [...],
// "truncated": bool}.
StatusOr<nlohmann::json> EventsJson(store::RunReader& reader, const Params& params);
// The newest timestamp of the run (what the live stream watches), null when empty.
StatusOr<std::optional<int64_t>> Latest(store::RunReader& reader);

}  // namespace trainprof::serve
