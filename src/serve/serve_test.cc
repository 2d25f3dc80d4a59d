#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "base/files.h"
#include "base/test_dir.h"
#include "base/time.h"
#include "serve/answer_cache.h"
#include "serve/run_index.h"
#include "serve/server.h"

namespace trainprof::serve {
namespace {

std::string TempDir() { return MakeTestDir("trainprof_serve_test"); }

void MakeRun(const std::string& dir) {
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(dir, "run.json"),
                                  R"({"format_version": 1, "name": "r", "start_ns": 1})")
                  .ok());
}

TEST(RunIndexTest, FindsRunsUnderRootsWithoutFollowingSymlinks) {
  const std::string root = TempDir(), outside = TempDir();
  MakeRun(JoinPath(root, "a"));
  MakeRun(JoinPath(root, "team/b"));
  MakeRun(JoinPath(outside, "secret"));
  ASSERT_EQ(symlink(outside.c_str(), JoinPath(root, "link").c_str()), 0);
  RunIndex index({root});
  ASSERT_TRUE(index.Rescan().ok());
  std::vector<std::string> paths;
  for (const IndexedRun& r : index.Runs()) paths.push_back(r.path);
  std::sort(paths.begin(), paths.end());
  EXPECT_EQ(paths, (std::vector<std::string>{"a", "team/b"}));
  // Runs are named by id only; ids are stable and say nothing of the path.
  auto a = index.Find(RunId(0, "a"));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->dir, JoinPath(root, "a"));
  EXPECT_EQ(a->id.size(), 16u);
  EXPECT_FALSE(index.Find("../../etc/passwd").has_value());
  EXPECT_FALSE(index.Find(RunId(0, "link/secret")).has_value());
}

TEST(RunIndexTest, ARootThatIsARunIsServedAsOne) {
  const std::string root = TempDir();
  MakeRun(root);
  RunIndex index({root});
  ASSERT_TRUE(index.Rescan().ok());
  ASSERT_EQ(index.Runs().size(), 1u);
  EXPECT_EQ(index.Runs()[0].path, "");
}

TEST(ServerAddressTest, LoopbackOnlyWithoutAToken) {
  EXPECT_TRUE(IsLoopback("127.0.0.1"));
  EXPECT_TRUE(IsLoopback("localhost"));
  EXPECT_TRUE(IsLoopback("::1"));
  EXPECT_FALSE(IsLoopback("0.0.0.0"));
  EXPECT_FALSE(IsLoopback("10.0.0.5"));
  auto a = ParseAddress("[::1]:8787");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 8787);
  EXPECT_FALSE(ParseAddress("8787").ok());
  EXPECT_FALSE(ParseAddress("127.0.0.1:99999").ok());
  EXPECT_FALSE(ParseAddress("127.0.0.1:80x").ok());
  EXPECT_EQ(NewToken().size(), 32u);
  EXPECT_NE(NewToken(), NewToken());
}

}  // namespace
}  // namespace trainprof::serve

namespace trainprof::serve {
namespace {

// A clock the test moves; compute() advances it by its "cost".
struct FakeClock {
  std::atomic<int64_t> now{1'000'000'000};
  std::function<int64_t()> fn() {
    return [this] { return now.load(); };
  }
};

AnswerCache::Answer Body(const std::string& s) {
  return {200, std::make_shared<const std::string>(s)};
}

TEST(AnswerCacheTest, ComputesOncePerVersionAndCheapAnswersAreAlwaysFresh) {
  FakeClock clock;
  AnswerCache cache(AnswerCache::Policy{}, clock.fn());
  int computed = 0;
  auto make = [&](const std::string& s) {
    return [&, s] {
      ++computed;
      clock.now += 1'000'000;  // 1 ms: cheap
      return Body(s);
    };
  };
  const RunVersion v1{100, false}, v2{200, false};
  EXPECT_EQ(*cache.Get("k", v1, make("a")).body, "a");
  clock.now += 100'000'000;
  EXPECT_EQ(*cache.Get("k", v1, make("b")).body, "a");
  EXPECT_EQ(computed, 1);
  EXPECT_EQ(*cache.Get("k", v2, make("c")).body, "c");  // new data: recomputed at once
  EXPECT_EQ(computed, 2);
  clock.now += 5'000'000'001;  // older than max_age: recomputed (a status depends on the clock)
  EXPECT_EQ(*cache.Get("k", v2, make("d")).body, "d");
  EXPECT_EQ(computed, 3);
  EXPECT_EQ(cache.bytes(), 1);
}

TEST(AnswerCacheTest, AnExpensiveAnswerIsRefreshedAtMostEveryCostFactorTimesItsCost) {
  FakeClock clock;
  const AnswerCache::Policy policy;
  AnswerCache cache(policy, clock.fn());
  int computed = 0;
  const int64_t cost = 50'000'000;  // 50 ms: refreshed at most every 8 x 50 = 400 ms
  auto make = [&](const std::string& s) {
    return [&, s] {
      ++computed;
      clock.now += cost;
      return Body(s);
    };
  };
  EXPECT_EQ(*cache.Get("report", {1, false}, make("v1")).body, "v1");
  clock.now += 300'000'000;  // 300 ms later, new data: the kept answer
  EXPECT_EQ(*cache.Get("report", {2, false}, make("v2")).body, "v1");
  EXPECT_EQ(computed, 1);
  clock.now += 100'000'001;  // 400 ms since it was made: recomputed
  EXPECT_EQ(*cache.Get("report", {3, false}, make("v3")).body, "v3");
  EXPECT_EQ(computed, 2);
  // The run's end is shown at once, however recent the kept answer.
  EXPECT_EQ(*cache.Get("report", {3, true}, make("end")).body, "end");
  EXPECT_EQ(computed, 3);
  // The refresh interval is capped: a 1 s answer is still refreshed every second, not every 8.
  auto slow = [&] {
    ++computed;
    clock.now += 1'000'000'000;
    return Body("slow");
  };
  EXPECT_EQ(*cache.Get("big", {1, false}, slow).body, "slow");
  clock.now += policy.max_stale_ns + 1;
  EXPECT_EQ(*cache.Get("big", {2, false}, make("fresh")).body, "fresh");
}

TEST(AnswerCacheTest, OthersGetTheLastAnswerWhileOneComputesAndWaitOnlyWhenThereIsNone) {
  AnswerCache::Policy policy;
  policy.cost_factor = 0;  // the blocked computations look slow: no refresh interval here
  AnswerCache cache(policy, MonotonicNowNs);
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, release = false;
  std::atomic<int> computed{0};
  auto blocking = [&](const std::string& s) {
    return [&, s] {
      ++computed;
      std::unique_lock<std::mutex> lock(mu);
      started = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
      return Body(s);
    };
  };
  auto wait_started = [&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return started; });
  };
  // No answer yet: a second caller waits for the first one's and does not compute it again.
  std::thread first([&] { EXPECT_EQ(*cache.Get("k", {1, false}, blocking("one")).body, "one"); });
  wait_started();
  std::atomic<bool> second_done{false};
  std::thread second([&] {
    EXPECT_EQ(*cache.Get("k", {1, false}, blocking("again")).body, "one");
    second_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(second_done.load());
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  first.join();
  second.join();
  EXPECT_EQ(computed.load(), 1);
  // New data while one caller recomputes: the others get the previous answer without waiting.
  {
    std::lock_guard<std::mutex> lock(mu);
    started = release = false;
  }
  std::thread third([&] { EXPECT_EQ(*cache.Get("k", {2, false}, blocking("two")).body, "two"); });
  wait_started();
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(*cache.Get("k", {2, false}, blocking("never")).body, "one");
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  third.join();
  EXPECT_EQ(computed.load(), 2);
  EXPECT_EQ(*cache.Get("k", {2, false}, blocking("never")).body, "two");
}

TEST(AnswerCacheTest, BoundedInEntriesAndBytes) {
  FakeClock clock;
  AnswerCache::Policy policy;
  policy.max_entries = 4;
  policy.max_bytes = 100;
  AnswerCache cache(policy, clock.fn());
  for (int i = 0; i < 10; ++i) {
    (void)cache.Get("k" + std::to_string(i), {1, false}, [] { return Body("x"); });
    EXPECT_LE(cache.entries(), 4u);
  }
  for (int i = 0; i < 10; ++i) {
    (void)cache.Get("big" + std::to_string(i), {1, false},
                    [] { return Body(std::string(60, 'y')); });
    EXPECT_LE(cache.bytes(), policy.max_bytes + 60);  // dropped once past the bound
  }
}

}  // namespace
}  // namespace trainprof::serve
