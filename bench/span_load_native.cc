// The span load of bench/span_load.py without Python (issue 20): THREADS threads call
// instrument::RecordSpan, the recorder's hot path under every span and hook, as fast as they
// can for SECONDS. With no GIL in the timed window, a voluntary context switch inside a call
// can only be the recorder blocking (a lock, a futex, a sleeping syscall), so this separates
// trainprof's own blocking from Python's, which the Python load cannot.
//
// Per call: CLOCK_MONOTONIC around the call alone, getrusage(RUSAGE_THREAD) just outside it; a
// call over 10 us is put down to a voluntary switch, an involuntary one (preempted), page faults
// without a switch, or none of these (interrupts, the hypervisor). CONTROL=1 times a no-op call
// (an opaque function that returns) instead. Prints one JSON line in span_load.py's
// per-process format; span_load.py --native runs it and reads the run back.
//
// Usage: span_load_native RUN_DIR THREADS SECONDS CONTROL

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "instrument/recorder.h"
#include "model/event.h"

namespace {

namespace instrument = trainprof::instrument;

constexpr int64_t kBucketsNs[] = {1'000,  2'000,   5'000,     10'000,    20'000,
                                  50'000, 100'000, 1'000'000, 10'000'000};
constexpr size_t kBuckets = sizeof(kBucketsNs) / sizeof(kBucketsNs[0]);

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The control's call: not inlined, so that it is a call like RecordSpan.
[[gnu::noinline]] void NoOp(int64_t a, int64_t b) { asm volatile("" : : "r"(a), "r"(b)); }

struct ThreadResult {
  int64_t calls = 0, max_ns = 0;
  int64_t hist[kBuckets + 1] = {};
  int64_t blocked = 0, preempted = 0, faulted = 0, neither = 0;
  int64_t faulted_max_ns = 0, neither_max_ns = 0;
};

int64_t StatusKib(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = field;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + key.size());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s RUN_DIR THREADS SECONDS CONTROL\n", argv[0]);
    return 2;
  }
  const std::string run_dir = argv[1];
  const int threads = std::atoi(argv[2]);
  const double seconds = std::atof(argv[3]);
  const bool control = std::atoi(argv[4]) != 0;
  if (!control) {
    instrument::RecorderOptions o;
    o.run_dir = run_dir;
    o.node = "load";
    auto st = instrument::Start(o);
    if (!st.ok()) {
      std::fprintf(stderr, "start: %s\n", st.message().c_str());
      return 1;
    }
  }
  std::vector<ThreadResult> results(static_cast<size_t>(threads));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      ThreadResult& r = results[static_cast<size_t>(t)];
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      const int64_t deadline = MonoNs() + static_cast<int64_t>(seconds * 1e9);
      rusage r0, r1;
      while (true) {
        getrusage(RUSAGE_THREAD, &r0);
        const int64_t t0 = MonoNs();
        if (control) {
          NoOp(t0, t0);
        } else {
          instrument::RecordSpan("load", "user", "", trainprof::model::kMissing,
                                 t0 + instrument::ClockOffsetNs(), 1000);
        }
        const int64_t t1 = MonoNs();
        getrusage(RUSAGE_THREAD, &r1);
        ++r.calls;
        const int64_t d = t1 - t0;
        r.max_ns = std::max(r.max_ns, d);
        size_t i = 0;
        while (i < kBuckets && d > kBucketsNs[i]) ++i;
        ++r.hist[i];
        if (d > 10'000) {
          if (r1.ru_nvcsw > r0.ru_nvcsw) {
            ++r.blocked;
          } else if (r1.ru_nivcsw > r0.ru_nivcsw) {
            ++r.preempted;
          } else if (r1.ru_minflt > r0.ru_minflt || r1.ru_majflt > r0.ru_majflt) {
            ++r.faulted;
            r.faulted_max_ns = std::max(r.faulted_max_ns, d);
          } else {
            ++r.neither;
            r.neither_max_ns = std::max(r.neither_max_ns, d);
          }
        }
        if ((r.calls & 1023) == 0 && t1 > deadline) break;
      }
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const int64_t rss_start = StatusKib("VmRSS:");
  go.store(true);
  std::this_thread::sleep_for(std::chrono::duration<double>(std::min(1.0, seconds / 2)));
  const int64_t rss_first = StatusKib("VmRSS:");
  for (auto& w : workers) w.join();
  const int64_t rss_last = StatusKib("VmRSS:");
  std::ostringstream stats;
  stats << "{}";
  if (!control) {
    auto st = instrument::Stop();  // flushes everything: the counters are final
    if (!st.ok()) std::fprintf(stderr, "stop: %s\n", st.message().c_str());
    const instrument::RecorderStats s = instrument::Stats();
    stats.str("");
    stats << "{\"dropped_events\": " << s.dropped_events
          << ", \"pool_empty_allocations\": " << s.pool_empty_allocations
          << ", \"no_block_drops\": " << s.no_block_drops
          << ", \"written_events\": " << s.written_events << ", \"flushes\": " << s.flushes
          << ", \"flush_cpu_ns\": " << s.flush_cpu_ns << "}";
  }
  std::ostringstream out;
  out << "{\"pid\": " << getpid() << ", \"threads\": [";
  for (size_t t = 0; t < results.size(); ++t) {
    const ThreadResult& r = results[t];
    out << (t ? ", " : "") << "{\"calls\": " << r.calls << ", \"max_ns\": " << r.max_ns
        << ", \"hist\": [";
    for (size_t i = 0; i <= kBuckets; ++i) out << (i ? ", " : "") << r.hist[i];
    out << "], \"slow\": {\"blocked\": " << r.blocked << ", \"preempted\": " << r.preempted
        << ", \"faulted\": " << r.faulted << ", \"neither\": " << r.neither
        << ", \"faulted_max_ns\": " << r.faulted_max_ns
        << ", \"neither_max_ns\": " << r.neither_max_ns << "}}";
  }
  out << "], \"stats\": " << stats.str() << ", \"rss_start_kib\": " << rss_start
      << ", \"rss_first_kib\": " << rss_first << ", \"rss_last_kib\": " << rss_last
      << ", \"peak_rss_kib\": " << StatusKib("VmHWM:") << "}";
  std::printf("%s\n", out.str().c_str());
  return 0;
}
