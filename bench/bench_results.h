// Figures for bench/run_all.sh's results file: one JSON line per call, appended to the file named
// by $BENCH_RESULTS (bench/lib/results.py merges them with bench/targets.toml into
// bench/out/results.json). Without BENCH_RESULTS nothing is written, so a bench run by hand
// only prints. A figure's name must be a row of bench/targets.toml.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace trainprof::bench {

// `repeats` are the figure's measurements, one per repetition (results.py takes the median).
inline void ReportFigure(const char* name, const std::vector<double>& repeats) {
  const char* path = std::getenv("BENCH_RESULTS");
  if (path == nullptr || *path == '\0' || repeats.empty()) return;
  FILE* f = std::fopen(path, "a");
  if (f == nullptr) {
    std::fprintf(stderr, "bench: cannot append to BENCH_RESULTS=%s\n", path);
    return;
  }
  std::fprintf(f, "{\"kind\": \"figure\", \"name\": \"%s\", \"repeats\": [", name);
  bool first = true;
  for (double v : repeats) {
    if (!std::isfinite(v)) continue;  // results.py refuses non-numbers; leave them out
    std::fprintf(f, "%s%.17g", first ? "" : ", ", v);
    first = false;
  }
  std::fprintf(f, "]}\n");
  std::fclose(f);
}

inline void ReportFigure(const char* name, double value) {
  ReportFigure(name, std::vector<double>{value});
}

// The peer's measurement of figure `name`, taken in the same run; `detail` names the peer.
inline void ReportPeer(const char* name, const std::vector<double>& repeats, const char* detail) {
  const char* path = std::getenv("BENCH_RESULTS");
  if (path == nullptr || *path == '\0' || repeats.empty()) return;
  FILE* f = std::fopen(path, "a");
  if (f == nullptr) return;
  std::fprintf(f, "{\"kind\": \"peer\", \"figure\": \"%s\", \"detail\": \"%s\", \"repeats\": [",
               name, detail);
  bool first = true;
  for (double v : repeats) {
    if (!std::isfinite(v)) continue;
    std::fprintf(f, "%s%.17g", first ? "" : ", ", v);
    first = false;
  }
  std::fprintf(f, "]}\n");
  std::fclose(f);
}

}  // namespace trainprof::bench
