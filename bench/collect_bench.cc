// Cost of one full node sample: every system collector of the factory (/proc/stat, loadavg,
// meminfo, net/dev, diskstats, statvfs of "/", the cgroup when the host has cgroup v2; no
// GPUs), with the files kept open as the agent keeps them, without and with a tree of 20
// sleeping child processes. Prints medians of CPU µs per sample (user + system time of this
// process, so the kernel's work for /proc is included) and the CPU share at a 100 ms interval.
// The psutil peer (collect_psutil_peer.py) does the same readings; run it with --cpp to get
// both and the ratio.
//
// Usage: collect_bench [--batches N] [--samples-per-batch N] [--json]

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collect/collector_factory.h"

namespace {

using trainprof::collect::BuildCollectors;
using trainprof::collect::CollectorContext;
using trainprof::collect::CollectorSet;
using trainprof::collect::SampleSink;
using trainprof::collect::Tick;

// Keeps what it is given from being optimised away, as cheaply as a sink can.
class SumSink : public SampleSink {
 public:
  void Add(std::string_view, std::string_view, double value) override {
    sum_ += value;
    ++n_;
  }
  void Count(std::string_view, int64_t delta) override { counts_ += delta; }
  double sum_ = 0;
  int64_t n_ = 0, counts_ = 0;
};

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct Result {
  std::string name;
  double median_us;
  double min_us;
  int64_t values_per_sample;
  std::vector<double> batches_us;  // every batch's CPU µs per sample, sorted
};

Result Measure(const std::string& name, CollectorSet& set, int batches, int per_batch) {
  SumSink sink;
  // Ticks 100 ms apart on the samplers' clock, as at --interval 100ms: what runs once a second
  // (the process tree's full /proc scan) runs every tenth sample, as it would.
  int64_t mono_ns = MonoNs();
  auto sample_all = [&] {
    mono_ns += 100'000'000;
    Tick tick{.wall_ns = 0, .mono_ns = mono_ns};
    for (auto& c : set.collectors) c->Sample(tick, sink);
  };
  for (int i = 0; i < 20; ++i) sample_all();  // open files, size buffers, settle state
  std::vector<double> us;
  int64_t values = 0;
  for (int b = 0; b < batches; ++b) {
    const int64_t n_before = sink.n_;
    const double start = CpuSeconds();
    for (int i = 0; i < per_batch; ++i) sample_all();
    us.push_back((CpuSeconds() - start) * 1e6 / per_batch);
    values = (sink.n_ - n_before) / per_batch;
  }
  std::sort(us.begin(), us.end());
  return Result{name, us[us.size() / 2], us.front(), values, us};
}

}  // namespace

int main(int argc, char** argv) {
  int batches = 15, per_batch = 200;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--batches") == 0 && i + 1 < argc)
      batches = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--samples-per-batch") == 0 && i + 1 < argc)
      per_batch = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--json") == 0)
      json = true;
  }

  CollectorContext node_ctx;
  node_ctx.gpus = false;
  node_ctx.fs_paths = {"/"};
  CollectorSet node = BuildCollectors(node_ctx);
  std::vector<Result> results;
  results.push_back(Measure("node", node, batches, per_batch));

  // 20 sleeping children of this process: the tree is this process and them (21).
  std::vector<pid_t> children;
  for (int i = 0; i < 20; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      for (;;) pause();
    }
    children.push_back(pid);
  }
  // The tree read at every tick (what the psutil peer does per sample), and at the recorder's
  // default, at most every 200 ms: the cost per 100 ms tick.
  CollectorContext tree_ctx = node_ctx;
  tree_ctx.root_pids = {getpid()};
  tree_ctx.process_min_interval_ms = 0;
  CollectorSet tree = BuildCollectors(tree_ctx);
  results.push_back(Measure("node+tree20", tree, batches, per_batch));
  tree_ctx.process_min_interval_ms = CollectorContext{}.process_min_interval_ms;
  CollectorSet tree_default = BuildCollectors(tree_ctx);
  results.push_back(Measure("node+tree20@100ms", tree_default, batches, per_batch));
  for (pid_t pid : children) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }

  if (json) {
    std::printf("{");
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::printf("%s\"%s\": {\"median_us\": %.2f, \"min_us\": %.2f, \"values\": %lld, \"us\": [",
                  i ? ", " : "", r.name.c_str(), r.median_us, r.min_us,
                  static_cast<long long>(r.values_per_sample));
      for (size_t k = 0; k < r.batches_us.size(); ++k)
        std::printf("%s%.3f", k ? ", " : "", r.batches_us[k]);
      std::printf("]}");
    }
    std::printf("}\n");
    return 0;
  }
  std::printf("collect_bench: CPU per full node sample (no GPUs), median of %d batches x %d\n",
              batches, per_batch);
  for (const char* note_prefix : {""}) {
    for (const std::string& note : node.notes)
      std::printf("  note%s: %s\n", note_prefix, note.c_str());
  }
  for (const Result& r : results) {
    std::printf("  %-18s %8.2f us/sample (min %.2f), %lld values, %.4f %% of one core at 100 ms\n",
                r.name.c_str(), r.median_us, r.min_us, static_cast<long long>(r.values_per_sample),
                r.median_us / 100000.0 * 100.0);
  }
  return 0;
}
