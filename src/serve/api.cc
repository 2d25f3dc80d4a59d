#include "serve/api.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "collect/metric_catalog.h"
#include "model/run_metadata.h"
#include "report/report_json.h"

namespace trainprof::serve {
namespace {

using nlohmann::json;

std::optional<int64_t> IntParam(const Params& p, const std::string& key) {
  auto it = p.find(key);
  if (it == p.end() || it->second.empty()) return std::nullopt;
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used != it->second.size()) return std::nullopt;
    return static_cast<int64_t>(v);
  } catch (...) {
    return std::nullopt;
  }
}

std::vector<std::string> AllParams(const Params& p, const std::string& key) {
  std::vector<std::string> out;
  auto [lo, hi] = p.equal_range(key);
  for (auto it = lo; it != hi; ++it) {
    if (!it->second.empty()) out.push_back(it->second);
  }
  return out;
}

int Points(const Params& p) {
  return static_cast<int>(
      std::clamp<int64_t>(IntParam(p, "points").value_or(kDefaultPoints), 2, kMaxPoints));
}

json Opt(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

json RunRowJson(const IndexedRun& run, store::RunReader& reader, int64_t now_ns) {
  const model::RunMetadata& m = reader.metadata();
  int gpus = 0;
  for (const model::NodeInfo* n : reader.node_infos()) gpus += static_cast<int>(n->gpus.size());
  std::optional<int64_t> latest;
  if (auto l = reader.LatestTimestampNs(); l.ok()) latest = *l;
  std::string status;
  if (m.exit_status.has_value()) {
    status = *m.exit_status == 0 ? "finished" : "failed";
  } else if (latest && now_ns - *latest < kRunningWithinNs) {
    status = "running";
  } else {
    status = "crashed";  // no end recorded and no new data: killed, or cut short
  }
  int64_t findings = 0;
  if (auto f = reader.Findings(); f.ok()) findings = static_cast<int64_t>(f->size());
  const int64_t end = m.end_ns.value_or(latest.value_or(m.start_ns));
  json row = {{"id", run.id},
              {"path", run.path},
              {"name", m.name},
              {"run_id", m.run_id},
              {"source", m.source},
              {"status", status},
              {"exit_status", m.exit_status ? json(*m.exit_status) : json(nullptr)},
              {"start_ns", m.start_ns},
              {"end_ns", Opt(m.end_ns)},
              {"latest_ns", Opt(latest)},
              {"duration_ns", std::max<int64_t>(0, end - m.start_ns)},
              {"nodes", reader.nodes().size()},
              {"gpus", gpus},
              {"instance_type", m.instance_type},
              {"tags", m.tags},
              {"findings", findings}};
  return row;
}

json RunsJson(RunIndex& index, int64_t now_ns) {
  json runs = json::array();
  for (const IndexedRun& r : index.Runs()) {
    auto reader = store::RunReader::Open(r.dir);
    if (!reader.ok()) {
      runs.push_back({{"id", r.id},
                      {"path", r.path},
                      {"status", "unreadable"},
                      {"error", reader.status().message()}});
      continue;
    }
    runs.push_back(RunRowJson(r, **reader, now_ns));
  }
  std::stable_sort(runs.begin(), runs.end(), [](const json& a, const json& b) {
    return a.value("start_ns", int64_t{0}) > b.value("start_ns", int64_t{0});
  });
  return {{"runs", runs}};
}

StatusOr<json> OverviewJson(const IndexedRun& run, store::RunReader& reader,
                            const report::BuildOptions& build, int64_t now_ns) {
  TP_ASSIGN_OR_RETURN(report::Report r, report::BuildReport(reader, build));
  json j = report::ReportToJson(r);
  j["run"] = RunRowJson(run, reader, now_ns);
  j.erase("run_dir");  // paths stay on the server
  return j;
}

StatusOr<json> SeriesListJson(store::RunReader& reader) {
  TP_ASSIGN_OR_RETURN(auto series, reader.ListSeries());
  json out = json::array();
  for (const store::NodeSeries& s : series) {
    const collect::MetricSpec* spec = collect::FindMetric(s.series.metric);
    out.push_back({{"node", s.node},
                   {"metric", s.series.metric},
                   {"device", s.series.device},
                   {"unit", spec != nullptr ? std::string(spec->unit) : std::string()},
                   {"count", s.series.count},
                   {"first_ns", s.series.first_ns},
                   {"last_ns", s.series.last_ns}});
  }
  return json{{"series", out}};
}

StatusOr<json> MetricJson(store::RunReader& reader, const Params& params) {
  store::MetricQuery q;
  auto metric = params.find("metric");
  if (metric == params.end() || metric->second.empty()) {
    return InvalidArgument("metric= is required");
  }
  q.metrics = {metric->second};
  q.nodes = AllParams(params, "node");
  q.devices = AllParams(params, "device");
  if (auto s = IntParam(params, "start")) q.start_ns = *s;
  if (auto e = IntParam(params, "end")) q.end_ns = *e;
  TP_ASSIGN_OR_RETURN(store::MetricTable t, reader.SystemMetrics(q));
  // Split by (node, device); the table is in time order within each series.
  std::map<std::pair<int32_t, int32_t>, std::pair<std::vector<int64_t>, std::vector<double>>> by;
  int64_t lo = store::kMaxTime, hi = store::kMinTime;
  for (size_t i = 0; i < t.size(); ++i) {
    auto& [ts, vs] = by[{t.node[i], t.device[i]}];
    ts.push_back(t.timestamp_ns[i]);
    vs.push_back(t.value[i]);
    lo = std::min(lo, t.timestamp_ns[i]);
    hi = std::max(hi, t.timestamp_ns[i]);
  }
  const int64_t start = q.start_ns != store::kMinTime ? q.start_ns : lo;
  const int64_t end = q.end_ns != store::kMaxTime ? q.end_ns : hi + 1;
  const int points = Points(params);
  json series = json::array();
  for (auto& [key, cols] : by) {
    std::vector<int64_t> ts;
    std::vector<double> vs;
    // Sort by time (series from several stores may interleave).
    std::vector<size_t> order(cols.first.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return cols.first[a] < cols.first[b]; });
    for (size_t i : order) {
      ts.push_back(cols.first[i]);
      vs.push_back(cols.second[i]);
    }
    report::Band band = report::Downsample(ts.data(), vs.data(), ts.size(), start, end, points);
    json s = report::BandToJson(band);
    s["node"] = t.nodes.at(key.first);
    s["device"] = t.devices.at(key.second);
    s["samples"] = ts.size();
    series.push_back(std::move(s));
  }
  const collect::MetricSpec* spec = collect::FindMetric(metric->second);
  return json{{"metric", metric->second},
              {"unit", spec != nullptr ? std::string(spec->unit) : std::string()},
              {"start_ns", t.size() ? json(start) : json(nullptr)},
              {"end_ns", t.size() ? json(end) : json(nullptr)},
              {"points", points},
              {"series", series}};
}

StatusOr<json> StepsJson(store::RunReader& reader, const Params& params) {
  TP_ASSIGN_OR_RETURN(store::StepTable t, reader.Steps());
  const std::string mode_filter = [&] {
    auto it = params.find("mode");
    return it == params.end() ? std::string("train") : it->second;
  }();
  using Key = std::tuple<std::string, int64_t, int64_t, std::string>;
  std::map<Key, std::pair<std::vector<int64_t>, std::vector<double>>> by;
  int64_t lo = store::kMaxTime, hi = store::kMinTime, count = 0;
  int64_t total = 0, parts[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string& mode = t.modes.at(t.mode[i]);
    if (!mode_filter.empty() && mode != mode_filter) continue;
    auto& [ts, vs] = by[{t.nodes.at(t.node[i]), t.rank[i], t.pid[i], mode}];
    ts.push_back(t.start_ns[i]);
    vs.push_back(static_cast<double>(t.duration_ns[i]) / 1e6);
    lo = std::min(lo, t.start_ns[i]);
    hi = std::max(hi, t.start_ns[i]);
    ++count;
    total += t.duration_ns[i];
    const int64_t p[4] = {t.data_wait_ns[i], t.forward_ns[i], t.backward_ns[i], t.optimizer_ns[i]};
    for (int k = 0; k < 4; ++k) {
      if (p[k] != model::kMissing) parts[k] += p[k];
    }
  }
  json series = json::array();
  const int points = Points(params);
  for (auto& [key, cols] : by) {
    report::Band band = report::Downsample(cols.first.data(), cols.second.data(), cols.first.size(),
                                           lo, hi + 1, points);
    json s = report::BandToJson(band);
    const auto& [node, rank, pid, mode] = key;
    s["label"] = rank != model::kMissing ? node + " rank " + std::to_string(rank)
                                         : node + " pid " + std::to_string(pid);
    s["steps"] = cols.first.size();
    series.push_back(std::move(s));
  }
  json shares = json::object();
  const char* names[4] = {"data_wait", "forward", "backward", "optimizer"};
  for (int k = 0; k < 4; ++k) {
    shares[names[k]] = total > 0 ? json(static_cast<double>(parts[k]) / static_cast<double>(total))
                                 : json(nullptr);
  }
  return json{{"mode", mode_filter},
              {"steps", count},
              {"unit", "ms"},
              {"series", series},
              {"shares", shares}};
}

StatusOr<json> EventsJson(store::RunReader& reader, const Params& params) {
  store::EventQuery q;
  if (auto s = IntParam(params, "start")) q.start_ns = *s;
  if (auto e = IntParam(params, "end")) q.end_ns = *e;
  q.categories = AllParams(params, "category");
  const int64_t limit =
      std::clamp<int64_t>(IntParam(params, "limit").value_or(2000), 1, kMaxEvents);
  TP_ASSIGN_OR_RETURN(store::EventTable t, reader.Events(q));
  json events = json::array();
  for (size_t i = 0; i < t.size() && static_cast<int64_t>(i) < limit; ++i) {
    events.push_back({{"node", t.nodes.at(t.node[i])},
                      {"name", t.names.at(t.name[i])},
                      {"category", t.categories.at(t.category[i])},
                      {"rank", t.rank[i] == model::kMissing ? json(nullptr) : json(t.rank[i])},
                      {"pid", t.pid[i] == model::kMissing ? json(nullptr) : json(t.pid[i])},
                      {"step", t.step[i] == model::kMissing ? json(nullptr) : json(t.step[i])},
                      {"start_ns", t.start_ns[i]},
                      {"duration_ns", t.duration_ns[i]}});
  }
  return json{{"events", events},
              {"truncated", static_cast<int64_t>(t.size()) > limit},
              {"total", t.size()}};
}

StatusOr<std::optional<int64_t>> Latest(store::RunReader& reader) {
  TP_RETURN_IF_ERROR(reader.Refresh());
  return reader.LatestTimestampNs();
}

}  // namespace trainprof::serve
