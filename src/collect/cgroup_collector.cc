#include "collect/cgroup_collector.h"

#include "base/files.h"
#include "collect/metric_catalog.h"
#include "model/data_quality.h"

namespace trainprof::collect {

int CountCpuList(std::string_view list) {
  while (!list.empty() && (list.back() == '\n' || list.back() == ' ')) list.remove_suffix(1);
  if (list.empty()) return -1;
  int count = 0;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view range = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    size_t dash = range.find('-');
    unsigned long long lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!ParseU64(range, &lo)) return -1;
      hi = lo;
    } else if (!ParseU64(range.substr(0, dash), &lo) || !ParseU64(range.substr(dash + 1), &hi) ||
               hi < lo) {
      return -1;
    }
    count += static_cast<int>(hi - lo + 1);
  }
  return count;
}

StatusOr<std::unique_ptr<CgroupCollector>> CgroupCollector::Create(const CollectorContext& ctx) {
  if (!PathExists(JoinPath(ctx.cgroup_root, "cgroup.controllers"))) {
    return FailedPrecondition("no cgroup v2 hierarchy at " + ctx.cgroup_root +
                              " (cgroup v1 or hybrid host): no cgroup metrics");
  }
  std::string dir;
  if (!ctx.cgroup_path.empty()) {
    dir = ctx.cgroup_path.starts_with(ctx.cgroup_root) ? ctx.cgroup_path
                                                       : ctx.cgroup_root + ctx.cgroup_path;
  } else {
    const std::string pid =
        ctx.root_pids.empty() ? std::string("self") : std::to_string(ctx.root_pids.front());
    const std::string cgroup_file = JoinPath(JoinPath(ctx.proc_root, pid), "cgroup");
    StatusOr<std::string> text = ReadFileToString(cgroup_file);
    if (!text.ok()) return text.status();
    // cgroup v2 has one line "0::/path"; v1 hierarchies have "N:controllers:/path" lines.
    TextCursor cursor(*text);
    std::string_view line;
    while (cursor.NextLine(&line)) {
      if (line.starts_with("0::")) dir = ctx.cgroup_root + std::string(line.substr(3));
    }
    if (dir.empty()) {
      return FailedPrecondition(cgroup_file + " names no cgroup v2 path: no cgroup metrics");
    }
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!IsDirectory(dir)) return NotFound("cgroup directory " + dir + " does not exist");
  return std::make_unique<CgroupCollector>(dir);
}

CgroupCollector::CgroupCollector(const std::string& dir)
    : dir_(dir),
      memory_current_(JoinPath(dir, "memory.current")),
      memory_max_(JoinPath(dir, "memory.max")),
      memory_events_(JoinPath(dir, "memory.events")),
      cpu_stat_(JoinPath(dir, "cpu.stat")),
      cpu_max_(JoinPath(dir, "cpu.max")),
      cpuset_(JoinPath(dir, "cpuset.cpus.effective")),
      io_stat_(JoinPath(dir, "io.stat")) {}

bool CgroupCollector::ReadValue(ProcFile& file, SampleSink& sink, double* value, bool* unlimited) {
  std::string_view text;
  // A controller that is not enabled for this cgroup has no file: absent, not an error.
  if (!file.Read(&text)) return false;
  std::string_view token = NextToken(&text);
  *unlimited = token == "max";
  if (*unlimited) return true;
  unsigned long long v = 0;
  if (!ParseU64(token, &v)) {
    sink.Count(model::dq::kParseErrors, 1);
    return false;
  }
  *value = static_cast<double>(v);
  return true;
}

void CgroupCollector::SampleMemory(SampleSink& sink) {
  double current = 0, limit = 0;
  bool unlimited = false, limit_unlimited = true;
  const bool have_current = ReadValue(memory_current_, sink, &current, &unlimited);
  if (have_current) sink.Add(metric::kCgroupMemoryUsed, "", current);
  if (ReadValue(memory_max_, sink, &limit, &limit_unlimited) && !limit_unlimited) {
    sink.Add(metric::kCgroupMemoryLimit, "", limit);
    if (have_current && limit > 0) sink.Add(metric::kCgroupMemoryUtilization, "", current / limit);
  }
  std::string_view text;
  if (memory_events_.Read(&text)) {
    TextCursor cursor(text);
    std::string_view line;
    while (cursor.NextLine(&line)) {
      std::string_view key = NextToken(&line);
      unsigned long long n = 0;
      if (key == "oom_kill" && ParseU64(NextToken(&line), &n)) {
        sink.Add(metric::kCgroupOomKills, "", static_cast<double>(n));
      }
    }
  }
}

void CgroupCollector::SampleCpu(const Tick& tick, SampleSink& sink) {
  // The limit: cpu.max "QUOTA PERIOD" (or "max PERIOD"), else the cpuset's size.
  double limit_cores = -1;
  std::string_view text;
  if (cpu_max_.Read(&text)) {
    std::string_view quota = NextToken(&text);
    unsigned long long q = 0, period = 0;
    if (quota != "max") {
      if (ParseU64(quota, &q) && ParseU64(NextToken(&text), &period) && period > 0) {
        limit_cores = static_cast<double>(q) / static_cast<double>(period);
      } else {
        sink.Count(model::dq::kParseErrors, 1);
      }
    }
  }
  if (limit_cores < 0 && cpuset_.Read(&text)) {
    int n = CountCpuList(text);
    if (n > 0) limit_cores = n;
  }
  if (limit_cores > 0) sink.Add(metric::kCgroupCpuLimit, "", limit_cores);

  if (!cpu_stat_.Read(&text)) return;
  unsigned long long usage = 0, periods = 0, throttled = 0, throttled_usec = 0;
  bool have_usage = false, have_periods = false;
  TextCursor cursor(text);
  std::string_view line;
  while (cursor.NextLine(&line)) {
    std::string_view key = NextToken(&line);
    unsigned long long v = 0;
    if (key.empty()) continue;
    if (!ParseU64(NextToken(&line), &v)) {
      sink.Count(model::dq::kParseErrors, 1);
      continue;
    }
    if (key == "usage_usec") {
      usage = v;
      have_usage = true;
    } else if (key == "nr_periods") {
      periods = v;
      have_periods = true;
    } else if (key == "nr_throttled") {
      throttled = v;
    } else if (key == "throttled_usec") {
      throttled_usec = v;
    }
  }
  if (!have_usage) return;
  if (have_cpu_ && tick.mono_ns > cpu_mono_ns_ && usage >= usage_) {
    const double dt_usec = static_cast<double>(tick.mono_ns - cpu_mono_ns_) / 1e3;
    const double cores = static_cast<double>(usage - usage_) / dt_usec;
    sink.Add(metric::kCgroupCpuUsage, "", cores);
    if (limit_cores > 0) sink.Add(metric::kCgroupCpuUtilization, "", cores / limit_cores);
    // nr_periods only moves while a quota is set; no periods, no throttling ratio.
    if (have_periods && periods > nr_periods_ && throttled >= nr_throttled_) {
      sink.Add(metric::kCgroupCpuThrottledRatio, "",
               static_cast<double>(throttled - nr_throttled_) /
                   static_cast<double>(periods - nr_periods_));
    }
    if (have_periods && throttled_usec >= throttled_usec_) {
      sink.Add(metric::kCgroupCpuThrottledSeconds, "",
               static_cast<double>(throttled_usec - throttled_usec_) / dt_usec);
    }
  }
  usage_ = usage;
  nr_periods_ = periods;
  nr_throttled_ = throttled;
  throttled_usec_ = throttled_usec;
  cpu_mono_ns_ = tick.mono_ns;
  have_cpu_ = true;
}

void CgroupCollector::SampleIo(const Tick& tick, SampleSink& sink) {
  std::string_view text;
  if (!io_stat_.Read(&text)) return;
  // "MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N" per device; summed.
  unsigned long long rbytes = 0, wbytes = 0, rios = 0, wios = 0;
  TextCursor cursor(text);
  std::string_view line;
  while (cursor.NextLine(&line)) {
    if (NextToken(&line).empty()) continue;
    for (std::string_view kv = NextToken(&line); !kv.empty(); kv = NextToken(&line)) {
      size_t eq = kv.find('=');
      unsigned long long v = 0;
      if (eq == std::string_view::npos || !ParseU64(kv.substr(eq + 1), &v)) {
        sink.Count(model::dq::kParseErrors, 1);
        continue;
      }
      std::string_view key = kv.substr(0, eq);
      if (key == "rbytes") rbytes += v;
      if (key == "wbytes") wbytes += v;
      if (key == "rios") rios += v;
      if (key == "wios") wios += v;
    }
  }
  // Sums can go back when a device disappears from io.stat: skip that interval.
  if (have_io_ && tick.mono_ns > io_mono_ns_ && rbytes >= rbytes_ && wbytes >= wbytes_ &&
      rios >= rios_ && wios >= wios_) {
    const double dt_s = static_cast<double>(tick.mono_ns - io_mono_ns_) / 1e9;
    sink.Add(metric::kCgroupIoRead, "", static_cast<double>(rbytes - rbytes_) / dt_s);
    sink.Add(metric::kCgroupIoWrite, "", static_cast<double>(wbytes - wbytes_) / dt_s);
    sink.Add(metric::kCgroupIoReadOps, "", static_cast<double>(rios - rios_) / dt_s);
    sink.Add(metric::kCgroupIoWriteOps, "", static_cast<double>(wios - wios_) / dt_s);
  }
  rbytes_ = rbytes;
  wbytes_ = wbytes;
  rios_ = rios;
  wios_ = wios;
  io_mono_ns_ = tick.mono_ns;
  have_io_ = true;
}

void CgroupCollector::Sample(const Tick& tick, SampleSink& sink) {
  SampleMemory(sink);
  SampleCpu(tick, sink);
  SampleIo(tick, sink);
}

}  // namespace trainprof::collect
