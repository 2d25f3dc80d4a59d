#include <cmath>
#include <cstdio>

#include "base/time.h"
#include "report/html_page.h"

namespace trainprof::report::html {

std::string FormatValue(std::optional<double> v, const std::string& unit) {
  if (!v) return "n/a";
  double x = *v;
  if (unit == "ratio" || unit == "share") return StrFormat("%.1f %%", x * 100);
  if (unit == "bytes" || unit == "bytes_per_second") {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (std::abs(x) >= 1024 && i < 4) {
      x /= 1024;
      ++i;
    }
    std::string s = StrFormat(i == 0 ? "%.0f" : "%.1f", x) + " " + units[i];
    return unit == "bytes" ? s : s + "/s";
  }
  if (unit == "watts") return StrFormat("%.0f W", x);
  if (unit == "cores") return StrFormat("%.2f cores", x);
  if (unit == "ms") return x >= 100 ? StrFormat("%.0f ms", x) : StrFormat("%.2f ms", x);
  return StrFormat("%.4g", x);
}

std::string Duration(std::optional<int64_t> ns) { return ns ? FormatDuration(*ns) : "n/a"; }
std::string Time(std::optional<int64_t> ns) { return ns ? FormatIso8601(*ns) : "n/a"; }

std::string MetricTitle(const std::string& metric) {
  static const std::pair<const char*, const char*> kTitles[] = {
      {"cpu_utilization_ratio", "CPU utilisation"},
      {"cpu_iowait_ratio", "CPU I/O wait"},
      {"memory_used_bytes", "Memory used"},
      {"memory_total_bytes", "Memory total"},
      {"gpu_utilization_ratio", "GPU utilisation"},
      {"gpu_memory_utilization_ratio", "GPU memory bandwidth utilisation"},
      {"gpu_memory_used_bytes", "GPU memory used"},
      {"gpu_memory_total_bytes", "GPU memory total"},
      {"gpu_power_watts", "GPU power"},
      {"network_receive_bytes_per_second", "Network receive"},
      {"network_transmit_bytes_per_second", "Network transmit"},
      {"disk_read_bytes_per_second", "Disk read"},
      {"disk_write_bytes_per_second", "Disk write"},
      {"process_cpu_utilization_ratio", "Training processes: CPU"},
      {"process_resident_memory_bytes", "Training processes: resident memory"},
  };
  for (const auto& [m, t] : kTitles) {
    if (metric == m) return t;
  }
  return metric;
}

bool IsKeyMetric(const std::string& metric) { return MetricTitle(metric) != metric; }

bool Constant(const Stats& s) { return s.count > 0 && s.min && s.max && *s.min == *s.max; }

bool ZeroThroughout(const Stats& s) {
  return s.count > 0 && s.min && s.max && *s.min == 0 && *s.max == 0;
}

double Round4(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(std::abs(v)))));
  return std::round(v * scale) / scale;
}

json Rounded(const std::vector<double>& values) {
  json a = json::array();
  for (double v : values) a.push_back(Round4(v));
  return a;
}

json BandSeries(const std::string& label, const Band& band) {
  json x = json::array();
  // Seconds with millisecond precision: what dygraphs' time axis takes (times 1000).
  for (int64_t t : band.ts_ns) x.push_back(static_cast<double>(t / 1000000) / 1e3);
  return {{"label", label},
          {"x", x},
          {"min", Rounded(band.min)},
          {"mean", Rounded(band.mean)},
          {"max", Rounded(band.max)}};
}

void StatsCells(std::vector<std::string>& row, const Stats& s, const std::string& unit) {
  for (const auto& v : {s.p50, s.p95, s.p99, s.max, s.min, s.mean})
    row.push_back(FormatValue(v, unit));
}

}  // namespace trainprof::report::html
