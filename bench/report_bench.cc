// report_bench: time and peak memory of building a run's report (model + HTML + JSON) for a
// generated one-node run with 32 cores and 8 GPUs sampled every 100 ms: 30 minutes and 24 hours.
// The targets (issue 7) are rows of bench/targets.toml; this program reports the figures.
// Each repetition runs in a fresh child process so that its peak RSS is its own.
//
// Usage: report_bench [--dir bench/out/report_bench] [--reps N] [--only 30m|24h]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/time.h"
#include "bench_results.h"
#include "report/synthetic_run.h"
#include "report/write_reports.h"

namespace tp = trainprof;

namespace {

struct Case {
  const char* name;
  int64_t duration_s;
  int reps;
};

double Median(std::vector<double> v) {
  // The middle value, or the mean of the two middle ones: as bench/lib/results.py takes it.
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "bench/out/report_bench";
  int reps = 0;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
  }
  std::vector<Case> cases = {{"30m", 1800, 5}, {"24h", 86400, 3}};
  // cpu_s (user + system) is shown beside the wall time because a shared, loaded machine
  // stretches wall time; the targets are on wall time.
  std::printf("%-5s %10s %10s %10s %12s %10s\n", "run", "values", "median_s", "cpu_s",
              "peak_rss_mb", "html_mb");
  for (const Case& c : cases) {
    if (!only.empty() && only != c.name) continue;
    std::string run = tp::JoinPath(dir, c.name);
    if (!tp::PathExists(tp::JoinPath(run, "run.json"))) {
      tp::report::SyntheticRunOptions o;
      o.duration_s = c.duration_s;
      o.interval_ms = 100;
      o.cores = 32;
      o.gpus = 8;
      o.hostile_names = false;
      int64_t t0 = tp::MonotonicNowNs();
      auto st = tp::report::WriteSyntheticRun(run, o);
      if (!st.ok()) {
        std::fprintf(stderr, "error: %s\n", st.message().c_str());
        return 1;
      }
      std::fprintf(stderr, "generated %s in %.1f s\n", run.c_str(),
                   static_cast<double>(tp::MonotonicNowNs() - t0) / 1e9);
    }
    std::vector<double> secs, cpu_secs, rss_mb;
    int64_t html_bytes = 0;
    for (int r = 0; r < (reps > 0 ? reps : c.reps); ++r) {
      int pipe_fd[2];
      if (pipe(pipe_fd) != 0) return 1;
      int64_t t0 = tp::MonotonicNowNs();
      pid_t pid = fork();
      if (pid == 0) {
        close(pipe_fd[0]);
        tp::report::WriteOptions w;
        w.html_path = tp::JoinPath(dir, std::string(c.name) + ".html");
        w.json_path = tp::JoinPath(dir, std::string(c.name) + ".json");
        auto written = tp::report::WriteReports(run, w);
        if (!written.ok()) {
          std::fprintf(stderr, "error: %s\n", written.status().message().c_str());
          _exit(1);
        }
        int64_t bytes = written->html_bytes;
        ssize_t n = write(pipe_fd[1], &bytes, sizeof(bytes));
        _exit(n == sizeof(bytes) ? 0 : 1);
      }
      close(pipe_fd[1]);
      int status = 0;
      rusage usage{};
      wait4(pid, &status, 0, &usage);
      double s = static_cast<double>(tp::MonotonicNowNs() - t0) / 1e9;
      if (read(pipe_fd[0], &html_bytes, sizeof(html_bytes)) != sizeof(html_bytes) ||
          !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "error: report child failed\n");
        return 1;
      }
      close(pipe_fd[0]);
      secs.push_back(s);
      cpu_secs.push_back(static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) /
                             1e6);
      rss_mb.push_back(static_cast<double>(usage.ru_maxrss) / 1024.0);
    }
    double values = static_cast<double>(c.duration_s) * 10 * (32 + 1 + 1 + 1 + 4 + 2 + 8 * 4);
    double med = Median(secs), mem = Median(rss_mb),
           html_mb = static_cast<double>(html_bytes) / 1e6;
    std::printf("%-5s %10.3g %10.3f %10.3f %12.1f %10.2f\n", c.name, values, med, Median(cpu_secs),
                mem, html_mb);
    const std::string prefix = std::string("report.") + c.name;
    tp::bench::ReportFigure((prefix + "_s").c_str(), secs);
    tp::bench::ReportFigure((prefix + "_peak_rss_mb").c_str(), rss_mb);
    tp::bench::ReportFigure((prefix + "_html_mb").c_str(), html_mb);
  }
  return 0;
}
