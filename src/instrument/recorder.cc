#include "instrument/recorder.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "base/files.h"
#include "base/logging.h"
#include "base/platform.h"
#include "base/time.h"
#include "instrument/recorder_blocks.h"
#include "model/data_quality.h"
#include "model/run_metadata.h"
#include "store/node_store_writer.h"
#include "store/run_directory.h"
#include "trainprof/version.h"

namespace trainprof::instrument {
namespace {

using recorder_blocks::Block;
using recorder_blocks::FreeBlock;
using recorder_blocks::kBlockBytes;
using recorder_blocks::kHeaderBytes;
using recorder_blocks::kMaxRecordBytes;
using recorder_blocks::kMinPoolBlocks;
using recorder_blocks::kRefillsPerInterval;
using recorder_blocks::MakeBuffer;
using recorder_blocks::RecordBytes;
using recorder_blocks::RecordHeader;
using recorder_blocks::ThreadBuffer;

// Buffers kept ready for threads' first events.
constexpr int kReadyBuffers = 8;

struct State {
  std::mutex lifecycle_mu;  // Start/Stop
  std::atomic<bool> active{false};
  std::atomic<int64_t> clock_offset_ns{0};
  std::atomic<int64_t> rank{model::kMissing};
  std::atomic<int64_t> local_rank{model::kMissing};
  std::atomic<int64_t> world_size{model::kMissing};
  std::atomic<int64_t> recorded{0};
  std::atomic<int64_t> dropped{0};
  std::atomic<int64_t> written{0};
  std::atomic<int64_t> flushes{0};
  std::atomic<int64_t> flush_cpu_ns{0};  // CPU time spent draining and writing, all flushes
  int64_t carried_dropped = 0;  // drops not yet stored (the store failed to open); flush_mu
  std::atomic<bool> flusher_running{false};  // the flusher and the pool keeper both run
  std::atomic<bool> keeper_running{false};   // the pool keeper runs
  // Pools and spare blocks sized since Start (or since the fork): until then a thread that
  // finds no prepared block allocates one rather than drop its record.
  std::atomic<bool> keeper_refilled{false};
  // With a thread missing (none could be started), the next attempt (flusher_mu).
  std::chrono::steady_clock::time_point threads_retry_at{};
  std::atomic<int64_t> pid{0};
  RecorderOptions options;
  std::string node;  // sanitized later by the store
  model::NodeInfo node_info;

  // The registry of thread buffers and the process-level extras; registry_mu is held in
  // pthread_atfork's prepare so a child never inherits it locked by another thread.
  std::mutex registry_mu;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::vector<std::pair<std::string, std::string>> annotations;  // key, value (ts at flush)
  std::vector<int64_t> annotation_ts;
  std::map<std::string, int64_t> counters;
  std::map<std::string, std::string> meta;

  // Owned by the flusher side; only the process that opened it touches it.
  std::unique_ptr<store::NodeStoreWriter> writer;
  std::mutex flush_mu;  // serializes drains (flusher thread, FlushNow, Stop)
  std::thread* flusher = nullptr;
  // The pool keeper: refills the threads' pools (and the ready buffers) between drains, on a
  // thread of its own so that a slow store write never holds refills up.
  std::thread* refiller = nullptr;
  std::mutex pool_mu;     // the pools' flusher side: reserves, refill bookkeeping
  std::mutex flusher_mu;  // with flusher_cv: both threads' sleeps and stop_flusher
  std::condition_variable flusher_cv;
  bool stop_flusher = false;

  // Buffers the flusher made for threads' first events (also in `buffers`); a thread takes one
  // by exchanging its slot with null.
  std::atomic<ThreadBuffer*> ready[kReadyBuffers] = {};
  std::atomic<int64_t> buffers_taken{0};           // first events since the flusher last looked
  std::atomic<int64_t> allocated_removed{0};       // `allocated` of buffers no longer registered
  std::atomic<int64_t> no_block_drops_removed{0};  // and their `no_block_drops`
  recorder_blocks::SparePool spares;               // taken by threads; refilled under pool_mu
  // Refills in a row at which no thread took a block (pool_mu): the keeper refills
  // kRefillsPerInterval times per flush interval until a whole interval has passed so (and
  // from its start), else once per interval.
  int64_t idle_refills = 0;
};

State& S() {
  static State* state = new State();  // never destroyed: threads may record during exit
  return *state;
}

// The kernel thread id, cached per thread; a forked child's only thread has a new one, so the
// fork handler clears the cache (it runs on that thread).
thread_local int64_t t_tid = 0;

int64_t CurrentTid() {
  if (t_tid == 0) t_tid = platform::CurrentThreadId();
  return t_tid;
}

// The calling thread's buffer, taken on first use. The hot path reads two trivial
// thread_locals (direct TLS loads). A thread-specific key, whose destructor marks the buffer at
// thread exit so that the flusher lets it go once drained, is set on the slow path only
// (pthread_setspecific stores into the thread's own table: no allocation).
thread_local ThreadBuffer* t_buffer = nullptr;
thread_local int64_t t_owner_pid = 0;
thread_local bool t_exited = false;

void MarkThreadExited(void* buffer) {
  t_buffer = nullptr;
  t_exited = true;  // a record from a later destructor is dropped
  static_cast<ThreadBuffer*>(buffer)->thread_exited.store(true, std::memory_order_release);
}

pthread_key_t ExitKey() {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    TP_CHECK(pthread_key_create(&k, MarkThreadExited) == 0);
    return k;
  }();
  return key;
}

void EnsureFlusher();

// First use in this thread, or first use in a forked child (the registry was reset there): a
// buffer the flusher made ready (no lock, no allocation), else one made here.
[[gnu::noinline]] ThreadBuffer* NewLocalBuffer(int64_t pid) {
  if (t_exited) return nullptr;
  State& s = S();
  ThreadBuffer* buffer = nullptr;
  for (auto& slot : s.ready) {
    buffer = slot.exchange(nullptr, std::memory_order_acq_rel);
    if (buffer != nullptr) break;
  }
  if (buffer == nullptr) {
    auto made = MakeBuffer(kMinPoolBlocks);
    buffer = made.get();
    std::lock_guard<std::mutex> lock(s.registry_mu);
    s.buffers.push_back(std::move(made));
  }
  buffer->tid.store(CurrentTid(), std::memory_order_relaxed);
  pthread_setspecific(ExitKey(), buffer);
  t_buffer = buffer;
  t_owner_pid = pid;
  s.buffers_taken.fetch_add(1, std::memory_order_relaxed);
  EnsureFlusher();  // a forked child's first event starts its flusher
  return t_buffer;
}

inline ThreadBuffer* LocalBuffer() {
  const int64_t pid = S().pid.load(std::memory_order_relaxed);
  if (t_buffer != nullptr && t_owner_pid == pid) [[likely]] {
    return t_buffer;
  }
  return NewLocalBuffer(pid);
}

void FlusherLoop();
void RefillerLoop();

// Starts the flusher and the pool keeper if this process lacks them (the first Start, or a
// forked child's first event). Cheap when both run.
//
// Where no thread can be started (a user at RLIMIT_NPROC, a container's pids limit), the job
// goes on, and no exception ever reaches the caller's thread: without the flusher, records
// wait in their buffers (within their bounds; past them dropped and counted) until Stop writes
// them; without the keeper, the flusher refills the pools after each drain and threads take
// spare blocks, then allocate their own. The missing thread is tried again at most once per
// flush interval, from a recording thread's next block or the flusher's next drain.
void EnsureFlusher() {
  State& s = S();
  if (s.flusher_running.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(s.flusher_mu);
  if (s.flusher_running.load(std::memory_order_relaxed)) return;
  // Not after Stop: a thread's first event racing with Stop must not start a flusher that
  // nothing would stop (a forked child of an active recorder is still active).
  if (!s.active.load(std::memory_order_acquire)) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < s.threads_retry_at) return;
  if (s.flusher == nullptr && s.refiller == nullptr) s.stop_flusher = false;
  if (s.flusher == nullptr) {
    try {
      s.flusher = new std::thread(FlusherLoop);
    } catch (const std::system_error& e) {
      TP_LOG_ONCE(LogLevel::kWarning,
                  std::string("recorder: cannot start its flusher thread (") + e.what() +
                      "): records are kept in memory within their bounds and written at stop");
    }
  }
  if (s.refiller == nullptr) {
    try {
      s.refiller = new std::thread(RefillerLoop);
      s.keeper_running.store(true, std::memory_order_release);
    } catch (const std::system_error& e) {
      TP_LOG_ONCE(LogLevel::kWarning,
                  std::string("recorder: cannot start its pool keeper (") + e.what() +
                      "): pools are refilled after each drain, and threads allocate blocks");
    }
  }
  const bool both = s.flusher != nullptr && s.refiller != nullptr;
  if (!both) s.threads_retry_at = now + std::chrono::nanoseconds(s.options.flush_interval_ns);
  s.flusher_running.store(both, std::memory_order_release);
}

// Bulk mode (SetBulkWrites): this thread allocates a block when its pool is empty.
thread_local bool t_bulk = false;

// Refills every live thread's pool and the ready buffers (pool_mu held). Returns whether any
// thread took blocks or a ready buffer since the last call: then the flusher comes back
// sooner than the next drain.
bool RefillLocked(const std::vector<std::shared_ptr<ThreadBuffer>>& buffers) {
  State& s = S();
  bool busy = s.buffers_taken.exchange(0, std::memory_order_relaxed) > 0;
  const bool idle = s.idle_refills >= kRefillsPerInterval;
  for (const auto& b : buffers) {
    if (b->thread_exited.load(std::memory_order_acquire)) continue;
    busy = recorder_blocks::RefillPool(b.get(), idle, s.spares) || busy;
  }
  for (auto& slot : s.ready) {
    if (slot.load(std::memory_order_acquire) != nullptr) continue;
    auto made = MakeBuffer(1);
    ThreadBuffer* raw = made.get();
    {
      std::lock_guard<std::mutex> lock(s.registry_mu);
      s.buffers.push_back(std::move(made));
    }
    slot.store(raw, std::memory_order_release);
  }
  s.spares.Refill(!busy && idle);
  s.keeper_refilled.store(true, std::memory_order_relaxed);
  return busy;
}

bool RefillLocked() {
  State& s = S();
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  {
    std::lock_guard<std::mutex> lock(s.registry_mu);
    buffers = s.buffers;
  }
  return RefillLocked(buffers);
}

void NoteRefill(bool busy) {
  State& s = S();
  s.idle_refills = busy ? 0 : s.idle_refills + 1;
}

inline void Drop(ThreadBuffer* b) { b->dropped.fetch_add(1, std::memory_order_relaxed); }

// The hot path: one record appended to the calling thread's block chain.
void Append(model::EventKind kind, std::string_view name, std::string_view category,
            std::string_view mode, int64_t step, int64_t start_ns, int64_t duration_ns,
            std::string_view args, int64_t tid) {
  State& s = S();
  // Acquire: the options Start wrote before setting active are read below.
  if (!s.active.load(std::memory_order_acquire)) return;
  ThreadBuffer* b = LocalBuffer();
  if (b == nullptr) return;
  const int64_t produced = b->produced.load(std::memory_order_relaxed);
  if (produced - b->consumed.load(std::memory_order_relaxed) >= s.options.max_events_per_thread) {
    Drop(b);
    return;
  }
  name = name.substr(0, 0xFFFF);
  category = category.substr(0, 0xFF);
  mode = mode.substr(0, 0xFF);
  const size_t need = RecordBytes(name.size(), category.size(), mode.size(), args.size());
  if (need > kMaxRecordBytes) {
    Drop(b);
    return;
  }
  if (b->tail_pos + need > b->tail->capacity) {
    // A thread could not be started so far: try again (at most once per flush interval).
    if (!s.flusher_running.load(std::memory_order_relaxed)) [[unlikely]]
      EnsureFlusher();
    const bool allocate = !s.keeper_running.load(std::memory_order_relaxed) ||
                          !s.keeper_refilled.load(std::memory_order_relaxed);
    Block* next = recorder_blocks::TakeBlock(b, need, t_bulk, allocate, s.spares);
    if (next == nullptr) {
      Drop(b);
      return;
    }
    b->tail->next.store(next, std::memory_order_release);
    b->tail = next;
    b->tail_pos = 0;
  }
  char* p = b->tail->data() + b->tail_pos;
  RecordHeader h;
  h.start_ns = start_ns;
  h.duration_ns = duration_ns;
  h.step = step;
  h.tid = tid;
  h.args_len = static_cast<uint32_t>(args.size());
  h.name_len = static_cast<uint16_t>(name.size());
  h.category_len = static_cast<uint8_t>(category.size());
  h.mode_len = static_cast<uint8_t>(mode.size());
  h.kind = static_cast<uint8_t>(kind);
  std::memcpy(p, &h, sizeof h);
  p += kHeaderBytes;
  std::memcpy(p, name.data(), name.size());
  p += name.size();
  std::memcpy(p, category.data(), category.size());
  p += category.size();
  std::memcpy(p, mode.data(), mode.size());
  p += mode.size();
  if (!args.empty()) std::memcpy(p, args.data(), args.size());
  b->tail_pos += static_cast<uint32_t>(need);
  b->produced.store(produced + 1, std::memory_order_relaxed);
  b->tail->committed.store(b->tail_pos, std::memory_order_release);
}

// The node's facts (host, cores, memory, CPU model), read when the store is first opened.
model::NodeInfo NodeInfoFor(State& s) {
  if (s.node_info.node.empty()) s.node_info = model::DetectLocalNode(s.node);
  return s.node_info;
}

// Moves every buffer into the writer (opening it lazily: a forked child opens its own file) and
// flushes. Called with flush_mu held.
int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

Status DrainLocked(bool final_flush) {
  State& s = S();
  const int64_t cpu0 = ThreadCpuNs();
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::vector<bool> exited;
  std::vector<std::pair<std::string, std::string>> annotations;
  std::vector<int64_t> annotation_ts;
  std::map<std::string, int64_t> counters;
  std::map<std::string, std::string> meta;
  {
    std::lock_guard<std::mutex> lock(s.registry_mu);
    buffers = s.buffers;
    // Read before draining: a thread that has exited has published all it ever will.
    for (const auto& b : buffers)
      exited.push_back(b->thread_exited.load(std::memory_order_acquire));
    annotations.swap(s.annotations);
    annotation_ts.swap(s.annotation_ts);
    counters.swap(s.counters);
    meta.swap(s.meta);
  }
  int64_t dropped = s.carried_dropped;
  s.carried_dropped = 0;
  for (const auto& b : buffers) dropped += b->dropped.exchange(0, std::memory_order_relaxed);
  bool have_records = false;
  for (const auto& b : buffers) {
    have_records = have_records ||
                   b->head_pos < b->head->committed.load(std::memory_order_acquire) ||
                   b->head->next.load(std::memory_order_acquire) != nullptr;
  }
  const bool have_work =
      have_records || dropped > 0 || !annotations.empty() || !counters.empty() || !meta.empty();
  if (!s.writer) {
    if (!have_work && !final_flush) return OkStatus();
    const int64_t pid = s.pid.load();
    auto writer = store::NodeStoreWriter::Open(
        store::ProcessStorePath(s.options.run_dir, s.node, pid), NodeInfoFor(s));
    if (!writer.ok()) {
      // Nothing is lost for the failure: the process facts go back for the next attempt (the
      // records stay in their blocks, the drop count in carried_dropped).
      s.carried_dropped += dropped;
      std::lock_guard<std::mutex> lock(s.registry_mu);
      annotations.insert(annotations.end(), s.annotations.begin(), s.annotations.end());
      annotation_ts.insert(annotation_ts.end(), s.annotation_ts.begin(), s.annotation_ts.end());
      s.annotations.swap(annotations);
      s.annotation_ts.swap(annotation_ts);
      for (const auto& [k, v] : counters) s.counters[k] += v;
      for (auto& [k, v] : meta) s.meta.emplace(k, std::move(v));  // a newer value wins
      return writer.status();
    }
    s.writer = std::move(writer).value();
    s.writer->SetMeta("process.pid", std::to_string(pid));
    s.writer->SetMeta("trainprof.version", kVersion);
  }
  const int64_t pid = s.pid.load();
  const int64_t rank = s.rank.load();
  int64_t n = 0;
  std::vector<Block*> drained;
  for (size_t i = 0; i < buffers.size(); ++i) {
    n += recorder_blocks::DrainBuffer(buffers[i].get(), s.writer.get(), pid, rank, s.pool_mu,
                                      &drained);
  }
  {
    // Threads that have exited and are fully drained leave the registry (their blocks go with
    // the last reference).
    std::lock_guard<std::mutex> lock(s.registry_mu);
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (!exited[i]) continue;
      auto it = std::find(s.buffers.begin(), s.buffers.end(), buffers[i]);
      if (it != s.buffers.end()) {
        s.recorded.fetch_add(buffers[i]->produced.load(std::memory_order_relaxed));
        s.allocated_removed.fetch_add(buffers[i]->allocated.load(std::memory_order_relaxed));
        s.no_block_drops_removed.fetch_add(
            buffers[i]->no_block_drops.load(std::memory_order_relaxed));
        s.buffers.erase(it);
      }
    }
  }
  for (size_t i = 0; i < annotations.size(); ++i) {
    s.writer->Annotate(annotation_ts[i], std::move(annotations[i].first),
                       std::move(annotations[i].second));
  }
  s.dropped.fetch_add(dropped, std::memory_order_relaxed);
  if (dropped > 0) s.writer->AddCounter(model::dq::kDroppedEvents, dropped);
  for (const auto& [k, v] : counters) s.writer->AddCounter(k, v);
  for (const auto& [k, v] : meta) s.writer->SetMeta(k, v);
  s.written.fetch_add(n, std::memory_order_relaxed);
  s.flushes.fetch_add(1, std::memory_order_relaxed);
  // What recording cost this process (the flushes so far; this one's own cost lands in the
  // next): a fact for the run's data quality and for bench/instrument_overhead.py.
  s.writer->SetMeta("recorder.flush_cpu_ns", std::to_string(s.flush_cpu_ns.load()));
  Status st = s.writer->Flush();
  // A run directory removed under a running job: SQLite keeps writing into the unlinked file,
  // so nothing fails; say it once, plainly (the job itself carries on).
  if (st.ok() && !PathExists(s.writer->path())) {
    TP_LOG_ONCE(LogLevel::kWarning, "the run directory " + s.options.run_dir +
                                        " was removed during the run: what this process records"
                                        " from now on is lost");
  }
  s.flush_cpu_ns.fetch_add(ThreadCpuNs() - cpu0, std::memory_order_relaxed);
  return st;
}

void FlusherLoop() {
  State& s = S();
  {
    // Open the store at once (Start left it to this thread), so that a run shows its
    // processes from their first moments.
    std::lock_guard<std::mutex> flush_lock(s.flush_mu);
    Status st = DrainLocked(true);
    if (!st.ok()) TP_LOG_ONCE(LogLevel::kWarning, "recorder flush failed: " + st.message());
  }
  std::unique_lock<std::mutex> lock(s.flusher_mu);
  while (!s.stop_flusher) {
    s.flusher_cv.wait_for(lock, std::chrono::nanoseconds(s.options.flush_interval_ns),
                          [&] { return s.stop_flusher; });
    if (s.stop_flusher) break;
    lock.unlock();
    {
      std::lock_guard<std::mutex> flush_lock(s.flush_mu);
      Status st = DrainLocked(false);
      if (!st.ok()) TP_LOG_ONCE(LogLevel::kWarning, "recorder flush failed: " + st.message());
    }
    if (!s.keeper_running.load(std::memory_order_acquire)) {
      // No keeper (no thread to be had): the drained blocks go back into the pools from here.
      {
        std::lock_guard<std::mutex> pool_lock(s.pool_mu);
        NoteRefill(RefillLocked());
      }
      EnsureFlusher();
    }
    lock.lock();
  }
}

// The pool keeper: the ready buffers and every thread's pool topped up at once, then
// kRefillsPerInterval times per flush interval while threads take blocks (once per interval
// when none has for a whole interval).
void RefillerLoop() {
  State& s = S();
  const auto interval = std::chrono::nanoseconds(s.options.flush_interval_ns);
  const auto refill_every = std::max(interval / kRefillsPerInterval, std::chrono::nanoseconds(1));
  std::unique_lock<std::mutex> lock(s.flusher_mu);
  while (!s.stop_flusher) {
    lock.unlock();
    bool busy;
    {
      std::lock_guard<std::mutex> pool_lock(s.pool_mu);
      NoteRefill(RefillLocked());
      busy = s.idle_refills < kRefillsPerInterval;
    }
    lock.lock();
    s.flusher_cv.wait_for(lock, busy ? refill_every : interval, [&] { return s.stop_flusher; });
  }
}

void StopFlusher() {
  State& s = S();
  std::thread* threads[2] = {nullptr, nullptr};
  {
    std::lock_guard<std::mutex> lock(s.flusher_mu);
    s.threads_retry_at = {};
    if (s.flusher == nullptr && s.refiller == nullptr) {
      s.flusher_running.store(false);
      return;
    }
    s.stop_flusher = true;
    threads[0] = s.flusher;
    threads[1] = s.refiller;
    s.flusher = nullptr;
    s.refiller = nullptr;
  }
  s.flusher_cv.notify_all();
  for (std::thread* t : threads) {
    if (t == nullptr) continue;
    t->join();
    delete t;
  }
  s.flusher_running.store(false);
  s.keeper_running.store(false);
  s.keeper_refilled.store(false);
}

// fork(): the prepare handler takes the locks a child could otherwise inherit held by a thread
// that does not exist there; the child then forgets the parent's buffers, writer and flusher
// (leaked on purpose: destroying them would touch the parent's SQLite file and thread).
void AtForkPrepare() {
  State& s = S();
  s.lifecycle_mu.lock();  // first, as Start/Stop take it: a child must not inherit it held
  s.flush_mu.lock();
  s.pool_mu.lock();
  s.flusher_mu.lock();
  s.registry_mu.lock();
  recorder_blocks::LockArenaForFork();  // innermost: freeing a block takes it under the others
}
void AtForkParent() {
  State& s = S();
  recorder_blocks::UnlockArenaAfterFork();
  s.registry_mu.unlock();
  s.flusher_mu.unlock();
  s.pool_mu.unlock();
  s.flush_mu.unlock();
  s.lifecycle_mu.unlock();
}
void AtForkChild() {
  State& s = S();
  recorder_blocks::UnlockArenaAfterFork();  // before the parent's buffers are freed here
  s.buffers.clear();
  s.annotations.clear();
  s.annotation_ts.clear();
  s.counters.clear();
  s.meta.clear();
  (void)s.writer.release();  // the parent's connection: never used or closed here
  s.flusher = nullptr;       // the parent's threads do not exist here
  s.refiller = nullptr;
  s.flusher_running.store(false);
  s.keeper_running.store(false);
  s.keeper_refilled.store(false);
  s.threads_retry_at = {};
  s.stop_flusher = false;
  for (auto& slot : s.ready) slot.store(nullptr);  // they were in `buffers`
  s.buffers_taken.store(0);
  s.allocated_removed.store(0);
  s.no_block_drops_removed.store(0);
  s.spares.Forget();  // the parent's (copied, left alone)
  s.idle_refills = 0;
  pthread_setspecific(ExitKey(), nullptr);  // this thread's buffer was the parent's
  s.pid.store(getpid());                    // also invalidates every thread's cached buffer handle
  s.recorded.store(0);
  s.carried_dropped = 0;
  s.flush_cpu_ns.store(0);
  s.written.store(0);
  s.dropped.store(0);
  s.flushes.store(0);
  t_tid = 0;  // this thread is the child's only one, with a new id
  s.registry_mu.unlock();
  s.flusher_mu.unlock();
  s.pool_mu.unlock();
  s.flush_mu.unlock();
  s.lifecycle_mu.unlock();
}

void StopAtExit() { (void)Stop(); }

int64_t MonotonicRawNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

}  // namespace

int64_t NowNs() { return MonotonicRawNs() + S().clock_offset_ns.load(std::memory_order_relaxed); }
int64_t ClockOffsetNs() { return S().clock_offset_ns.load(std::memory_order_relaxed); }

Status Start(const RecorderOptions& options) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.lifecycle_mu);
  if (s.active.load()) return FailedPrecondition("trainprof recorder already started");
  if (options.run_dir.empty()) return InvalidArgument("trainprof recorder: run_dir is empty");
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(AtForkPrepare, AtForkParent, AtForkChild);
    std::atexit(StopAtExit);
  });
  s.options = options;
  {
    // Threads keep their buffers across Stop/Start: count from what they hold now.
    std::lock_guard<std::mutex> reg(s.registry_mu);
    int64_t held = 0;
    for (const auto& b : s.buffers) held += b->produced.load(std::memory_order_relaxed);
    s.recorded.store(-held);
  }
  s.dropped.store(0);
  s.written.store(0);
  s.flushes.store(0);
  s.flush_cpu_ns.store(0);
  if (s.options.flush_interval_ns <= 0) s.options.flush_interval_ns = 500'000'000;
  if (s.options.max_events_per_thread <= 0) s.options.max_events_per_thread = 1;
  std::string node = options.node;
  if (node.empty()) {
    const char* env = std::getenv("TRAINPROF_NODE");
    if (env != nullptr) node = env;
  }
  if (node.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) node = host;
  }
  s.node = node;
  s.node_info = model::NodeInfo{};  // detected by the flusher when it opens the store
  s.clock_offset_ns.store(WallNowNs() - MonotonicRawNs());
  s.pid.store(getpid());
  s.rank.store(options.rank);
  s.local_rank.store(options.local_rank);
  s.world_size.store(options.world_size);
  if (options.write_run_json && !PathExists(store::RunJsonPath(options.run_dir))) {
    model::RunMetadata meta;
    meta.name = options.run_name.empty() ? "run" : options.run_name;
    meta.start_ns = WallNowNs();
    meta.run_id = model::NewRunId(meta.name, meta.start_ns);
    meta.source = "trainprof.start";
    meta.trainprof_version = kVersion;
    TP_RETURN_IF_ERROR(store::WriteRunMetadata(options.run_dir, meta));
  }
  {
    // A run directory we cannot write fails here. Opening the store (SQLite, its schema, an
    // fsync) is the flusher's first job: the process's start does not wait for it.
    const std::string path = store::ProcessStorePath(options.run_dir, s.node, getpid());
    TP_RETURN_IF_ERROR(MakeDirs(path.substr(0, path.rfind('/'))));
    std::lock_guard<std::mutex> flush_lock(s.flush_mu);
    s.writer.reset();
  }
  {
    std::lock_guard<std::mutex> reg(s.registry_mu);
    s.meta["process.start_ns"] = std::to_string(WallNowNs());
    if (options.rank != model::kMissing) s.meta["process.rank"] = std::to_string(options.rank);
    if (options.local_rank != model::kMissing) {
      s.meta["process.local_rank"] = std::to_string(options.local_rank);
    }
    if (options.world_size != model::kMissing) {
      s.meta["process.world_size"] = std::to_string(options.world_size);
    }
  }
  {
    // Buffers ready for the threads' first events before any thread can record (the keeper
    // keeps them ready from then on).
    std::lock_guard<std::mutex> pool_lock(s.pool_mu);
    s.spares.BeginRecording();
    (void)RefillLocked();
  }
  s.active.store(true);
  EnsureFlusher();
  return OkStatus();
}

Status Stop() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.lifecycle_mu);
  if (!s.active.load()) return OkStatus();
  s.active.store(false);
  StopFlusher();
  s.spares.FreeAll();
  std::lock_guard<std::mutex> flush_lock(s.flush_mu);
  {
    std::lock_guard<std::mutex> reg(s.registry_mu);
    s.meta["process.end_ns"] = std::to_string(WallNowNs());
  }
  Status st = DrainLocked(false);
  if (s.writer) {
    Status close = s.writer->Close();
    if (st.ok()) st = close;
    s.writer.reset();
  }
  return st;
}

Status FlushNow() {
  State& s = S();
  if (!s.active.load()) return OkStatus();
  std::lock_guard<std::mutex> flush_lock(s.flush_mu);
  return DrainLocked(false);
}

bool Active() { return S().active.load(std::memory_order_relaxed); }

void SetRank(int64_t rank, int64_t local_rank, int64_t world_size) {
  State& s = S();
  s.rank.store(rank);
  s.local_rank.store(local_rank);
  s.world_size.store(world_size);
  std::lock_guard<std::mutex> reg(s.registry_mu);
  if (rank != model::kMissing) s.meta["process.rank"] = std::to_string(rank);
  if (local_rank != model::kMissing) s.meta["process.local_rank"] = std::to_string(local_rank);
  if (world_size != model::kMissing) s.meta["process.world_size"] = std::to_string(world_size);
}

int64_t Rank() { return S().rank.load(std::memory_order_relaxed); }

void RecordSpan(std::string_view name, std::string_view category, std::string_view mode,
                int64_t step, int64_t start_ns, int64_t duration_ns, std::string_view args,
                int64_t tid) {
  Append(model::EventKind::kSpan, name, category, mode, step, start_ns, duration_ns, args, tid);
}

void RecordInstant(std::string_view name, std::string_view category, std::string_view mode,
                   int64_t step, int64_t ts_ns, std::string_view args, int64_t tid) {
  Append(model::EventKind::kInstant, name, category, mode, step, ts_ns, 0, args, tid);
}

void Annotate(std::string_view key, std::string_view value) {
  State& s = S();
  if (!s.active.load(std::memory_order_relaxed)) return;
  EnsureFlusher();
  std::lock_guard<std::mutex> reg(s.registry_mu);
  s.annotations.emplace_back(std::string(key), std::string(value));
  s.annotation_ts.push_back(NowNs());
}

void AddCounter(std::string_view name, int64_t delta) {
  State& s = S();
  if (!s.active.load(std::memory_order_relaxed)) return;
  EnsureFlusher();
  std::lock_guard<std::mutex> reg(s.registry_mu);
  s.counters[std::string(name)] += delta;
}

void SetMeta(std::string_view key, std::string_view value) {
  State& s = S();
  if (!s.active.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> reg(s.registry_mu);
  s.meta[std::string(key)] = std::string(value);
}

void SetBulkWrites(bool on) { t_bulk = on; }

RecorderStats Stats() {
  State& s = S();
  RecorderStats out;
  out.dropped_events = s.dropped.load();
  out.written_events = s.written.load();
  out.flushes = s.flushes.load();
  out.flush_cpu_ns = s.flush_cpu_ns.load();
  std::lock_guard<std::mutex> reg(s.registry_mu);
  int64_t buffered_dropped = 0;
  for (const auto& b : s.buffers) buffered_dropped += b->dropped.load(std::memory_order_relaxed);
  out.dropped_events += buffered_dropped;
  out.pool_empty_allocations = s.allocated_removed.load();
  out.no_block_drops = s.no_block_drops_removed.load();
  for (const auto& b : s.buffers) {
    out.pool_empty_allocations += b->allocated.load(std::memory_order_relaxed);
    out.no_block_drops += b->no_block_drops.load(std::memory_order_relaxed);
  }
  out.recorded_events = s.recorded.load();
  for (const auto& b : s.buffers)
    out.recorded_events += b->produced.load(std::memory_order_relaxed);
  out.spare_blocks = s.spares.Held();
  return out;
}

}  // namespace trainprof::instrument
