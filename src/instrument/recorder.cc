#include "instrument/recorder.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/files.h"
#include "base/logging.h"
#include "base/time.h"
#include "model/data_quality.h"
#include "model/run_metadata.h"
#include "store/node_store_writer.h"
#include "store/run_directory.h"
#include "trainprof/version.h"

namespace trainprof::instrument {
namespace {

// What the hot path stores: strings are short (SSO, no allocation) in the common case.
struct RawEvent {
  int64_t start_ns;
  int64_t duration_ns;
  int64_t step;
  int64_t tid;
  std::string name;
  std::string category;
  std::string mode;
  std::string args;
  model::EventKind kind;
};

// A lock the training thread takes uncontended except for the flusher's brief swap. A plain
// atomic flag so that a forked child can reset it whatever state the parent left it in.
class SpinLock {
 public:
  void lock() {
    while (flag_.exchange(true, std::memory_order_acquire)) {
      while (flag_.load(std::memory_order_relaxed)) std::this_thread::yield();
    }
  }
  void unlock() { flag_.store(false, std::memory_order_release); }
  void Reset() { flag_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> flag_{false};
};

// One thread's events since the last flush. Owned jointly by the thread (thread_local handle)
// and the registry; the flusher removes it once the thread has exited and it is drained.
struct ThreadBuffer {
  SpinLock lock;
  std::vector<RawEvent> events;
  // The vector the flusher drained last time, emptied with its capacity kept: the next swap
  // hands it back, so the training thread appends into memory that is already allocated and
  // paged in instead of growing a fresh vector (reallocations, page faults) after each flush.
  // Only the flusher touches it (in DrainLocked, under flush_mu).
  std::vector<RawEvent> spare;
  int64_t dropped = 0;
  int64_t tid = 0;
  std::atomic<bool> thread_exited{false};
};

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
  std::atomic<bool> flusher_running{false};
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
  std::mutex flusher_mu;
  std::condition_variable flusher_cv;
  bool stop_flusher = false;
};

State& S() {
  static State* state = new State();  // never destroyed: threads may record during exit
  return *state;
}

int64_t CurrentTid() {
  thread_local int64_t tid = static_cast<int64_t>(syscall(SYS_gettid));
  return tid;
}

// The calling thread's buffer, registered on first use. The handle's destructor (thread exit)
// marks it so the flusher can drop it after draining.
struct BufferHandle {
  std::shared_ptr<ThreadBuffer> buffer;
  int64_t owner_pid = 0;
  ~BufferHandle() {
    if (buffer) buffer->thread_exited.store(true, std::memory_order_release);
  }
};

ThreadBuffer* LocalBuffer() {
  thread_local BufferHandle handle;
  State& s = S();
  const int64_t pid = s.pid.load(std::memory_order_relaxed);
  if (handle.buffer && handle.owner_pid == pid) return handle.buffer.get();
  // First use in this thread, or first use in a forked child (the registry was reset there).
  auto buffer = std::make_shared<ThreadBuffer>();
  buffer->tid = CurrentTid();
  buffer->events.reserve(256);
  {
    std::lock_guard<std::mutex> lock(s.registry_mu);
    s.buffers.push_back(buffer);
  }
  handle.buffer = std::move(buffer);
  handle.owner_pid = pid;
  return handle.buffer.get();
}

void FlusherLoop();

// Starts the flusher if this process has none (the first Start, or a forked child's first
// event). Cheap when it is running.
void EnsureFlusher() {
  State& s = S();
  if (s.flusher_running.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(s.flusher_mu);
  if (s.flusher_running.load(std::memory_order_relaxed)) return;
  s.stop_flusher = false;
  s.flusher = new std::thread(FlusherLoop);
  s.flusher_running.store(true, std::memory_order_release);
}

void Push(RawEvent&& e) {
  State& s = S();
  if (!s.active.load(std::memory_order_relaxed)) return;
  EnsureFlusher();
  ThreadBuffer* b = LocalBuffer();
  if (e.tid == 0) e.tid = b->tid;
  b->lock.lock();
  if (static_cast<int64_t>(b->events.size()) >= s.options.max_events_per_thread) {
    ++b->dropped;
    b->lock.unlock();
    return;
  }
  b->events.push_back(std::move(e));
  b->lock.unlock();
}

model::Event ToEvent(RawEvent&& r, int64_t pid, int64_t rank) {
  model::Event e;
  e.kind = r.kind;
  e.start_ns = r.start_ns;
  e.duration_ns = r.duration_ns;
  e.name = std::move(r.name);
  e.category = std::move(r.category);
  e.mode = std::move(r.mode);
  e.step = r.step;
  e.pid = pid;
  e.tid = r.tid;
  e.rank = rank;
  e.args = std::move(r.args);
  return e;
}

model::NodeInfo NodeInfoFor(const State& s) {
  model::NodeInfo info = s.node_info;
  return info;
}

// Moves every buffer into the writer (opening it lazily: a forked child opens its own file) and
// flushes. Called with flush_mu held.
Status DrainLocked(bool final_flush) {
  State& s = S();
  std::vector<std::vector<RawEvent>> taken;
  std::vector<std::shared_ptr<ThreadBuffer>> taken_from;  // null for exited threads
  int64_t dropped = 0;
  std::vector<std::pair<std::string, std::string>> annotations;
  std::vector<int64_t> annotation_ts;
  std::map<std::string, int64_t> counters;
  std::map<std::string, std::string> meta;
  {
    std::lock_guard<std::mutex> lock(s.registry_mu);
    for (auto it = s.buffers.begin(); it != s.buffers.end();) {
      ThreadBuffer& b = **it;
      const bool exited = b.thread_exited.load(std::memory_order_acquire);
      std::vector<RawEvent> fresh = std::move(b.spare);
      b.spare = {};
      if (!exited && fresh.capacity() == 0) {
        fresh.reserve(std::min<size_t>(b.events.capacity(), 4096));
      }
      b.lock.lock();
      taken.push_back(std::move(b.events));
      b.events = std::move(fresh);
      dropped += b.dropped;
      b.dropped = 0;
      b.lock.unlock();
      taken_from.push_back(exited ? nullptr : *it);
      it = exited ? s.buffers.erase(it) : it + 1;
    }
    annotations.swap(s.annotations);
    annotation_ts.swap(s.annotation_ts);
    counters.swap(s.counters);
    meta.swap(s.meta);
  }
  size_t n = 0;
  for (const auto& v : taken) n += v.size();
  s.dropped.fetch_add(dropped, std::memory_order_relaxed);
  const bool have_work =
      n > 0 || dropped > 0 || !annotations.empty() || !counters.empty() || !meta.empty();
  if (!s.writer) {
    if (!have_work && !final_flush) return OkStatus();
    const int64_t pid = s.pid.load();
    auto writer = store::NodeStoreWriter::Open(
        store::ProcessStorePath(s.options.run_dir, s.node, pid), NodeInfoFor(s));
    if (!writer.ok()) return writer.status();
    s.writer = std::move(writer).value();
    s.writer->SetMeta("process.pid", std::to_string(pid));
    s.writer->SetMeta("trainprof.version", kVersion);
  }
  const int64_t pid = s.pid.load();
  const int64_t rank = s.rank.load();
  for (size_t i = 0; i < taken.size(); ++i) {
    for (auto& r : taken[i]) s.writer->AppendEvent(ToEvent(std::move(r), pid, rank));
    // Back to its thread for the next swap; a burst's worth of capacity is kept, not more.
    if (taken_from[i] && taken[i].capacity() <= (1u << 16)) {
      taken[i].clear();
      taken_from[i]->spare = std::move(taken[i]);
    }
  }
  for (size_t i = 0; i < annotations.size(); ++i) {
    s.writer->Annotate(annotation_ts[i], std::move(annotations[i].first),
                       std::move(annotations[i].second));
  }
  if (dropped > 0) s.writer->AddCounter(model::dq::kDroppedEvents, dropped);
  for (const auto& [k, v] : counters) s.writer->AddCounter(k, v);
  for (const auto& [k, v] : meta) s.writer->SetMeta(k, v);
  s.written.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
  s.flushes.fetch_add(1, std::memory_order_relaxed);
  return s.writer->Flush();
}

void FlusherLoop() {
  State& s = S();
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
    lock.lock();
  }
}

void StopFlusher() {
  State& s = S();
  std::thread* t = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.flusher_mu);
    if (!s.flusher_running.load()) return;
    s.stop_flusher = true;
    t = s.flusher;
    s.flusher = nullptr;
  }
  s.flusher_cv.notify_all();
  if (t != nullptr) {
    t->join();
    delete t;
  }
  s.flusher_running.store(false);
}

// fork(): the prepare handler takes the locks a child could otherwise inherit held by a thread
// that does not exist there; the child then forgets the parent's buffers, writer and flusher
// (leaked on purpose: destroying them would touch the parent's SQLite file and thread).
void AtForkPrepare() {
  State& s = S();
  s.flush_mu.lock();
  s.flusher_mu.lock();
  s.registry_mu.lock();
}
void AtForkParent() {
  State& s = S();
  s.registry_mu.unlock();
  s.flusher_mu.unlock();
  s.flush_mu.unlock();
}
void AtForkChild() {
  State& s = S();
  s.buffers.clear();
  s.annotations.clear();
  s.annotation_ts.clear();
  s.counters.clear();
  s.meta.clear();
  (void)s.writer.release();  // the parent's connection: never used or closed here
  s.flusher = nullptr;       // the parent's thread does not exist here
  s.flusher_running.store(false);
  s.stop_flusher = false;
  s.pid.store(getpid());  // also invalidates every thread's cached buffer handle
  s.recorded.store(0);
  s.written.store(0);
  s.dropped.store(0);
  s.flushes.store(0);
  s.registry_mu.unlock();
  s.flusher_mu.unlock();
  s.flush_mu.unlock();
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
  if (s.options.flush_interval_ns <= 0) s.options.flush_interval_ns = 500'000'000;
  if (s.options.max_events_per_thread <= 0) s.options.max_events_per_thread = 1;
  std::string node = options.node;
  if (node.empty()) {
    const char* env = std::getenv("TRAINPROF_NODE");
    if (env != nullptr) node = env;
  }
  s.node_info = model::DetectLocalNode(node);
  s.node = s.node_info.node;
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
    std::lock_guard<std::mutex> flush_lock(s.flush_mu);
    s.writer.reset();
    // Open the store now so a bad run directory fails here, not silently in the flusher.
    TP_RETURN_IF_ERROR(DrainLocked(true));
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
  if (!S().active.load(std::memory_order_relaxed)) return;
  Push(RawEvent{start_ns, duration_ns, step, tid, std::string(name), std::string(category),
                std::string(mode), std::string(args), model::EventKind::kSpan});
}

void RecordInstant(std::string_view name, std::string_view category, std::string_view mode,
                   int64_t step, int64_t ts_ns, std::string_view args, int64_t tid) {
  if (!S().active.load(std::memory_order_relaxed)) return;
  Push(RawEvent{ts_ns, 0, step, tid, std::string(name), std::string(category), std::string(mode),
                std::string(args), model::EventKind::kInstant});
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

RecorderStats Stats() {
  State& s = S();
  RecorderStats out;
  out.dropped_events = s.dropped.load();
  out.written_events = s.written.load();
  out.flushes = s.flushes.load();
  std::lock_guard<std::mutex> reg(s.registry_mu);
  int64_t buffered_dropped = 0;
  for (const auto& b : s.buffers) {
    b->lock.lock();
    buffered_dropped += b->dropped;
    b->lock.unlock();
  }
  out.dropped_events += buffered_dropped;
  out.recorded_events = out.written_events;
  return out;
}

}  // namespace trainprof::instrument
