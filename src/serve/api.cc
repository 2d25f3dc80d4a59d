#include "serve/api.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
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

json RunInfoJson(const IndexedRun& run, store::RunReader& reader, int64_t now_ns) {
  return {{"run", RunRowJson(run, reader, now_ns)},
          {"command", model::RedactCommand(reader.metadata().command)}};
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

namespace {

// "gpu10" after "gpu9": the text before the trailing digits, then their value.
bool NaturalLess(const std::string& a, const std::string& b) {
  const size_t pa = a.find_last_not_of("0123456789") + 1, pb = b.find_last_not_of("0123456789") + 1;
  const std::string_view sa(a.data(), pa), sb(b.data(), pb);
  if (sa != sb) return sa < sb;
  const std::string_view da = std::string_view(a).substr(pa), db = std::string_view(b).substr(pb);
  if (da.size() != db.size()) return da.size() < db.size();  // no leading zeros in devices
  return da < db;
}

// Buckets of one series being filled: min, max, sum and count per bucket, as
// report::Downsample computes them, but fed slice by slice.
struct BucketFill {
  std::vector<double> lo, hi, sum;
  std::vector<int64_t> count;
  int64_t samples = 0;
};

}  // namespace

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
  // The series' extent and size from the chunk index (no sample read): the default window, and
  // how to cut the read into slices. A 24-hour, 100 ms GPU chart is 8 x 864 000 samples: read
  // whole, its table (28 bytes a sample) and a copy per series were half a gigabyte of fresh
  // memory a request, and the page faults and zeroing took more time than decoding; read in
  // slices of about kSliceSamples into buckets, the memory stays small and is reused.
  constexpr int64_t kSliceSamples = 1 << 18;
  constexpr int64_t kMaxSlices = 4096;
  TP_ASSIGN_OR_RETURN(auto listed, reader.ListSeries());
  int64_t lo = store::kMaxTime, hi = store::kMinTime, total = 0;
  auto selected = [](const std::vector<std::string>& filter, const std::string& v) {
    return filter.empty() || std::find(filter.begin(), filter.end(), v) != filter.end();
  };
  for (const store::NodeSeries& ns : listed) {
    if (ns.series.metric != metric->second || ns.series.count <= 0 || !selected(q.nodes, ns.node) ||
        !selected(q.devices, ns.series.device)) {
      continue;
    }
    lo = std::min(lo, ns.series.first_ns);
    hi = std::max(hi, ns.series.last_ns);
    total += ns.series.count;
  }
  const int points = Points(params);
  std::map<std::pair<std::string, std::string>, BucketFill> fills;
  int64_t start = 0, end = 0;
  if (total > 0) {
    start = q.start_ns != store::kMinTime ? q.start_ns : lo;
    end = q.end_ns != store::kMaxTime ? q.end_ns : hi + 1;
    if (end <= start) end = start + 1;
  }
  const double width = static_cast<double>(end - start) / points;
  // Read [from, to): the window asked for, within the data's extent.
  const int64_t from = std::max(start, lo), to = std::min(end, hi + 1);
  const int64_t slices =
      total > 0 && to > from ? std::clamp<int64_t>(total / kSliceSamples + 1, 1, kMaxSlices) : 0;
  const int64_t slice_ns = slices > 0 ? (to - from + slices - 1) / slices : 0;
  for (int64_t k = 0; k < slices; ++k) {
    store::MetricQuery sq = q;
    sq.start_ns = from + k * slice_ns;
    sq.end_ns = k + 1 == slices ? to : std::min(to, from + (k + 1) * slice_ns);
    if (sq.start_ns >= sq.end_ns) continue;
    TP_ASSIGN_OR_RETURN(store::MetricTable t, reader.SystemMetrics(sq));
    // The table comes in runs of one series: look the series up when the key changes.
    BucketFill* cur = nullptr;
    std::pair<int32_t, int32_t> cur_key{-1, -1};
    for (size_t i = 0; i < t.size(); ++i) {
      if (cur == nullptr || t.node[i] != cur_key.first || t.device[i] != cur_key.second) {
        cur_key = {t.node[i], t.device[i]};
        cur = &fills[{t.nodes.at(cur_key.first), t.devices.at(cur_key.second)}];
        if (cur->count.empty()) {
          cur->lo.assign(static_cast<size_t>(points), 0);
          cur->hi.assign(static_cast<size_t>(points), 0);
          cur->sum.assign(static_cast<size_t>(points), 0);
          cur->count.assign(static_cast<size_t>(points), 0);
        }
      }
      ++cur->samples;
      const double v = t.value[i];
      if (std::isnan(v)) continue;
      // The bucket as report::Downsample picks it.
      const auto b = static_cast<int64_t>(static_cast<double>(t.timestamp_ns[i] - start) / width);
      const auto bucket = static_cast<size_t>(std::clamp<int64_t>(b, 0, points - 1));
      if (cur->count[bucket] == 0) {
        cur->lo[bucket] = cur->hi[bucket] = v;
      } else {
        cur->lo[bucket] = std::min(cur->lo[bucket], v);
        cur->hi[bucket] = std::max(cur->hi[bucket], v);
      }
      cur->sum[bucket] += v;
      ++cur->count[bucket];
    }
  }
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& [key, fill] : fills) keys.push_back(key);
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return NaturalLess(a.first, b.first);
    return NaturalLess(a.second, b.second);
  });
  json series = json::array();
  for (const auto& key : keys) {
    const BucketFill& f = fills[key];
    report::Band band;
    for (size_t k = 0; k < f.count.size(); ++k) {
      if (f.count[k] == 0) continue;
      band.ts_ns.push_back(start + static_cast<int64_t>(width * static_cast<double>(k)));
      band.min.push_back(f.lo[k]);
      band.max.push_back(f.hi[k]);
      band.mean.push_back(f.sum[k] / static_cast<double>(f.count[k]));
    }
    json s = report::BandToJson(band);
    s["node"] = key.first;
    s["device"] = key.second;
    s["samples"] = f.samples;
    series.push_back(std::move(s));
  }
  const bool any = !fills.empty();
  const collect::MetricSpec* spec = collect::FindMetric(metric->second);
  return json{{"metric", metric->second},
              {"unit", spec != nullptr ? std::string(spec->unit) : std::string()},
              {"start_ns", any ? json(start) : json(nullptr)},
              {"end_ns", any ? json(end) : json(nullptr)},
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
  // torch.compile's compile and recompile events (python/trainprof/_auto.py), each the span of
  // the step in which dynamo compiled new graphs.
  store::EventQuery eq;
  eq.categories = {"compile"};
  TP_ASSIGN_OR_RETURN(store::EventTable ev, reader.Events(eq));
  json compiles = json::array();
  for (size_t i = 0; i < ev.size() && i < kMaxCompiles; ++i) {
    json c = {{"node", ev.nodes.at(ev.node[i])},
              {"name", ev.names.at(ev.name[i])},
              {"step", ev.step[i] == model::kMissing ? json(nullptr) : json(ev.step[i])},
              {"start_ns", ev.start_ns[i]},
              {"duration_ns", ev.duration_ns[i]},
              {"new_graphs", nullptr}};
    const json args = json::parse(ev.args[i], nullptr, /*allow_exceptions=*/false);
    if (args.is_object() && args.contains("new_graphs") && args["new_graphs"].is_number()) {
      c["new_graphs"] = args["new_graphs"];
    }
    compiles.push_back(std::move(c));
  }
  return json{{"mode", mode_filter},        {"steps", count},   {"unit", "ms"},
              {"series", series},           {"shares", shares}, {"compiles", compiles},
              {"compiles_total", ev.size()}};
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

namespace {

// "pid123" -> 123, "gpu0/pid123" -> 123; nullopt for anything else.
std::optional<int64_t> PidOfDevice(std::string_view device) {
  const size_t at = device.rfind("pid");
  if (at == std::string_view::npos || (at != 0 && device[at - 1] != '/')) return std::nullopt;
  std::string_view digits = device.substr(at + 3);
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  int64_t pid = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    pid = pid * 10 + (c - '0');
  }
  return pid;
}

// The newest sample of one series, read from its last chunk only.
StatusOr<std::optional<double>> NewestValue(store::RunReader& reader, const std::string& node,
                                            const store::SeriesInfo& s) {
  store::MetricQuery q;
  q.metrics = {s.metric};
  q.nodes = {node};
  q.devices = {s.device};
  q.start_ns = s.last_ns;
  TP_ASSIGN_OR_RETURN(store::MetricTable t, reader.SystemMetrics(q));
  if (t.size() == 0) return std::optional<double>();
  size_t newest = 0;
  for (size_t i = 1; i < t.size(); ++i) {
    if (t.timestamp_ns[i] >= t.timestamp_ns[newest]) newest = i;
  }
  return std::optional<double>(t.value[newest]);
}

// Adds "tree_processes" and "tree_other" to each node: the processes the recorder kept series
// for (pid_* metrics, device pid<P>; who they are from its "process" notes), with their newest
// CPU, RSS, threads and GPU memory (gpu_process_memory_used_bytes summed over GPUs, null when
// NVML did not report the process), and the rest summed ("other").
Status AddProcessTree(store::RunReader& reader, std::map<std::string, json>& nodes) {
  struct Row {
    json note;
    std::optional<double> cpu, rss, threads, gpu;
    int64_t last_ns = store::kMinTime;
  };
  std::map<std::pair<std::string, int64_t>, Row> rows;  // (node, pid)
  TP_ASSIGN_OR_RETURN(auto annotations, reader.Annotations());
  for (const auto& [node, a] : annotations) {
    if (a.key != "process") continue;
    json note = json::parse(a.value, nullptr, /*allow_exceptions=*/false);
    if (!note.is_object() || !note.contains("pid") || !note["pid"].is_number_integer()) continue;
    const auto key = std::make_pair(node, note["pid"].get<int64_t>());
    if (rows.size() >= kMaxProcesses && !rows.contains(key)) continue;
    rows[key].note = std::move(note);  // a reused pid: the newest note names it
  }
  std::map<std::string, Row> other;
  TP_ASSIGN_OR_RETURN(auto series, reader.ListSeries());
  for (const store::NodeSeries& ns : series) {
    const store::SeriesInfo& s = ns.series;
    const bool own = s.metric == collect::metric::kPidCpu || s.metric == collect::metric::kPidRss ||
                     s.metric == collect::metric::kPidThreads;
    const bool gpu = s.metric == collect::metric::kGpuProcessMemory;
    if ((!own && !gpu) || s.count == 0) continue;
    Row* row = nullptr;
    if (own && s.device == "other") {
      row = &other[ns.node];
    } else if (auto pid = PidOfDevice(s.device)) {
      auto it = rows.find({ns.node, *pid});
      if (it == rows.end()) {
        if (!own || rows.size() >= kMaxProcesses) continue;  // GPU-only processes: not ours
        it = rows.emplace(std::make_pair(ns.node, *pid), Row{}).first;
      }
      row = &it->second;
    } else {
      continue;
    }
    TP_ASSIGN_OR_RETURN(std::optional<double> v, NewestValue(reader, ns.node, s));
    if (!v) continue;
    if (gpu) {
      row->gpu = row->gpu.value_or(0) + *v;
      continue;
    }
    (s.metric == collect::metric::kPidCpu   ? row->cpu
     : s.metric == collect::metric::kPidRss ? row->rss
                                            : row->threads) = *v;
    row->last_ns = std::max(row->last_ns, s.last_ns);
  }
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  for (auto& [key, row] : rows) {
    json& n = nodes[key.first];
    if (!n.contains("tree_processes")) n["tree_processes"] = json::array();
    const json& note = row.note;
    std::vector<std::string> cmdline;
    if (note.contains("cmdline") && note["cmdline"].is_array()) {
      for (const json& arg : note["cmdline"]) {
        if (arg.is_string()) cmdline.push_back(arg.get<std::string>());
      }
    }
    // Alive: sampled at the node's newest process-tree tick.
    const int64_t tree_ns =
        n.contains("tree") && n["tree"].is_object() ? n["tree"].value("ts_ns", int64_t{0}) : 0;
    n["tree_processes"].push_back(
        {{"pid", key.second},
         {"ppid",
          note.contains("ppid") && note["ppid"].is_number_integer() ? note["ppid"] : json(nullptr)},
         {"name", note.contains("name") && note["name"].is_string() ? note["name"] : json("")},
         {"cmdline", model::RedactCommand(cmdline)},
         {"first_ns", note.contains("ts_ns") && note["ts_ns"].is_number_integer() ? note["ts_ns"]
                                                                                  : json(nullptr)},
         {"last_ns", row.last_ns == store::kMinTime ? json(nullptr) : json(row.last_ns)},
         {"alive", row.last_ns != store::kMinTime && row.last_ns >= tree_ns},
         {"cpu_cores", opt(row.cpu)},
         {"rss_bytes", opt(row.rss)},
         {"threads", opt(row.threads)},
         {"gpu_memory_bytes", opt(row.gpu)}});
  }
  for (auto& [node, row] : other) {
    nodes[node]["tree_other"] = {{"cpu_cores", opt(row.cpu)},
                                 {"rss_bytes", opt(row.rss)},
                                 {"threads", opt(row.threads)},
                                 {"last_ns", json(row.last_ns)}};
  }
  return OkStatus();
}

}  // namespace

StatusOr<json> ProcessesJson(store::RunReader& reader) {
  // The process tree's totals per node: the newest sample of each, and the largest.
  static constexpr std::string_view kTree[] = {
      collect::metric::kProcessCpu,     collect::metric::kProcessRss,
      collect::metric::kProcessRead,    collect::metric::kProcessWrite,
      collect::metric::kProcessThreads, collect::metric::kProcessCount};
  std::map<std::string, json> nodes;
  store::MetricQuery q;
  for (std::string_view m : kTree) q.metrics.emplace_back(m);
  q.devices = {"tree"};
  TP_ASSIGN_OR_RETURN(store::MetricTable t, reader.SystemMetrics(q));
  struct Newest {
    int64_t ts;
    double value, max;
  };
  std::map<std::pair<int32_t, int32_t>, Newest> newest;
  for (size_t i = 0; i < t.size(); ++i) {
    auto [it, added] = newest.try_emplace({t.node[i], t.metric[i]},
                                          Newest{t.timestamp_ns[i], t.value[i], t.value[i]});
    if (added) continue;
    if (t.timestamp_ns[i] >= it->second.ts)
      it->second = {t.timestamp_ns[i], t.value[i], it->second.max};
    it->second.max = std::max(it->second.max, t.value[i]);
  }
  for (const auto& [key, v] : newest) {
    json& n = nodes[t.nodes.at(key.first)];
    n["tree"][t.metrics.at(key.second)] = v.value;
    n["tree_max"][t.metrics.at(key.second)] = v.max;
    n["tree"]["ts_ns"] = std::max(n["tree"].value("ts_ns", int64_t{0}), v.ts);
  }
  // The processes that wrote events (the instrumented training processes and their data-loader
  // workers), by pid: what the store knows per process.
  store::EventQuery eq;
  eq.categories = {"step", "dataloader"};
  TP_ASSIGN_OR_RETURN(store::EventTable ev, reader.Events(eq));
  struct Proc {
    int64_t steps = 0, batches = 0, first = store::kMaxTime, last = store::kMinTime;
    std::set<int64_t> ranks;
  };
  std::map<std::pair<std::string, int64_t>, Proc> procs;
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev.pid[i] == model::kMissing) continue;
    auto key = std::make_pair(ev.nodes.at(ev.node[i]), ev.pid[i]);
    if (procs.size() >= kMaxProcesses && !procs.count(key)) continue;
    Proc& p = procs[key];
    (ev.categories.at(ev.category[i]) == "step" ? p.steps : p.batches) += 1;
    p.first = std::min(p.first, ev.start_ns[i]);
    p.last = std::max(p.last, ev.start_ns[i] + ev.duration_ns[i]);
    if (ev.rank[i] != model::kMissing) p.ranks.insert(ev.rank[i]);
  }
  for (const auto& [key, p] : procs) {
    json& n = nodes[key.first];
    if (!n.contains("processes")) n["processes"] = json::array();
    n["processes"].push_back({{"pid", key.second},
                              {"role", p.steps > 0 ? "training" : "data-loader worker"},
                              {"ranks", p.ranks},
                              {"steps", p.steps},
                              {"batches", p.batches},
                              {"first_ns", p.first},
                              {"last_ns", p.last}});
  }
  TP_RETURN_IF_ERROR(AddProcessTree(reader, nodes));
  json out = json::array();
  for (auto& [name, n] : nodes) {
    n["node"] = name;
    if (!n.contains("tree")) n["tree"] = n["tree_max"] = nullptr;
    if (!n.contains("processes")) n["processes"] = json::array();
    if (!n.contains("tree_processes")) n["tree_processes"] = json::array();
    if (!n.contains("tree_other")) n["tree_other"] = nullptr;
    out.push_back(std::move(n));
  }
  return json{{"command", model::RedactCommand(reader.metadata().command)}, {"nodes", out}};
}

StatusOr<std::optional<int64_t>> Latest(store::RunReader& reader) {
  TP_RETURN_IF_ERROR(reader.Refresh());
  return reader.LatestTimestampNs();
}

}  // namespace trainprof::serve
