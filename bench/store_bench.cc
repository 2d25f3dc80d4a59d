// Store benchmark: write throughput, bytes per stored value and read throughput on realistic
// system-metric data — what the samplers produce for one node at 100 ms over an hour with 32
// cores, 8 GPUs, 2 NICs and 4 disks. Optionally writes the same samples in SageMaker Debugger's
// JSON-lines format so bench/store_read_bench.py can time smdebug's reader on them.
//
// Usage: store_bench OUT_DIR [--minutes 60] [--smdebug-minutes 10] [--repeat 5]

#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/time.h"
#include "bench_results.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

using namespace trainprof;

namespace {

struct Series {
  std::string metric, device;
  std::string smdebug_type, smdebug_dimension;  // "" when smdebug has no such metric
  double smdebug_scale = 1;                     // ratios are percent in smdebug
  std::vector<double> values;
};

double Round4(double v) { return std::round(v * 10000) / 10000; }

// Samples shaped like the samplers' output: CPU ratios from jiffy deltas (USER_HZ=100, about
// 10 jiffies per core per 100 ms tick) at 1e-4 resolution; memory from /proc/meminfo in KiB;
// network and disk rates as integer bytes/s (disk in 512-byte sectors); NVML's integer percent
// utilisation, MiB-granular memory, milliwatt power and integer temperature.
std::vector<Series> Generate(int64_t ticks) {
  std::mt19937_64 rng(1234);
  std::vector<Series> out;
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto binom = [&](int n, double p) {
    return std::binomial_distribution<int>(n, std::clamp(p, 0.0, 1.0))(rng);
  };
  // Training rhythm: 300-tick epochs, 20-tick evaluation dips.
  auto busy_phase = [](int64_t t) { return (t % 300) < 280; };

  Series cpu_total{"cpu_utilization_ratio", "total", "cpu", "CPUUtilization", 100, {}};
  Series iow_total{"cpu_iowait_ratio", "total", "cpu", "I/OWaitPercentage", 100, {}};
  std::vector<Series> cores, iowait;
  for (int c = 0; c < 32; ++c) {
    cores.push_back(
        {"cpu_utilization_ratio", "cpu" + std::to_string(c), "cpu", "CPUUtilization", 100, {}});
    iowait.push_back({"cpu_iowait_ratio", "cpu" + std::to_string(c), "", "", 1, {}});
  }
  for (int64_t t = 0; t < ticks; ++t) {
    int busy_sum = 0, io_sum = 0, total_sum = 0;
    for (int c = 0; c < 32; ++c) {
      int total = 10 + (rng() % 7 == 0 ? 1 : 0);
      // Eight data-loader cores work hard; the rest idle along.
      double p = c < 8 ? (busy_phase(t) ? 0.85 : 0.3) : 0.05;
      int busy = binom(total, p);
      int io = busy < total ? binom(total - busy, 0.02) : 0;
      cores[static_cast<size_t>(c)].values.push_back(Round4(static_cast<double>(busy) / total));
      iowait[static_cast<size_t>(c)].values.push_back(Round4(static_cast<double>(io) / total));
      busy_sum += busy;
      io_sum += io;
      total_sum += total;
    }
    cpu_total.values.push_back(Round4(static_cast<double>(busy_sum) / total_sum));
    iow_total.values.push_back(Round4(static_cast<double>(io_sum) / total_sum));
  }
  out.push_back(std::move(cpu_total));
  out.push_back(std::move(iow_total));
  for (auto& s : cores) out.push_back(std::move(s));
  for (auto& s : iowait) out.push_back(std::move(s));

  Series mem_used{"memory_used_bytes", "", "", "", 1, {}};
  Series mem_avail{"memory_available_bytes", "", "", "", 1, {}};
  double used_kib = 40e6;
  for (int64_t t = 0; t < ticks; ++t) {
    used_kib += std::round(uni(-2000, 2100));
    mem_used.values.push_back(used_kib * 1024);
    mem_avail.values.push_back((256e6 - used_kib) * 1024);
  }
  out.push_back(std::move(mem_used));
  out.push_back(std::move(mem_avail));

  for (int g = 0; g < 8; ++g) {
    std::string dev = "gpu" + std::to_string(g);
    Series util{"gpu_utilization_ratio", dev, "gpu", "GPUUtilization", 100, {}};
    Series mutil{"gpu_memory_utilization_ratio", dev, "gpu", "GPUMemoryUtilization", 100, {}};
    Series used{"gpu_memory_used_bytes", dev, "", "", 1, {}};
    Series power{"gpu_power_watts", dev, "", "", 1, {}};
    Series temp{"gpu_temperature_celsius", dev, "", "", 1, {}};
    Series sm{"gpu_sm_clock_hertz", dev, "", "", 1, {}};
    double used_mib = 30000;
    double temperature = 55;
    for (int64_t t = 0; t < ticks; ++t) {
      bool busy = busy_phase(t);
      int pct = std::clamp(static_cast<int>(std::lround(busy ? uni(80, 100) : uni(0, 15))), 0, 100);
      util.values.push_back(pct / 100.0);
      mutil.values.push_back(std::clamp(static_cast<int>(pct * 0.6 + uni(-3, 3)), 0, 100) / 100.0);
      if (rng() % 50 == 0) used_mib += std::round(uni(-200, 256));
      used.values.push_back(used_mib * 1048576);
      power.values.push_back(std::round(busy ? uni(550000, 700000) : uni(90000, 130000)) / 1000);
      if (rng() % 20 == 0) temperature += busy ? 1 : -1;
      temperature = std::clamp(temperature, 35.0, 85.0);
      temp.values.push_back(temperature);
      sm.values.push_back(busy ? 1980e6 : (rng() % 2 ? 1980e6 : 345e6));
    }
    for (Series* s : {&util, &mutil, &used, &power, &temp, &sm}) out.push_back(std::move(*s));
  }
  for (int n = 0; n < 2; ++n) {
    std::string dev = "eth" + std::to_string(n);
    Series rx{"network_receive_bytes_per_second", dev, "", "", 1, {}};
    Series tx{"network_transmit_bytes_per_second", dev, "", "", 1, {}};
    for (int64_t t = 0; t < ticks; ++t) {
      bool sync = (t % 5) == 0;  // gradient exchange bursts
      rx.values.push_back(std::round(sync ? uni(8e8, 1.2e9) : uni(1e5, 5e5)));
      tx.values.push_back(std::round(sync ? uni(8e8, 1.2e9) : uni(1e5, 5e5)));
    }
    out.push_back(std::move(rx));
    out.push_back(std::move(tx));
  }
  for (int d = 0; d < 4; ++d) {
    std::string dev = "nvme" + std::to_string(d) + "n1";
    Series rd{"disk_read_bytes_per_second", dev, "", "", 1, {}};
    Series wr{"disk_write_bytes_per_second", dev, "", "", 1, {}};
    for (int64_t t = 0; t < ticks; ++t) {
      rd.values.push_back(512.0 * 10 * binom(20000, 0.4));  // 100 ms: sectors x 10 per second
      wr.values.push_back(rng() % 600 == 0 ? 512.0 * 10 * binom(400000, 0.5) : 0.0);
    }
    out.push_back(std::move(rd));
    out.push_back(std::move(wr));
  }
  return out;
}

int64_t FileBytes(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

double Median(std::vector<double> v) {
  // The middle value, or the mean of the two middle ones: as bench/lib/results.py takes it.
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: store_bench OUT_DIR [--minutes M] [--smdebug-minutes M] [--repeat N] "
        "[--read-only]\n"
        "  --read-only: time only the C++ reader over OUT_DIR/store-bench-run written by an "
        "earlier run\n");
    return 2;
  }
  std::string out_dir = argv[1];
  int minutes = 60, smdebug_minutes = 10, repeat = 5;
  bool read_only = false;
  for (int i = 2; i < argc; ++i) {
    bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--read-only")) {
      read_only = true;
    } else if (has_value && !std::strcmp(argv[i], "--minutes")) {
      minutes = std::atoi(argv[++i]);
    } else if (has_value && !std::strcmp(argv[i], "--smdebug-minutes")) {
      smdebug_minutes = std::atoi(argv[++i]);
    } else if (has_value && !std::strcmp(argv[i], "--repeat")) {
      repeat = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "store_bench: unknown or incomplete option %s\n", argv[i]);
      return 2;
    }
  }
  const int64_t interval = 100 * kNanosPerMilli;
  const int64_t ticks = minutes * 60 * kNanosPerSecond / interval;
  const int64_t t0 = 1'767'225'600LL * kNanosPerSecond;  // 2026-01-01
  std::vector<Series> data = Generate(ticks);
  // The time each tick was really read: a sampler wakes up to ~1 ms after its nominal tick (the
  // recorder stamps all of a tick's samples with it, in ns), and so does SageMaker's, which
  // stamps each metric type's lines of a tick with its own read time, in microseconds. Evenly
  // spaced timestamps would understate what real timestamps cost (issue 16 item 3).
  std::mt19937_64 jitter_rng(16);
  std::vector<int64_t> tick_ns(static_cast<size_t>(ticks));
  for (int64_t t = 0; t < ticks; ++t) {
    tick_ns[static_cast<size_t>(t)] =
        t0 + t * interval + static_cast<int64_t>(jitter_rng() % 900'000);
  }
  int64_t total_values = 0;
  for (const auto& s : data) total_values += static_cast<int64_t>(s.values.size());
  std::printf("data: %d min at 100 ms, %zu series (32 cores, 8 GPUs, 2 NICs, 4 disks), %" PRId64
              " values\n",
              minutes, data.size(), total_values);

  // Write the way the recorder does: one tick at a time, with a durable flush (one fsync'd
  // transaction) every second of data; and in bulk, a flush per minute of data (importers).
  std::string run = JoinPath(out_dir, "store-bench-run");
  int64_t store_bytes = 0;
  for (int64_t flush_every : {int64_t{10}, int64_t{600}}) {
    if (read_only) break;
    std::vector<double> write_rates;
    for (int r = 0; r < std::max(1, repeat / 2); ++r) {
      (void)std::system(("rm -rf '" + run + "'").c_str());
      model::RunMetadata m;
      m.run_id = "store-bench";
      m.start_ns = t0;
      if (!store::WriteRunMetadata(run, m).ok()) return 1;
      model::NodeInfo node;
      node.node = "bench-node";
      auto writer = store::OpenNodeWriter(run, node);
      if (!writer.ok()) {
        std::fprintf(stderr, "%s\n", writer.status().ToString().c_str());
        return 1;
      }
      std::vector<store::SeriesId> ids;
      for (const auto& s : data) ids.push_back((*writer)->Series(s.metric, s.device));
      int64_t start = MonotonicNowNs();
      for (int64_t t = 0; t < ticks; ++t) {
        int64_t ts = tick_ns[static_cast<size_t>(t)];
        for (size_t i = 0; i < data.size(); ++i) {
          (*writer)->Append(ids[i], ts, data[i].values[static_cast<size_t>(t)]);
        }
        if (t % flush_every == flush_every - 1 && !(*writer)->Flush().ok()) return 1;
      }
      if (!(*writer)->Close().ok()) return 1;
      double secs = static_cast<double>(MonotonicNowNs() - start) / 1e9;
      write_rates.push_back(static_cast<double>(total_values) / secs);
      store_bytes = FileBytes(store::NodeStorePath(run, "bench-node"));
    }
    std::vector<double> m_rates;
    for (double r : write_rates) m_rates.push_back(r / 1e6);
    bench::ReportFigure(flush_every == 10 ? "store.write_flush_1s" : "store.write_flush_60s",
                        m_rates);
    std::printf(
        "store write, flush every %s of data: median %.2f M values/s (%.0fx real time "
        "for this node)\n",
        flush_every == 10 ? "1 s" : "60 s", Median(write_rates) / 1e6,
        Median(write_rates) / (static_cast<double>(data.size()) * 10));
  }
  double bytes_per_value = static_cast<double>(store_bytes) / static_cast<double>(total_values);
  if (!read_only) {
    std::printf("stored size: %.2f MiB = %.3f bytes/value\n",
                static_cast<double>(store_bytes) / 1048576.0, bytes_per_value);
    bench::ReportFigure("store.bytes_per_value", bytes_per_value);
  }

  std::vector<double> read_rates;
  for (int r = 0; r < repeat; ++r) {
    auto reader = store::RunReader::Open(run);
    if (!reader.ok()) return 1;
    int64_t start = MonotonicNowNs();
    auto table = (*reader)->SystemMetrics({});
    double secs = static_cast<double>(MonotonicNowNs() - start) / 1e9;
    if (!table.ok() || static_cast<int64_t>(table->size()) != total_values) {
      std::fprintf(stderr, "read back %zu of %" PRId64 " values\n", table.ok() ? table->size() : 0,
                   total_values);
      return 1;
    }
    read_rates.push_back(static_cast<double>(total_values) / secs);
  }
  std::vector<double> m_read_rates;
  for (double r : read_rates) m_read_rates.push_back(r / 1e6);
  bench::ReportFigure("store.read_cpp", m_read_rates);
  std::printf(
      "C++ reader, all series: median %.1f M values/s (smdebug's reader: see "
      "store_read_bench.py)\n",
      Median(read_rates) / 1e6);

  // The same samples in smdebug's format, for the peer measurement.
  if (smdebug_minutes > 0 && !read_only) {
    std::string dir = JoinPath(out_dir, "smdebug-profiler-output/system/incremental");
    int64_t sm_ticks = std::min<int64_t>(ticks, smdebug_minutes * 600);
    int64_t sm_values = 0, sm_bytes = 0;
    for (int64_t minute = 0; minute * 600 < sm_ticks; ++minute) {
      int64_t minute_s = t0 / kNanosPerSecond + minute * 60;
      // smdebug names files by the minute and puts them in hourly folders.
      std::string hour = FormatCompactUtc(minute_s * kNanosPerSecond).substr(0, 11);
      std::string hour_dir = JoinPath(dir, hour.substr(0, 8) + hour.substr(9, 2));
      if (!MakeDirs(hour_dir).ok()) return 1;
      std::ofstream f(JoinPath(hour_dir, std::to_string(minute_s) + ".algo-1.json"));
      for (int64_t t = minute * 600; t < std::min(sm_ticks, (minute + 1) * 600); ++t) {
        // Each metric type's lines of a tick carry the time that type was read (in us), up to
        // 300 us after the tick's own (SageMaker's rows: cpu .009090, memory .009163, network
        // .013693 within one tick).
        std::vector<std::pair<std::string, int64_t>> type_us;
        for (const auto& s : data) {
          if (s.smdebug_type.empty()) continue;
          char line[256];
          auto it = std::find_if(type_us.begin(), type_us.end(),
                                 [&](const auto& p) { return p.first == s.smdebug_type; });
          if (it == type_us.end()) {
            const int64_t us =
                tick_ns[static_cast<size_t>(t)] / 1000 + static_cast<int64_t>(jitter_rng() % 300);
            it = type_us.insert(type_us.end(), {s.smdebug_type, us});
          }
          std::snprintf(line, sizeof line,
                        "{\"Type\": \"%s\", \"Name\": \"%s\", \"Dimension\": \"%s\", \"Value\": "
                        "%.2f, \"NodeId\": \"algo-1\", \"Timestamp\": %" PRId64 ".%06" PRId64 "}\n",
                        s.smdebug_type.c_str(), s.device == "total" ? "cpu" : s.device.c_str(),
                        s.smdebug_dimension.c_str(),
                        s.values[static_cast<size_t>(t)] * s.smdebug_scale, it->second / 1'000'000,
                        it->second % 1'000'000);
          f << line;
          ++sm_values;
          sm_bytes += static_cast<int64_t>(std::strlen(line));
        }
      }
    }
    const double sm_per_value = static_cast<double>(sm_bytes) / static_cast<double>(sm_values);
    std::printf("smdebug-format copy: %d min, %" PRId64 " values in %s: %.1f bytes/value\n",
                static_cast<int>(sm_ticks / 600), sm_values, dir.c_str(), sm_per_value);
    bench::ReportPeer("store.bytes_per_value", {sm_per_value},
                      "smdebug JSON lines, the metrics it has");
  }
  std::printf("run for the Python reader benchmark: %s\n", run.c_str());
  return 0;
}
