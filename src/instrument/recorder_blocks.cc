#include "instrument/recorder_blocks.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>

#include "model/event.h"
#include "store/node_store_writer.h"

namespace trainprof::instrument::recorder_blocks {

namespace {

// Blocks in the arena sit one page apart beyond their size, so that each begins on a page
// boundary: returning a freed block's pages never touches a neighbour's.
constexpr size_t kArenaStride = (sizeof(Block) + kBlockBytes + kPageBytes - 1) & ~(kPageBytes - 1);
constexpr size_t kArenaBlocks = kArenaBytes / kArenaStride;

class BlockArena {
 public:
  static BlockArena& Get() {
    static BlockArena* arena = new BlockArena();  // never destroyed: threads record during exit
    return *arena;
  }

  // A block's memory, or null (no arena, or its range spent). Never waits for a lock: a freed
  // block when the free list's lock is free, else the range's next.
  void* Take() {
    if (base_ == nullptr) return nullptr;
    if (mu_.try_lock()) {
      void* got = nullptr;
      if (!free_.empty()) {
        got = free_.back();
        free_.pop_back();
      }
      mu_.unlock();
      if (got != nullptr) return got;
    }
    if (next_.load(std::memory_order_relaxed) >= kArenaBlocks) return nullptr;
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= kArenaBlocks) return nullptr;
    return base_ + i * kArenaStride;
  }

  bool Contains(const void* p) const {
    const auto* c = static_cast<const char*>(p);
    return base_ != nullptr && c >= base_ && c < base_ + kArenaBlocks * kArenaStride;
  }

  // Back to the free list, its pages returned to the system (the next user maps them afresh).
  void Give(void* p) {
    (void)madvise(p, kArenaStride, MADV_DONTNEED);
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(static_cast<char*>(p));  // within the capacity reserved: no allocation
  }

  std::mutex& mu() { return mu_; }

  // Maps every page of `b`, an arena block, in one call that writes nothing
  // (MADV_POPULATE_WRITE). False where it is not an arena block or the system cannot (Linux
  // before 5.14): the caller writes a byte per page instead.
  bool Map(Block* b) {
    if (!Contains(b) || !populate_works_.load(std::memory_order_relaxed)) return false;
    if (madvise(b, kArenaStride, kMadvPopulateWrite) == 0) return true;
    if (errno == EINVAL) populate_works_.store(false, std::memory_order_relaxed);
    return false;
  }

 private:
  static constexpr int kMadvPopulateWrite = 23;  // MADV_POPULATE_WRITE, Linux 5.14

  BlockArena() {
    // Under strict overcommit the whole range would be charged at once: the heap instead.
    if (std::FILE* f = std::fopen("/proc/sys/vm/overcommit_memory", "r")) {
      const int mode = std::fgetc(f);
      std::fclose(f);
      if (mode == '2') return;
    }
    void* p = mmap(nullptr, kArenaBlocks * kArenaStride, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    // 4 KiB pages: a huge page would fault in 2 MiB (zeroed) for a block's first record.
    (void)madvise(p, kArenaBlocks * kArenaStride, MADV_NOHUGEPAGE);
    // A forked child (a DataLoader worker) gets the range empty, not shared copy-on-write: the
    // child never reads the parent's records (it forgets the parent's buffers and spares), and
    // the parent's threads write on into their blocks without a page fault for each first
    // write after the fork (Linux 4.14; before, shared as any memory).
    (void)madvise(p, kArenaBlocks * kArenaStride, MADV_WIPEONFORK);
    free_.reserve(kArenaBlocks);
    base_ = static_cast<char*>(p);
  }

  char* base_ = nullptr;
  std::atomic<size_t> next_{0};  // blocks of the range taken so far
  std::atomic<bool> populate_works_{true};
  std::mutex mu_;
  std::vector<char*> free_;
};

}  // namespace

Block* NewBlock(uint32_t capacity) {
  void* mem = capacity == kBlockBytes ? BlockArena::Get().Take() : nullptr;
  if (mem == nullptr) mem = ::operator new(sizeof(Block) + capacity);
  Block* b = new (mem) Block();
  b->capacity = capacity;
  return b;
}

void FreeBlock(Block* b) {
  b->~Block();
  BlockArena& arena = BlockArena::Get();
  if (arena.Contains(b)) {
    arena.Give(b);
  } else {
    ::operator delete(b);
  }
}

bool InArena(const Block* b) { return BlockArena::Get().Contains(b); }

void LockArenaForFork() { BlockArena::Get().mu().lock(); }
void UnlockArenaAfterFork() { BlockArena::Get().mu().unlock(); }

// Written once here, on the keeper's thread, so that the training thread writing into the block
// takes no page fault. A volatile store per page: a memset of fresh memory may be turned into
// calloc, which skips the writes.
void Prepare(Block* b) {
  if (BlockArena::Get().Map(b)) {
    b->prepared = true;
    return;
  }
  volatile char* p = b->data();
  for (size_t i = 0; i < b->capacity; i += kPageBytes) p[i] = 0;
  p[b->capacity - 1] = 0;
  b->prepared = true;
}

Block* NewPreparedBlock() {
  Block* b = NewBlock(kBlockBytes);
  Prepare(b);
  return b;
}

ThreadBuffer::~ThreadBuffer() {
  for (Block* b = head; b != nullptr;) {
    Block* next = b->next.load(std::memory_order_relaxed);
    FreeBlock(b);
    b = next;
  }
  for (uint64_t i = pool_read.load(); i < pool_write.load(); ++i) FreeBlock(pool[i % kPoolSlots]);
  for (Block* b : reserve) FreeBlock(b);
}

std::shared_ptr<ThreadBuffer> MakeBuffer(int64_t pool_blocks) {
  auto buffer = std::make_shared<ThreadBuffer>();
  buffer->head = buffer->tail = NewPreparedBlock();
  for (int64_t i = 0; i < pool_blocks; ++i) buffer->pool[i] = NewPreparedBlock();
  buffer->pool_write.store(static_cast<uint64_t>(pool_blocks), std::memory_order_relaxed);
  buffer->block_bytes.store((1 + pool_blocks) * kBlockBytes, std::memory_order_relaxed);
  return buffer;
}

Block* SparePool::Take() {
  for (auto& slot : slots_) {
    if (slot.load(std::memory_order_relaxed) == nullptr) continue;
    Block* got = slot.exchange(nullptr, std::memory_order_acquire);
    if (got != nullptr) return got;
  }
  return nullptr;
}

int64_t SparePool::Held() const {
  int64_t held = 0;
  for (const auto& slot : slots_) held += slot.load(std::memory_order_relaxed) != nullptr;
  return held;
}

bool SparePool::Park(Block* block) {
  for (auto& slot : slots_) {
    if (slot.load(std::memory_order_relaxed) != nullptr) continue;
    if (!block->prepared) Prepare(block);
    block->committed.store(0, std::memory_order_relaxed);
    block->next.store(nullptr, std::memory_order_relaxed);
    slot.store(block, std::memory_order_release);  // only the keeper fills a slot
    return true;
  }
  return false;
}

void SparePool::Refill(bool idle) {
  peak_ = std::max(peak_, demand_);
  peak_this_interval_ = std::max(peak_this_interval_, demand_);
  demand_ = 0;
  if (++refills_ >= kRefillsPerInterval) {
    peak_ = std::max(peak_this_interval_, peak_ / 2);
    peak_this_interval_ = 0;
    refills_ = 0;
    start_floor_ = false;
  }
  const int64_t floor = start_floor_ ? kStartSpareBlocks : 0;
  const int64_t target =
      std::min<int64_t>(kSpareSlots, std::max(floor, kMinSpareBlocks + 4 * peak_));
  int64_t held = Held();
  for (auto& slot : slots_) {
    if (held >= target) break;
    if (slot.load(std::memory_order_relaxed) != nullptr) continue;
    slot.store(NewPreparedBlock(), std::memory_order_release);
    ++held;
  }
  if (!idle) return;
  for (auto& slot : slots_) {
    if (held <= target) break;
    Block* block = slot.exchange(nullptr, std::memory_order_acquire);
    if (block == nullptr) continue;
    FreeBlock(block);
    --held;
  }
}

void SparePool::FreeAll() {
  for (auto& slot : slots_) {
    if (Block* block = slot.exchange(nullptr, std::memory_order_acquire)) FreeBlock(block);
  }
  demand_ = peak_ = peak_this_interval_ = refills_ = 0;
  start_floor_ = false;
}

void SparePool::Forget() {
  for (auto& slot : slots_) slot.store(nullptr);
  demand_ = peak_ = peak_this_interval_ = refills_ = 0;
  start_floor_ = false;
}

// A record that fits a block takes a prepared block from the thread's pool: two atomic loads
// and a store, no lock, no allocation, no page fault. When the pool is empty it takes a spare
// block (an exchange). When none is left either, the thread has outrun a running keeper: the
// record is dropped and counted, as at the thread's event bound, rather than written into a
// fresh block whose every page would fault on this thread (on a VM that hands freed memory back
// to its host, each such fault took 10-120 us). Bulk writes (a profiler's events stored at
// once), records larger than a block, and threads of a process whose keeper does not run or
// has not refilled yet (`allocate`) get a block allocated here instead, counted. The keeper
// grows the pool from the bytes of the records that found it empty, dropped ones included, and
// the spare blocks from the blocks taken past the pools; bulk writes count in neither (their
// burst is not the thread's rate). All within the thread's memory bound.
Block* TakeBlock(ThreadBuffer* b, size_t need, bool bulk, bool allocate, SparePool& spares) {
  const bool counted = need <= kBlockBytes && !bulk;
  if (need <= kBlockBytes) {
    const uint64_t r = b->pool_read.load(std::memory_order_relaxed);
    if (r != b->pool_write.load(std::memory_order_acquire)) {
      Block* got = b->pool[r % kPoolSlots];
      b->pool_read.store(r + 1, std::memory_order_release);
      return got;
    }
    if (counted) {
      b->starved_bytes.store(
          b->starved_bytes.load(std::memory_order_relaxed) + static_cast<int64_t>(need),
          std::memory_order_relaxed);
    }
  }
  // A block taken past the pool (a spare or one allocated here): what the spares' demand counts.
  auto starved = [b, counted] {
    if (counted) {
      b->starved.store(b->starved.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  };
  const auto capacity = static_cast<uint32_t>(std::max<size_t>(kBlockBytes, need));
  if (b->block_bytes.load(std::memory_order_relaxed) + capacity > kMaxBufferedBytesPerThread) {
    return nullptr;
  }
  b->block_bytes.fetch_add(capacity, std::memory_order_relaxed);
  if (capacity == kBlockBytes) {
    if (Block* got = spares.Take()) {
      starved();
      return got;
    }
    if (!bulk && !allocate) {
      b->block_bytes.fetch_sub(capacity, std::memory_order_relaxed);
      b->no_block_drops.store(b->no_block_drops.load(std::memory_order_relaxed) + 1,
                              std::memory_order_relaxed);
      return nullptr;
    }
    if (!bulk) {
      b->allocated.store(b->allocated.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
    }
  }
  starved();
  // Not prepared here: mapping all 16 pages at once would make this one call take 16 page
  // faults (tens of microseconds on a VM). Mapped as records reach them instead, a call takes
  // one fault at most; the keeper maps what is left before the block goes into a pool.
  return NewBlock(capacity);
}

namespace {

// The pool of `b` up to `target` blocks: from its reserve, then (`make`) new prepared blocks
// within the thread's memory bound. Under pool_mu.
void FillPool(ThreadBuffer* b, int64_t target, bool make) {
  const uint64_t read = b->pool_read.load(std::memory_order_acquire);
  const uint64_t write = b->pool_write.load(std::memory_order_relaxed);
  uint64_t w = write;
  while (static_cast<int64_t>(w - read) < target) {
    Block* block = nullptr;
    if (!b->reserve.empty()) {
      block = b->reserve.back();
      b->reserve.pop_back();
      if (!block->prepared) Prepare(block);
    } else {
      if (!make || b->block_bytes.load(std::memory_order_relaxed) + kBlockBytes >
                       kMaxBufferedBytesPerThread) {
        break;
      }
      b->block_bytes.fetch_add(kBlockBytes, std::memory_order_relaxed);
      block = NewPreparedBlock();
    }
    block->committed.store(0, std::memory_order_relaxed);
    block->next.store(nullptr, std::memory_order_relaxed);
    b->pool[w % kPoolSlots] = block;
    ++w;
  }
  if (w != write) b->pool_write.store(w, std::memory_order_release);
}

int64_t PoolTarget(const ThreadBuffer* b) {
  return std::min<int64_t>(kPoolSlots, kMinPoolBlocks + kPoolPeriods * b->peak_blocks_per_refill);
}

}  // namespace

void TopUpPool(ThreadBuffer* b) { FillPool(b, PoolTarget(b), /*make=*/false); }

// To what its thread took in its busiest refill period lately (this flush interval, or half of
// it before), kPoolPeriods times over and at least kMinPoolBlocks: from the drained blocks kept
// in reserve first, then new prepared blocks, within the memory bound. The reserve keeps about
// a flush interval's worth; the rest is parked as spares, or freed: past twice that at once,
// the rest once recording is idle (`idle`) or the thread has taken nothing lately (memory that
// malloc gives back and maps again stalls the page faults of the threads that record).
bool RefillPool(ThreadBuffer* b, bool idle, SparePool& spares) {
  const uint64_t read = b->pool_read.load(std::memory_order_acquire);
  int64_t wanted = static_cast<int64_t>(read - b->read_seen);
  b->read_seen = read;
  const int64_t starved_bytes = b->starved_bytes.load(std::memory_order_relaxed);
  wanted += (starved_bytes - b->starved_bytes_seen + kBlockBytes - 1) / kBlockBytes;
  b->starved_bytes_seen = starved_bytes;
  const int64_t starved = b->starved.load(std::memory_order_relaxed);
  spares.AddDemand(starved - b->starved_seen);
  b->starved_seen = starved;
  b->peak_this_interval = std::max(b->peak_this_interval, wanted);
  b->peak_blocks_per_refill = std::max(b->peak_blocks_per_refill, wanted);
  if (++b->refills_this_interval >= kRefillsPerInterval) {
    b->peak_blocks_per_refill = std::max(b->peak_this_interval, b->peak_blocks_per_refill / 2);
    b->peak_this_interval = 0;
    b->refills_this_interval = 0;
  }
  FillPool(b, PoolTarget(b), /*make=*/true);
  const size_t keep =
      static_cast<size_t>(kMinPoolBlocks + kRefillsPerInterval * b->peak_blocks_per_refill);
  while (b->reserve.size() > keep) {
    if (!spares.Park(b->reserve.back())) {
      // A thread that still takes blocks keeps up to twice its reserve.
      if (!idle && b->peak_blocks_per_refill > 0 && b->reserve.size() <= 2 * keep) break;
      FreeBlock(b->reserve.back());
    }
    b->reserve.pop_back();
    b->block_bytes.fetch_sub(kBlockBytes, std::memory_order_relaxed);
  }
  return wanted > 0;
}

int64_t DrainBuffer(ThreadBuffer* b, store::NodeStoreWriter* writer, int64_t pid, int64_t rank,
                    std::mutex& pool_mu, std::vector<Block*>* drained) {
  Block* block = b->head;
  uint32_t pos = b->head_pos;
  int64_t n = 0;
  while (true) {
    const uint32_t committed = block->committed.load(std::memory_order_acquire);
    while (pos < committed) {
      const char* p = block->data() + pos;
      RecordHeader h;
      std::memcpy(&h, p, sizeof h);
      const char* text = p + kHeaderBytes;
      model::EventView e;
      e.kind = static_cast<model::EventKind>(h.kind);
      e.start_ns = h.start_ns;
      e.duration_ns = h.duration_ns;
      e.name = std::string_view(text, h.name_len);
      text += h.name_len;
      e.category = std::string_view(text, h.category_len);
      text += h.category_len;
      e.mode = std::string_view(text, h.mode_len);
      text += h.mode_len;
      e.args = std::string_view(text, h.args_len);
      e.step = h.step;
      e.pid = pid;
      e.tid = h.tid == 0 ? b->tid.load(std::memory_order_relaxed) : h.tid;
      e.rank = rank;
      writer->AppendEvent(e);
      pos += static_cast<uint32_t>(RecordBytes(h.name_len, h.category_len, h.mode_len, h.args_len));
      ++n;
    }
    Block* next = block->next.load(std::memory_order_acquire);
    if (next == nullptr) break;
    // The thread committed this block's last record before linking the next one.
    if (block->committed.load(std::memory_order_acquire) != pos) continue;
    if (block->capacity == kBlockBytes) {
      drained->push_back(block);
    } else {
      b->block_bytes.fetch_sub(block->capacity, std::memory_order_relaxed);
      FreeBlock(block);
    }
    block = next;
    pos = 0;
  }
  b->head = block;
  b->head_pos = pos;
  if (!drained->empty()) {
    // Into the reserve, and from there into the pool now: a thread held at its bound resumes
    // as soon as it sees `consumed` move, at full speed (ahead of the keeper's next refill).
    std::lock_guard<std::mutex> lock(pool_mu);
    b->reserve.insert(b->reserve.end(), drained->begin(), drained->end());
    drained->clear();
    if (!b->thread_exited.load(std::memory_order_acquire)) TopUpPool(b);
  }
  if (n > 0) b->consumed.fetch_add(n, std::memory_order_relaxed);
  return n;
}

}  // namespace trainprof::instrument::recorder_blocks
