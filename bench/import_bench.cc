// Kineto import benchmark: writes a synthetic trace (cpu_op / cuda_runtime / kernel / flow
// events in today's decimal-µs format), imports it into a fresh run directory on this thread,
// and prints events/s (wall and CPU) and the peak memory held per event (peak RSS growth during
// the import / events). HTA, when installed, is timed on the same file by
// bench/import_bench_hta.py; this binary prints the command.
//
//   import_bench [EVENTS=2000000] [DIR=/tmp]

#include <sys/resource.h>
#include <sys/time.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "importers/kineto/kineto_importer.h"

namespace {

long PeakRssKb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

double CpuSeconds() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Five events per launched kernel: the operator, the runtime call, the kernel and two flows.
int64_t WriteTrace(const std::string& path, int64_t events) {
  FILE* f = std::fopen(path.c_str(), "w");
  std::fprintf(f,
               "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"backend\": \"nccl\", "
               "\"rank\": 0, \"world_size\": 1},\n  \"traceEvents\": [\n");
  int64_t written = 0;
  int64_t ts_ns = 1000000000;  // relative to baseTimeNanoseconds
  for (int64_t i = 0; written < events; ++i) {
    int64_t corr = 1000 + i;
    auto us = [](int64_t ns) {
      static char buf[4][32];
      static int k = 0;
      k = (k + 1) % 4;
      std::snprintf(buf[k], sizeof buf[k], "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
      return buf[k];
    };
    std::fprintf(f,
                 "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::linear\", \"pid\": 1, "
                 "\"tid\": 1, \"ts\": %s, \"dur\": %s, \"args\": {\"External id\": %" PRId64
                 ", \"Record function id\": 0, \"Ev Idx\": %" PRId64 "}},\n",
                 us(ts_ns), us(9000), i, i);
    std::fprintf(f,
                 "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
                 "\"pid\": 1, \"tid\": 1, \"ts\": %s, \"dur\": %s, \"args\": {\"External id\": "
                 "%" PRId64 ", \"cbid\": 211, \"correlation\": %" PRId64 "}},\n",
                 us(ts_ns + 1000), us(4000), i, corr);
    std::fprintf(
        f,
        "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void cutlass::Kernel<"
        "cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(Params)\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": %s, \"dur\": %s, \"args\": {\"External id\": %" PRId64
        ", \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, "
        "\"correlation\": %" PRId64
        ", \"registers per thread\": 128, "
        "\"shared memory\": 16384, \"blocks per SM\": 2.5, \"warps per SM\": 20, "
        "\"grid\": [512, 1, 1], \"block\": [256, 1, 1], \"est. achieved occupancy %%\": 25}},\n",
        us(ts_ns + 3000), us(7000), i, corr);
    std::fprintf(f,
                 "  {\"ph\": \"s\", \"id\": %" PRId64
                 ", \"pid\": 1, \"tid\": 1, \"ts\": %s, "
                 "\"cat\": \"ac2g\", \"name\": \"ac2g\"},\n",
                 corr, us(ts_ns + 1000));
    std::fprintf(f,
                 "  {\"ph\": \"f\", \"id\": %" PRId64
                 ", \"pid\": 0, \"tid\": 7, \"ts\": %s, "
                 "\"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"},\n",
                 corr, us(ts_ns + 3000));
    written += 5;
    ts_ns += 10000 + (i % 7) * 13;
  }
  std::fprintf(f,
               "  {\"ph\": \"i\", \"cat\": \"Trace\", \"name\": \"end\", \"pid\": 1, "
               "\"tid\": 1, \"ts\": 1.0, \"s\": \"g\"}\n  ],\n  \"traceName\": \"bench\",\n"
               "  \"baseTimeNanoseconds\": 1727743122000000000\n}\n");
  std::fclose(f);
  return written + 1;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t events = argc > 1 ? std::atoll(argv[1]) : 2'000'000;
  std::string dir = argc > 2 ? argv[2] : "/tmp";
  std::string trace = dir + "/trainprof_import_bench.json";
  std::string run = dir + "/trainprof_import_bench_run";
  int64_t n = WriteTrace(trace, events);
  std::filesystem::remove_all(run);
  auto bytes = std::filesystem::file_size(trace);

  long rss0 = PeakRssKb();
  double cpu0 = CpuSeconds();
  auto t0 = std::chrono::steady_clock::now();
  trainprof::importers::kineto::KinetoImportOptions o;
  o.traces = {trace};
  o.out = run;
  auto r = trainprof::importers::kineto::ImportKineto(o);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpu = CpuSeconds() - cpu0;
  long rss1 = PeakRssKb();
  if (!r.ok()) {
    std::fprintf(stderr, "import failed: %s\n", r.status().message().c_str());
    return 1;
  }
  double held = static_cast<double>(rss1 - rss0) * 1024.0 / static_cast<double>(n);
  std::printf("trace: %" PRId64 " events, %.1f MB (%s)\n", n, static_cast<double>(bytes) / 1e6,
              trace.c_str());
  std::printf(
      "trainprof import: %.2f s wall, %.2f s CPU: %.0f events/s wall, %.0f events/s CPU "
      "(target >= 2,000,000)\n",
      wall, cpu, static_cast<double>(n) / wall, static_cast<double>(n) / cpu);
  std::printf("trainprof memory held: peak RSS +%.1f MB = %.1f bytes/event (target <= 150)\n",
              static_cast<double>(rss1 - rss0) / 1024.0, held);
  std::printf("events stored: %" PRId64 "\n", r->events_stored);
  std::printf("HTA on the same file: python3 bench/import_bench_hta.py %s %.3f %.1f\n",
              trace.c_str(), static_cast<double>(n) / wall, held);
  return 0;
}
