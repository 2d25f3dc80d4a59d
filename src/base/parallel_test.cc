#include "base/parallel.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace trainprof {
namespace {

TEST(ParallelTest, EveryIndexOnceResultsInIndexOrder) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{1000}}) {
    std::vector<std::atomic<int>> calls(n);
    std::vector<size_t> out(n);
    ParallelFor(n, [&](size_t i) {
      calls[i].fetch_add(1);
      out[i] = i * i;
    });
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(calls[i].load(), 1) << i;
      EXPECT_EQ(out[i], i * i);
    }
  }
}

TEST(ParallelTest, BoundedByTheThreadCount) {
  std::mutex mu;
  std::set<std::thread::id> seen;
  std::atomic<int> running{0}, most{0};
  ParallelFor(64, [&](size_t) {
    const int now = running.fetch_add(1) + 1;
    int m = most.load();
    while (now > m && !most.compare_exchange_weak(m, now)) {
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    running.fetch_sub(1);
  });
  EXPECT_LE(most.load(), static_cast<int>(WorkerThreads()));
  EXPECT_LE(seen.size(), static_cast<size_t>(WorkerThreads()));
  EXPECT_GE(seen.size(), 1u);
}

TEST(ParallelTest, OneThreadRunsOnTheCaller) {
  const auto caller = std::this_thread::get_id();
  std::vector<size_t> order;
  ParallelFor(
      5,
      [&](size_t i) {
        EXPECT_EQ(std::this_thread::get_id(), caller);
        order.push_back(i);
      },
      /*max_threads=*/1);
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(ParallelTest, TrainprofThreadsLowersTheCount) {
  ::setenv("TRAINPROF_THREADS", "1", 1);
  EXPECT_EQ(WorkerThreads(), 1u);
  ::setenv("TRAINPROF_THREADS", "junk", 1);
  EXPECT_GE(WorkerThreads(), 1u);
  ::unsetenv("TRAINPROF_THREADS");
  EXPECT_LE(WorkerThreads(), kMaxWorkerThreads);
}

}  // namespace
}  // namespace trainprof
