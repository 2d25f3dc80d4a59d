// Instrumentation benchmark: the cost of one span from C++ (trainprof::Span, RAII) with the
// recorder running and its flusher writing to a real process store, against its peers in the
// same run: two clock reads (the floor any span needs) and an empty loop. Prints medians of
// several repetitions and the ratios.
//
// Usage: instrument_bench OUT_DIR [--spans 2000000] [--repeat 7] [--figure NAME]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_results.h"
#include "instrument/recorder.h"
#include "trainprof/trainprof.h"

using namespace trainprof;

namespace {

template <typename F>
double NsPerOp(int64_t n, F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) f(i);
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
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
    std::fprintf(stderr,
                 "usage: instrument_bench OUT_DIR [--spans N] [--repeat R] [--figure NAME]\n");
    return 2;
  }
  std::string out = std::string(argv[1]) + "/instrument-bench-run";
  int64_t spans = 2'000'000;
  int repeat = 7;
  std::string figure;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--spans") == 0) spans = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--repeat") == 0) repeat = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--figure") == 0) figure = argv[i + 1];
  }
  RecorderOptions options;
  options.run_dir = out;
  options.flush_interval_ns = 100'000'000;
  options.max_events_per_thread = 1 << 22;
  if (Status st = trainprof::Start(options); !st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return 1;
  }
  std::vector<double> span_ns, clocks_ns, empty_ns;
  volatile int64_t sink = 0;
  for (int r = 0; r < repeat; ++r) {
    span_ns.push_back(NsPerOp(spans, [](int64_t) { Span s("forward", "forward"); }));
    clocks_ns.push_back(NsPerOp(spans, [&](int64_t) {
      int64_t a = instrument::NowNs();
      sink = sink + instrument::NowNs() - a;
    }));
    empty_ns.push_back(NsPerOp(spans, [&](int64_t i) { sink = sink + i; }));
    (void)instrument::FlushNow();  // keep buffers from filling between repetitions
  }
  auto stats = instrument::Stats();
  (void)trainprof::Stop();
  const double span = Median(span_ns), clocks = Median(clocks_ns), empty = Median(empty_ns);
  std::printf("C++ span (trainprof::Span, recorder running), median of %d x %lld spans\n", repeat,
              static_cast<long long>(spans));
  std::printf("  %-40s %8.1f ns\n", "trainprof::Span enter+exit", span);
  std::printf("  %-40s %8.1f ns   (span / clocks = %.2fx)\n", "two clock reads (floor)", clocks,
              span / clocks);
  std::printf("  %-40s %8.1f ns\n", "empty loop iteration", empty);
  // The steady figure (short bursts) and the long burst are two rows of bench/targets.toml;
  // --figure names which one this run gives.
  if (!figure.empty()) {
    trainprof::bench::ReportFigure(figure.c_str(), span_ns);
    trainprof::bench::ReportPeer(figure.c_str(), clocks_ns, "two clock reads");
  }
  std::printf("  events written %lld, dropped %lld\n", static_cast<long long>(stats.written_events),
              static_cast<long long>(stats.dropped_events));
  return 0;
}
