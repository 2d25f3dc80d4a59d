#pragma once
// A small, bounded fork-join for work that splits naturally (one unit per node store, per rank):
// ParallelFor(n, fn) calls fn(0) ... fn(n - 1), each exactly once, on at most WorkerThreads()
// threads (the caller's thread is one of them), and returns when all are done. Units are handed
// out in index order from one counter; results belong in slots indexed by the unit, so the
// output order never depends on the schedule. No pool outlives the call.
//
// WorkerThreads(): std::thread::hardware_concurrency(), at most kMaxWorkerThreads, lowered by
// TRAINPROF_THREADS=N (1 runs everything on the caller's thread, as before threads were used).
// Threads: fn runs concurrently for different indexes; it must not touch shared state without
// its own synchronisation. An exception thrown by fn terminates the process (std::jthread).

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <thread>
#include <vector>

namespace trainprof {

inline constexpr unsigned kMaxWorkerThreads = 16;

inline unsigned WorkerThreads() {
  unsigned n = std::thread::hardware_concurrency();
  if (n == 0) n = 1;
  n = std::min(n, kMaxWorkerThreads);
  if (const char* env = std::getenv("TRAINPROF_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1) n = std::min(n, static_cast<unsigned>(v));
  }
  return n;
}

template <typename Fn>
void ParallelFor(size_t n, const Fn& fn, unsigned max_threads = 0) {
  if (n == 0) return;
  unsigned threads = max_threads == 0 ? WorkerThreads() : std::min(max_threads, WorkerThreads());
  threads = static_cast<unsigned>(std::min<size_t>(threads, n));
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  {
    std::vector<std::jthread> helpers;
    helpers.reserve(threads - 1);
    for (unsigned t = 1; t < threads; ++t) helpers.emplace_back(work);
    work();
  }  // the jthreads join here
}

}  // namespace trainprof
