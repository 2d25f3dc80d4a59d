#include "instrument/recorder.h"

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <system_error>
#include <thread>
#include <vector>

#include "base/files.h"
#include "base/test_child.h"
#include "instrument/recorder_blocks.h"
#include "model/data_quality.h"
#include "store/run_directory.h"
#include "store/run_reader.h"
#include "store/store_test_util.h"
#include "trainprof/trainprof.h"

namespace trainprof::instrument {
namespace {

using store::testing::MakeTempDir;

// A fresh process's first spans (RecorderTest.AFreshProcesssFirstSpanOnEachThreadTakesNoPageFault):
// this test binary run again with TRAINPROF_FIRST_SPAN_PROBE=<run dir> does this before main,
// where no function of it has been called yet, and exits with the page faults that four new
// threads took in their first RecordSpan (capped at 100; 101-103: it could not run).
int FirstSpanProbe(const char* dir) {
  RecorderOptions o;
  o.run_dir = dir;
  o.node = "n0";
  if (!Start(o).ok()) return 101;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the keeper's first pass
  int64_t faults = 0;
  for (int t = 0; t < 4; ++t) {
    std::thread([&] {
      rusage r0, r1;
      getrusage(RUSAGE_THREAD, &r0);
      RecordSpan("first", "user", "", model::kMissing, NowNs(), 1);
      getrusage(RUSAGE_THREAD, &r1);
      faults += (r1.ru_minflt - r0.ru_minflt) + (r1.ru_majflt - r0.ru_majflt);
    }).join();
  }
  if (!Stop().ok()) return 102;
  return static_cast<int>(std::min<int64_t>(faults, 100));
}

const int kFirstSpanProbe = [] {
  if (const char* dir = std::getenv("TRAINPROF_FIRST_SPAN_PROBE")) std::_Exit(FirstSpanProbe(dir));
  return 0;
}();

RecorderOptions Options(const std::string& dir) {
  RecorderOptions o;
  o.run_dir = dir;
  o.node = "n0";
  o.rank = 3;
  return o;
}

store::EventTable ReadEvents(const std::string& dir, std::vector<std::string> categories = {}) {
  auto reader = store::RunReader::Open(dir);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  store::EventQuery q;
  q.categories = std::move(categories);
  auto events = (*reader)->Events(q);
  EXPECT_TRUE(events.ok()) << events.status().message();
  return std::move(events).value();
}

TEST(RecorderTest, ManyThreadsSpansStepsAndMarksReachTheProcessStore) {
  const std::string dir = MakeTempDir("instr");
  ASSERT_TRUE(Start(Options(dir)).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i) {
        trainprof::Span s("work", "user");
      }
    });
  }
  for (int i = 0; i < 5; ++i) {
    trainprof::StepScope step("train");
    { trainprof::Span s("fwd", "forward"); }
    { trainprof::Span s("bwd", "backward"); }
    trainprof::Mark("m");
  }
  for (auto& t : threads) t.join();
  trainprof::Annotate("batch_size", "64");
  ASSERT_TRUE(Stop().ok());
  EXPECT_TRUE(PathExists(store::ProcessStorePath(dir, "n0", getpid())));
  EXPECT_TRUE(PathExists(store::RunJsonPath(dir)));

  auto user = ReadEvents(dir, {"user"});
  EXPECT_EQ(user.size(), 8000u);
  auto reader = std::move(store::RunReader::Open(dir)).value();
  auto steps = std::move(reader->Steps()).value();
  ASSERT_EQ(steps.size(), 5u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps.step[i], static_cast<int64_t>(i));
    EXPECT_EQ(steps.rank[i], 3);
    EXPECT_EQ(steps.pid[i], getpid());
    EXPECT_NE(steps.forward_ns[i], model::kMissing);
    EXPECT_NE(steps.backward_ns[i], model::kMissing);
    EXPECT_EQ(steps.data_wait_ns[i], model::kMissing);  // absent, not 0
  }
  auto marks = ReadEvents(dir, {"mark"});
  ASSERT_EQ(marks.size(), 5u);
  EXPECT_EQ(marks.kind[0], static_cast<uint8_t>(model::EventKind::kInstant));
  auto annotations = std::move(reader->Annotations()).value();
  bool found = false;
  for (const auto& [node, a] : annotations) found |= a.key == "batch_size" && a.value == "64";
  EXPECT_TRUE(found);
}

TEST(RecorderTest, FullBuffersDropAndCount) {
  const std::string dir = MakeTempDir("instr");
  RecorderOptions o = Options(dir);
  o.max_events_per_thread = 10;
  o.flush_interval_ns = 3600LL * 1000 * 1000 * 1000;  // no flush during the test
  ASSERT_TRUE(Start(o).ok());
  for (int i = 0; i < 100; ++i) RecordInstant("x", "user", "", model::kMissing, NowNs());
  ASSERT_TRUE(Stop().ok());
  auto reader = std::move(store::RunReader::Open(dir)).value();
  auto counters = std::move(reader->Counters()).value();
  EXPECT_EQ(counters[model::dq::kDroppedEvents], 90);
  EXPECT_EQ(ReadEvents(dir, {"user"}).size(), 10u);
}

// A burst from a new thread: 300 000 records (about 256 blocks, more than the spare blocks'
// floor from Start) with no flush (no refill) while it runs.
struct Burst {
  int64_t emitted = 0, stored = 0, dropped = 0, pool_empty_allocations = 0, counted = 0;
  int64_t no_block_drops = 0, faults = -1;
};
Burst RunBurst(bool bulk) {
  const std::string dir = MakeTempDir("instr");
  RecorderOptions o = Options(dir);
  o.flush_interval_ns = 3600LL * 1000 * 1000 * 1000;  // the flusher's first pass only
  o.max_events_per_thread = 400'000;
  EXPECT_TRUE(Start(o).ok());
  // The keeper's first pass runs as its thread starts; on a loaded machine that may be late
  // enough to fall inside the burst and size pools and spares from it. Let it pass first.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int64_t pool_empty_before = Stats().pool_empty_allocations;
  const int64_t no_block_before = Stats().no_block_drops;
  Burst b;
  b.emitted = 300'000;
  std::thread([&] {
    SetBulkWrites(bulk);
    RecordSpan("warm", "other", "", 0, NowNs(), 1);  // takes this thread's buffer
    rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    for (int64_t i = 0; i < b.emitted; ++i) RecordSpan("burst", "user", "", i, NowNs(), 1);
    getrusage(RUSAGE_THREAD, &r1);
    b.faults = (r1.ru_minflt - r0.ru_minflt) + (r1.ru_majflt - r0.ru_majflt);
  }).join();
  EXPECT_TRUE(Stop().ok());  // the counters are final once everything is drained
  const RecorderStats stats = Stats();
  b.dropped = stats.dropped_events;
  b.no_block_drops = stats.no_block_drops - no_block_before;
  b.pool_empty_allocations = stats.pool_empty_allocations - pool_empty_before;
  b.stored = static_cast<int64_t>(ReadEvents(dir, {"user"}).size());
  auto reader = std::move(store::RunReader::Open(dir)).value();
  b.counted = std::move(reader->Counters()).value()[model::dq::kDroppedEvents];
  return b;
}

TEST(RecorderTest, AThreadOutrunningItsPoolAndTheSparesDropsTheRestCountedWithoutAFault) {
  // The thread has its first block and the one or two prepared blocks of its pool (1 024 of
  // these records a block), then the process's spare blocks; with no refill during the burst
  // it runs out of prepared blocks after about 166 000 records. The rest is dropped
  // and counted, none written into a block allocated on the thread, whose every page would
  // fault there: stored + dropped = emitted, and the thread takes no page fault. (Until
  // 2026-12-05 it allocated those blocks itself; in the span load, 16 processes x 8 threads,
  // their pages made up to 229 calls over 10 us in a 30 s run.)
  const Burst b = RunBurst(/*bulk=*/false);
  EXPECT_EQ(b.stored + b.dropped, b.emitted);
  EXPECT_EQ(b.counted, b.dropped);
  EXPECT_EQ(b.no_block_drops, b.dropped);
  EXPECT_GT(b.dropped, 0);
  EXPECT_EQ(b.pool_empty_allocations, 0);
  // Everything the prepared blocks held was kept: the first block, the pool and the spares.
  const auto per_block =
      static_cast<int64_t>(recorder_blocks::kBlockBytes / recorder_blocks::RecordBytes(5, 4, 0, 0));
  EXPECT_GE(b.stored, (1 + recorder_blocks::kStartSpareBlocks) * per_block);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(b.faults, 0);
#endif
}

// `threads` new threads, started together, record `records` spans each flat out from Start,
// with no refill while they run (the keeper's first pass only). What they cost: the blocks
// allocated on them, their page faults (-1 under a sanitizer, whose shadow memory faults),
// and the spans stored.
struct StartBurst {
  int64_t allocated = 0, faults = 0, stored = 0;
};
StartBurst BurstFromStart(int threads, int records) {
  const std::string dir = MakeTempDir("instr");
  RecorderOptions o = Options(dir);
  o.flush_interval_ns = 3600LL * 1000 * 1000 * 1000;
  EXPECT_TRUE(Start(o).ok());
  const int64_t pool_empty_before = Stats().pool_empty_allocations;
  std::atomic<int64_t> faults{0};
  std::atomic<int> ready{0};
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&] {
      RecordSpan("warm", "user", "", 0, NowNs(), 1);  // takes this thread's buffer
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      rusage r0, r1;
      getrusage(RUSAGE_THREAD, &r0);
      for (int i = 0; i < records; ++i) RecordSpan("burst", "user", "", i, NowNs(), 1);
      getrusage(RUSAGE_THREAD, &r1);
      faults.fetch_add((r1.ru_minflt - r0.ru_minflt) + (r1.ru_majflt - r0.ru_majflt));
    });
  }
  for (auto& t : running) t.join();
  EXPECT_TRUE(Stop().ok());
  StartBurst b;
  b.allocated = Stats().pool_empty_allocations - pool_empty_before;
  b.stored = static_cast<int64_t>(ReadEvents(dir, {"user"}).size());
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  b.faults = faults.load();
#else
  b.faults = -1;
#endif
  return b;
}

TEST(RecorderTest, ABurstPastThePoolTakesSpareBlocksWithoutAllocatingOrFaulting) {
  // 75 000 records (about 73 blocks: a thread's first tens of milliseconds flat out) from a new
  // thread: past its first block and pool it takes the spare blocks the keeper prepared at
  // Start: nothing allocated on the thread, no page fault there, every record stored. (With 16
  // spare blocks and 50 000 records, 27 were allocated here: 16 processes of 8 threads
  // starting together took most of their page faults in their first 25 ms.)
  const StartBurst b = BurstFromStart(1, 75'000);
  EXPECT_EQ(b.allocated, 0);
  EXPECT_EQ(b.stored, 1 + 75'000);
  EXPECT_LE(b.faults, 0);
}

TEST(RecorderTest, EightThreadsStartingTogetherTakeSpareBlocksWithoutAllocatingOrFaulting) {
  // Eight threads, 20 000 records each (20 blocks): past their first block and pool they take
  // 8 x 18 = 144 spare blocks, more than kMinSpareBlocks and within the floor kept from Start.
  // Nothing allocated or dropped, no page fault on a thread. (With the floor of 80 from Start:
  // 104 580 of the 160 008 records stored, the rest dropped for want of a prepared block;
  // before such records were dropped, the threads allocated 56 blocks here themselves, and in
  // the span load, 16 processes x 8 threads, the page faults of such blocks made each run's
  // last calls over 10 us.)
  const StartBurst b = BurstFromStart(8, 20'000);
  EXPECT_EQ(b.allocated, 0);
  EXPECT_EQ(b.stored, 8 * (1 + 20'000));
  EXPECT_LE(b.faults, 0);
}

TEST(RecorderTest, TheSpareBlocksGrowWithWhatThreadsTakeAndShrinkOnceIdle) {
  // kStartSpareBlocks from Start, kMinSpareBlocks once the keeper has refilled for a flush
  // interval and recording is idle; four times the most that threads took from empty pools in
  // one refill period while they do (up to kSpareSlots); back to the floor once recording has
  // been idle again, as the demand halves each flush interval.
  const std::string dir = MakeTempDir("instr");
  RecorderOptions o = Options(dir);
  o.flush_interval_ns = 50'000'000;  // refills every 5 ms while threads take blocks
  ASSERT_TRUE(Start(o).ok());
  const int64_t floor = recorder_blocks::kMinSpareBlocks;
  EXPECT_EQ(Stats().spare_blocks, recorder_blocks::kStartSpareBlocks);
  auto wait_for_floor = [&] {
    int64_t now = -1;
    for (int i = 0; i < 400 && now != floor; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      now = Stats().spare_blocks;
    }
    return now;
  };
  EXPECT_EQ(wait_for_floor(), floor);
  // A burst past the thread's pool; the keeper reads what it took from the threads still
  // alive, so this one waits until the growth is seen.
  std::atomic<bool> checked{false};
  std::thread burst([&] {
    for (int i = 0; i < 120'000; ++i) RecordSpan("burst", "user", "", i, NowNs(), 1);
    while (!checked.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  int64_t grown = 0;
  for (int i = 0; i < 400 && grown <= floor; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    grown = Stats().spare_blocks;
  }
  checked.store(true);
  burst.join();
  EXPECT_GT(grown, floor);
  EXPECT_LE(grown, recorder_blocks::kSpareSlots);
  EXPECT_EQ(wait_for_floor(), floor);
  ASSERT_TRUE(Stop().ok());
  EXPECT_EQ(Stats().spare_blocks, 0);  // freed at Stop
  // What outran the keeper and the spare blocks was dropped and counted.
  EXPECT_EQ(static_cast<int64_t>(ReadEvents(dir, {"user"}).size()) + Stats().dropped_events,
            120'000);
}

TEST(RecorderTest, BulkWritesAllocateWhenThePoolIsEmptyUncounted) {
  const Burst b = RunBurst(/*bulk=*/true);
  EXPECT_EQ(b.stored, b.emitted);
  EXPECT_EQ(b.dropped, 0);
  EXPECT_EQ(b.no_block_drops, 0);
  EXPECT_EQ(b.pool_empty_allocations, 0);
}

TEST(RecorderTest, RecordingAtASteadyRateTakesNoPageFaultOnTheRecordingThread) {
  // 40 rounds of 3 000 records (2.6 blocks each) 20 ms apart, flushes every 100 ms: the pool
  // grows to what the thread takes and every block it takes has its pages mapped already.
  const std::string dir = MakeTempDir("instr");
  RecorderOptions o = Options(dir);
  o.flush_interval_ns = 100'000'000;
  ASSERT_TRUE(Start(o).ok());
  const int64_t pool_empty_before = Stats().pool_empty_allocations;
  int64_t faults = 0, late_pool_empty = 0;
  std::thread([&] {
    RecordSpan("warm", "user", "", 0, NowNs(), 1);  // takes this thread's buffer
    for (int round = 0; round < 40; ++round) {
      if (round == 10) late_pool_empty = Stats().pool_empty_allocations;
      rusage r0, r1;
      getrusage(RUSAGE_THREAD, &r0);
      for (int i = 0; i < 3000; ++i) RecordSpan("steady", "user", "", i, NowNs(), 1);
      getrusage(RUSAGE_THREAD, &r1);
      faults += (r1.ru_minflt - r0.ru_minflt) + (r1.ru_majflt - r0.ru_majflt);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }).join();
  ASSERT_TRUE(Stop().ok());
  const RecorderStats stats = Stats();
  const auto stored = static_cast<int64_t>(ReadEvents(dir, {"user"}).size());
  EXPECT_EQ(stored, 1 + 40 * 3000);
  EXPECT_EQ(stats.dropped_events, 0);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  // (Under a sanitizer every first write to memory also maps the sanitizer's shadow pages.)
  // Only blocks the thread allocated itself (its pool empty while it grew to the thread's rate,
  // or a refill delayed on a loaded machine) may fault.
  EXPECT_LE(faults, 20 * (stats.pool_empty_allocations - pool_empty_before));  // 16 pages a block
  if (stats.pool_empty_allocations == pool_empty_before) {
    EXPECT_EQ(faults, 0);
  }
#endif
  std::printf("faults %lld, pool-empty allocations %lld in the first 10 rounds, %lld after\n",
              static_cast<long long>(faults),
              static_cast<long long>(late_pool_empty - pool_empty_before),
              static_cast<long long>(stats.pool_empty_allocations - late_pool_empty));
}

TEST(RecorderTest, AFreshProcesssFirstSpanOnEachThreadTakesNoPageFault) {
  // The first call of a thread into the recorder runs code and reaches memory that no recording
  // thread has used before. Every page of it is mapped beforehand (its buffer and blocks by the
  // keeper) and every symbol it calls is bound when the program is loaded (linked with
  // -z now): with lazy binding, the process's first span ran the dynamic linker's lookup for
  // pthread_setspecific on the training thread (a page fault; 13 of the span load's 16
  // processes had a first call over 10 us).
  const std::string dir = MakeTempDir("instr");
  const std::string env = "TRAINPROF_FIRST_SPAN_PROBE=" + dir;
  char* argv[] = {const_cast<char*>("/proc/self/exe"), nullptr};
  char* envp[] = {const_cast<char*>(env.c_str()), nullptr};
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the probe died (status " << status << ")";
  const int code = WEXITSTATUS(status);
  ASSERT_LE(code, 100) << "the probe could not record (" << code << ")";
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(code, 0) << "page faults in four threads' first span";
#endif
  EXPECT_EQ(ReadEvents(dir, {"user"}).size(), 4u);
}

TEST(RecorderBlocksTest, StandardBlocksComeFromTheArenaAndGoBackWithTheirPages) {
  using recorder_blocks::Block;
  // Standard blocks: from the arena, page-aligned (a freed block's pages are its own).
  std::vector<Block*> blocks;
  for (int i = 0; i < 8; ++i)
    blocks.push_back(recorder_blocks::NewBlock(recorder_blocks::kBlockBytes));
  for (Block* b : blocks) {
    ASSERT_TRUE(recorder_blocks::InArena(b));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % recorder_blocks::kPageBytes, 0u);
    EXPECT_FALSE(b->prepared);
    EXPECT_EQ(b->capacity, recorder_blocks::kBlockBytes);
    EXPECT_EQ(b->committed.load(), 0u);
    EXPECT_EQ(b->next.load(), nullptr);
  }
  // Written, freed, taken again: the same memory, its pages given back (zero again) and the
  // header made anew.
  Block* b = blocks.back();
  blocks.pop_back();
  recorder_blocks::Prepare(b);
  std::memset(b->data(), 0x5a, recorder_blocks::kBlockBytes);
  b->committed.store(100);
  recorder_blocks::FreeBlock(b);
  Block* again = recorder_blocks::NewBlock(recorder_blocks::kBlockBytes);
  EXPECT_EQ(again, b);
  EXPECT_FALSE(again->prepared);
  EXPECT_EQ(again->committed.load(), 0u);
  size_t nonzero = 0;
  for (uint32_t i = 0; i < recorder_blocks::kBlockBytes; ++i) nonzero += again->data()[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  blocks.push_back(again);
  // A record larger than a block gets a block of its size from the heap.
  Block* large = recorder_blocks::NewBlock(recorder_blocks::kBlockBytes * 4);
  EXPECT_FALSE(recorder_blocks::InArena(large));
  EXPECT_EQ(large->capacity, recorder_blocks::kBlockBytes * 4);
  recorder_blocks::FreeBlock(large);
  for (Block* x : blocks) recorder_blocks::FreeBlock(x);
}

TEST(RecorderBlocksTest, APreparedBlockIsWrittenWithoutAPageFault) {
  // The keeper prepares arena blocks with one MADV_POPULATE_WRITE each (a byte written per
  // page where the kernel lacks it): either way, a thread writing the whole block afterwards
  // takes no page fault. Freed, its pages go back; taken and prepared again, the same.
  for (int round = 0; round < 2; ++round) {
    recorder_blocks::Block* b = recorder_blocks::NewPreparedBlock();
    ASSERT_TRUE(b->prepared);
    int64_t faults = -1;
    std::thread([&] {
      rusage r0, r1;
      getrusage(RUSAGE_THREAD, &r0);
      std::memset(b->data(), 0x3c, b->capacity);
      getrusage(RUSAGE_THREAD, &r1);
      faults = (r1.ru_minflt - r0.ru_minflt) + (r1.ru_majflt - r0.ru_majflt);
    }).join();
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    EXPECT_EQ(faults, 0) << "round " << round;
#endif
    recorder_blocks::FreeBlock(b);
  }
}

TEST(RecorderBlocksTest, ADrainTopsThePoolUpFromTheReserveAtOnce) {
  // The flusher, right after a drain, moves the drained blocks from the thread's reserve into
  // its pool up to the pool's size (2 + 4 x the thread's busiest refill period), allocating
  // nothing: a thread held at its event bound resumes at full speed the moment the drain lets
  // it, before the keeper's next refill. (Without it, in the span load's 30 s, the C++ threads
  // allocated 19-449 blocks themselves after the drains, and their pages faulted in.)
  using recorder_blocks::Block;
  auto buffer = recorder_blocks::MakeBuffer(1);
  recorder_blocks::ThreadBuffer* b = buffer.get();
  b->peak_blocks_per_refill = 5;  // pool size 2 + 4 x 5 = 22
  for (int i = 0; i < 30; ++i) {
    Block* drained = recorder_blocks::NewPreparedBlock();
    drained->committed.store(1000);
    b->reserve.push_back(drained);
  }
  const int64_t bytes = b->block_bytes.load();
  recorder_blocks::TopUpPool(b);
  EXPECT_EQ(b->pool_write.load() - b->pool_read.load(), 22u);
  EXPECT_EQ(b->reserve.size(), 9u);
  EXPECT_EQ(b->block_bytes.load(), bytes);
  for (uint64_t i = b->pool_read.load(); i < b->pool_write.load(); ++i) {
    Block* pooled = b->pool[i % recorder_blocks::kPoolSlots];
    EXPECT_EQ(pooled->committed.load(), 0u);
    EXPECT_EQ(pooled->next.load(), nullptr);
    EXPECT_TRUE(pooled->prepared);
  }
  // A full pool takes nothing more; an empty reserve adds nothing.
  recorder_blocks::TopUpPool(b);
  EXPECT_EQ(b->reserve.size(), 9u);
}

TEST(RecorderBlocksTest, ThreadsTakeAndFreeArenaBlocksTogether) {
  // Eight threads take and free blocks at once (the free list's lock is only tried on taking):
  // no block is handed out twice, and every one is in the arena.
  using recorder_blocks::Block;
  std::vector<std::vector<Block*>> held(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) {
        Block* b = recorder_blocks::NewBlock(recorder_blocks::kBlockBytes);
        b->data()[0] = static_cast<char>(t);
        if (round % 2 == 0) {
          held[static_cast<size_t>(t)].push_back(b);
        } else {
          recorder_blocks::FreeBlock(b);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<Block*> distinct;
  for (int t = 0; t < 8; ++t) {
    for (Block* b : held[static_cast<size_t>(t)]) {
      EXPECT_TRUE(recorder_blocks::InArena(b));
      EXPECT_EQ(b->data()[0], static_cast<char>(t));
      distinct.insert(b);
    }
  }
  EXPECT_EQ(distinct.size(), 8u * 100);
  for (Block* b : distinct) recorder_blocks::FreeBlock(b);
}

TEST(RecorderTest, FlusherMakesEventsDurableWithoutStop) {
  const std::string dir = MakeTempDir("instr");
  RecorderOptions o = Options(dir);
  o.flush_interval_ns = 50'000'000;
  ASSERT_TRUE(Start(o).ok());
  RecordSpan("a", "user", "", 1, NowNs(), 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(ReadEvents(dir, {"user"}).size(), 1u);  // read while the writer is live
  ASSERT_TRUE(Stop().ok());
}

// A forked child (a DataLoader worker) whose process can start no thread (a user at
// RLIMIT_NPROC, a container's pids limit) records on: its first event, which starts the
// child's flusher and pool keeper, neither throws nor aborts; the records wait in memory and
// its Stop writes them. (Before, std::system_error left the recording call: through a C
// extension's frames, the end of the process.) At RLIMIT_NPROC 1, as an unprivileged uid when
// this is root (root is exempt from the limit), in a run directory handed to that uid.
TEST(RecorderTest, AForkedChildThatCannotStartAThreadRecordsOnAndWritesAtStop) {
  const std::string dir = MakeTempDir("instr");
  ASSERT_TRUE(Start(Options(dir)).ok());
  RecordSpan("parent", "user", "", model::kMissing, NowNs(), 1);
  ASSERT_TRUE(FlushNow().ok());  // the parent's store is open before the directory changes hands
  const test_child::AtProcessLimit at = {.uid = 61001, .limit = 1, .threads_ok = 0};
  if (geteuid() == 0) {
    for (const std::string& d : {dir, dir + "/nodes", dir + "/nodes/n0"}) {
      ASSERT_EQ(chown(d.c_str(), at.uid, at.uid), 0) << d;
    }
  }
  constexpr int kChildSpans = 1000;
  const int code = test_child::RunAtProcessLimit(at, [&] {
    for (int i = 0; i < kChildSpans; ++i) {
      RecordSpan("child", "user", "", model::kMissing, NowNs(), 1);
    }
    return Stop().ok() ? 0 : 13;
  });
  ASSERT_EQ(code, 0) << test_child::Meaning(code) << " (13: the child's Stop failed)";
  ASSERT_TRUE(Stop().ok());
  auto events = ReadEvents(dir, {"user"});
  int64_t from_child = 0, from_parent = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    (events.pid[i] == getpid() ? from_parent : from_child) += 1;
  }
  EXPECT_EQ(from_child, kChildSpans);
  EXPECT_EQ(from_parent, 1);
}

// The same child when one more thread can be had (RLIMIT_NPROC 2): its flusher starts and its
// pool keeper does not, so the flusher puts the drained blocks back into the pools after each
// drain. 1.6 million records in 16 rounds, each drained before the next: none dropped. (Without
// that, the drained blocks piled up in the thread's reserve until its 64 MiB bound, about 1.2
// million records, and every record after was dropped.)
TEST(RecorderTest, AForkedChildWithAFlusherButNoKeeperLosesNothing) {
  if (geteuid() != 0) {
    // A user's own processes count against the limit too: only a uid of the test's own gives
    // an exact count.
    GTEST_SKIP() << "needs root, to run the child as a uid of its own";
  }
  const std::string dir = MakeTempDir("instr");
  RecorderOptions o = Options(dir);
  o.flush_interval_ns = 20'000'000;
  ASSERT_TRUE(Start(o).ok());
  ASSERT_TRUE(FlushNow().ok());  // the parent's store is open before the directory changes hands
  // This process and one thread.
  const test_child::AtProcessLimit at = {.uid = 61002, .limit = 2, .threads_ok = 1};
  for (const std::string& d : {dir, dir + "/nodes", dir + "/nodes/n0"}) {
    ASSERT_EQ(chown(d.c_str(), at.uid, at.uid), 0) << d;
  }
  constexpr int kRounds = 16, kPerRound = 100'000;
  const int code = test_child::RunAtProcessLimit(at, [&] {
    for (int round = 0; round < kRounds; ++round) {
      for (int i = 0; i < kPerRound; ++i) {
        RecordSpan("child", "user", "", round, NowNs(), 1);
      }
      const int64_t want = static_cast<int64_t>(round + 1) * kPerRound;
      for (int wait = 0; wait < 500 && Stats().written_events < want; ++wait) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (!Stop().ok()) return 13;
    const RecorderStats stats = Stats();
    if (stats.dropped_events != 0) return 14;
    return stats.written_events == int64_t{kRounds} * kPerRound ? 0 : 15;
  });
  EXPECT_EQ(code, 0) << test_child::Meaning(code)
                     << " (13: Stop failed; 14: records were dropped; 15: not all written)";
  ASSERT_TRUE(Stop().ok());
}

TEST(RecorderTest, ForkedChildWritesItsOwnStoreAndNeverTheParents) {
  const std::string dir = MakeTempDir("instr");
  ASSERT_TRUE(Start(Options(dir)).ok());
  RecordSpan("parent_before", "user", "", model::kMissing, NowNs(), 1);
  pid_t child = fork();
  if (child == 0) {
    // Buffered parent events must not be written twice; the child's own event goes to its file.
    RecordSpan("child", "user", "", model::kMissing, NowNs(), 1);
    Status st = FlushNow();
    _exit(st.ok() ? 0 : 1);  // no atexit: like a DataLoader worker killed at the end
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  RecordSpan("parent_after", "user", "", model::kMissing, NowNs(), 1);
  ASSERT_TRUE(Stop().ok());
  EXPECT_TRUE(PathExists(store::ProcessStorePath(dir, "n0", child)));
  auto events = ReadEvents(dir, {"user"});
  ASSERT_EQ(events.size(), 3u);
  int child_events = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string& name = events.names.at(events.name[i]);
    if (name == "child") {
      ++child_events;
      EXPECT_EQ(events.pid[i], child);
      // the child's only thread has its own id (not the forking thread's, cached before)
      EXPECT_EQ(events.tid[i], child);
    } else {
      EXPECT_EQ(events.pid[i], getpid());
      EXPECT_EQ(events.tid[i], static_cast<int64_t>(gettid()));
    }
  }
  EXPECT_EQ(child_events, 1);
}

TEST(RecorderTest, AForkLeavesTheParentsBlocksToItWithoutCopyOnWrite) {
  // A DataLoader worker is forked (each epoch, unless its workers persist) while the parent's
  // threads record: the parent's threads then write on into their blocks. Shared copy-on-write
  // with the child, every page of those blocks cost the parent's training thread a page fault
  // (a copy) at its first write after the fork. The block arena is wiped in the child instead
  // (MADV_WIPEONFORK; the child never reads the parent's records): the parent keeps its pages.
  const std::string dir = MakeTempDir("instr");
  RecorderOptions o = Options(dir);
  o.flush_interval_ns = 3600LL * 1000 * 1000 * 1000;  // no drain in between
  ASSERT_TRUE(Start(o).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the keeper's first pass
  std::atomic<int> phase{0};
  int64_t faults = -1;
  std::thread recording([&] {
    // Its buffer, the first block started, and its stack as deep as the loop below needs it.
    for (int i = 0; i < 10; ++i) RecordSpan("before", "user", "", i, NowNs(), 1);
    rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    phase.store(1);
    while (phase.load() != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    getrusage(RUSAGE_THREAD, &r0);  // the stack page it lives on copied once here
    for (int i = 0; i < 3000; ++i) RecordSpan("after", "user", "", i, NowNs(), 1);
    getrusage(RUSAGE_THREAD, &r1);
    faults = (r1.ru_minflt - r0.ru_minflt) + (r1.ru_majflt - r0.ru_majflt);
  });
  while (phase.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  phase.store(2);
  recording.join();
  ASSERT_TRUE(Stop().ok());
  EXPECT_EQ(ReadEvents(dir, {"user"}).size(), 3010u);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  // About 3 blocks written: 48 pages. What may still be copied: the thread's buffer's own
  // pages (heap, not arena) and its stack.
  EXPECT_LE(faults, 4);
#endif
  std::printf("page faults in 3 000 records after a fork: %lld\n", static_cast<long long>(faults));
}

TEST(RecorderTest, StepInsideStepIsIgnoredNotFatal) {
  const std::string dir = MakeTempDir("instr");
  ASSERT_TRUE(Start(Options(dir)).ok());
  {
    trainprof::StepScope outer("train", 7);
    trainprof::StepScope inner("train", 8);
  }
  ASSERT_TRUE(Stop().ok());
  auto steps = ReadEvents(dir, {"step"});
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps.step[0], 7);
}

TEST(RecorderTest, StartFailsClearlyOnAnUnwritableDirectory) {
  RecorderOptions o;
  o.run_dir = "/proc/trainprof-cannot-write-here";
  Status st = Start(o);
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(Active());
  RecordSpan("ignored", "user", "", 0, 0, 0);  // a no-op while stopped
}

TEST(RecorderTest, ThreadsWritingWhileTheFlusherDrainsLoseAndRepeatNothing) {
  // Four threads append records of every size (some larger than a block) while the flusher
  // drains every millisecond: the single-producer / single-consumer block chains must hand
  // over each record exactly once, intact, in each thread's order. Bulk writes: the pools the
  // flusher refills every 0.1 ms are used first, and a thread that outruns its pool allocates
  // (rather than drops), so that every record can be checked.
  const std::string dir = MakeTempDir("instr");
  RecorderOptions o = Options(dir);
  o.flush_interval_ns = 1'000'000;
  o.max_events_per_thread = 1 << 22;
  ASSERT_TRUE(Start(o).ok());
  constexpr int kThreads = 4, kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      SetBulkWrites(true);
      for (int i = 0; i < kPerThread; ++i) {
        // args from a few bytes to 100 KB (every 5000th), so blocks of every kind are used
        const size_t pad = i % 5000 == 4999 ? 100'000 : static_cast<size_t>(i % 300);
        const std::string args = "{\"t\":" + std::to_string(t) + ",\"i\":" + std::to_string(i) +
                                 ",\"p\":\"" + std::string(pad, 'x') + "\"}";
        RecordSpan("r" + std::to_string(t), "user", "train", i, NowNs(), i, args);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(Stop().ok());
  EXPECT_EQ(Stats().dropped_events, 0);
  auto ev = ReadEvents(dir, {"user"});
  ASSERT_EQ(ev.size(), static_cast<size_t>(kThreads * kPerThread));
  std::vector<int64_t> next(kThreads, 0);
  // Events come back in start order; within one thread that is its append order.
  for (size_t k = 0; k < ev.size(); ++k) {
    const int t = ev.names.at(ev.name[k])[1] - '0';
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    const int64_t i = ev.step[k];
    ASSERT_EQ(i, next[t]) << "thread " << t;
    ++next[t];
    EXPECT_EQ(ev.duration_ns[k], i);
    const size_t pad = i % 5000 == 4999 ? 100'000 : static_cast<size_t>(i % 300);
    ASSERT_EQ(ev.args[k].size(), pad + std::to_string(t).size() + std::to_string(i).size() + 18)
        << ev.args[k].substr(0, 40);
  }
}

TEST(RecorderTest, MemoryBoundAndOversizedRecordsDropAndCount) {
  const std::string dir = MakeTempDir("instr");
  RecorderOptions o = Options(dir);
  o.flush_interval_ns = 3600LL * 1000 * 1000 * 1000;  // only the flusher's first drain
  ASSERT_TRUE(Start(o).ok());
  // The flusher's first drain (it opens the store) must be over before the burst: a drain in
  // the middle of it frees the bound, and all 100 fit (seen once in a loaded ctest run).
  for (int i = 0; i < 10000 && Stats().flushes == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(Stats().flushes, 1);
  const std::string mib(1 << 20, 'a');
  // 100 records of 1 MiB in a burst: the thread's 64 MiB bound drops some of them.
  for (int i = 0; i < 100; ++i) RecordInstant("big", "user", "", i, NowNs(), mib);
  // One record over 16 MiB is never buffered.
  RecordInstant("huge", "user", "", 0, NowNs(), std::string(17 << 20, 'b'));
  const int64_t dropped = Stats().dropped_events;
  ASSERT_TRUE(Stop().ok());
  auto ev = ReadEvents(dir, {"user"});
  for (size_t k = 0; k < ev.size(); ++k) {
    EXPECT_EQ(ev.names.at(ev.name[k]), "big");
    EXPECT_EQ(ev.args[k].size(), mib.size());
  }
  EXPECT_LT(ev.size(), 100u);
  EXPECT_GE(ev.size(), 60u);
  EXPECT_EQ(dropped, static_cast<int64_t>(101 - ev.size()));
  auto reader = std::move(store::RunReader::Open(dir)).value();
  EXPECT_EQ(std::move(reader->Counters()).value()[model::dq::kDroppedEvents], dropped);
}

}  // namespace
}  // namespace trainprof::instrument
