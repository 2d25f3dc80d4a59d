#pragma once
// The recorder's memory (recorder.cc's internals, not an API): records in per-thread chains of
// blocks, the pools of prepared blocks the threads take from, and the process's spare blocks.
//
// A thread appends records to its own chain (ThreadBuffer: one writer, the thread; one reader,
// the flusher) and takes each next block from its pool, a single-producer/single-consumer ring
// that the pool keeper fills with prepared blocks, and the flusher with the blocks it has just
// drained, one at a time under pool_mu (every page already mapped, so that the
// recording thread takes no page fault). A thread that outruns its pool takes a spare block
// (SparePool: prepared blocks that belong to no thread); with none left it drops and counts
// the record (TakeBlock: where no keeper prepares blocks, it allocates one itself).
// Blocks come from the block arena (below), not from malloc. Drained blocks go back to the
// thread's reserve, from which the keeper refills the pool.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace trainprof::store {
class NodeStoreWriter;
}

namespace trainprof::instrument::recorder_blocks {

// What the hot path writes: a fixed header, then the name, category, mode and args bytes,
// padded to 8. No std::string, no allocation: a record is a few stores into a block.
struct RecordHeader {
  int64_t start_ns;
  int64_t duration_ns;
  int64_t step;
  int64_t tid;  // 0: the buffer's thread
  uint32_t args_len;
  uint16_t name_len;
  uint8_t category_len;
  uint8_t mode_len;
  uint8_t kind;
};
inline constexpr size_t kHeaderBytes = (sizeof(RecordHeader) + 7) & ~size_t{7};

// A record's size in its block: the header and its texts, padded to 8 (writer and reader).
constexpr size_t RecordBytes(size_t name, size_t category, size_t mode, size_t args) {
  return (kHeaderBytes + name + category + mode + args + 7) & ~size_t{7};
}
inline constexpr uint32_t kBlockBytes = 64 << 10;
// A record larger than this (args of megabytes) is dropped and counted, never truncated.
inline constexpr size_t kMaxRecordBytes = 16 << 20;
// Per-thread memory bound, whatever the event count: blocks in the chain, in the pool and kept
// for refills.
inline constexpr int64_t kMaxBufferedBytesPerThread = 64 << 20;
// The pool of prepared blocks a thread takes from: a ring with one producer at a time (the
// keeper, or the flusher right after a drain, both under the recorder's pool_mu) and one
// consumer (the thread), as many slots as the memory bound allows blocks.
inline constexpr uint32_t kPoolSlots = kMaxBufferedBytesPerThread / kBlockBytes;
// Blocks a thread's pool holds at least.
inline constexpr int64_t kMinPoolBlocks = 2;
// Prepared blocks that belong to no thread: a thread whose pool is empty takes one before it
// allocates (no page fault). The keeper keeps four times the most blocks that threads took
// from it in one refill period lately, and at least kMinSpareBlocks, and parks here the drained
// blocks the reserves do not keep instead of freeing them while threads record; it frees the
// rest once recording is idle. kMinSpareBlocks covers a new thread's first tens of
// milliseconds flat out before the keeper has seen its rate, and the demand term the bursts
// of 128 threads on 2 cores that outrun the keeper (span load, 2 s runs of 16 x 8 threads,
// calls over 10 us with a page fault: 24-35 with a floor of 48 and twice the demand, 3-8 with
// 64 and four times, 0-4 with 80 and four times).
// From the recorder's Start, until the keeper has refilled for a flush interval, the floor is
// kStartSpareBlocks instead: a program's threads typically begin recording together, before
// the keeper has seen any rate (span load: 16 processes x 8 threads flat out from Start, 30 s
// runs: 61-125 blocks allocated on recording threads within their first 1.5 s, 0-5 calls over
// 10 us with a page fault; with this floor fewer runs had any, and what outruns it since is
// dropped, not allocated).
inline constexpr int kSpareSlots = 192;        // 12 MiB per process at most
inline constexpr int kMinSpareBlocks = 80;     // 5 MiB
inline constexpr int kStartSpareBlocks = 160;  // 10 MiB
// While threads take blocks, the keeper tops their pools up this many times per flush
// interval; a pool holds what its thread took in its busiest refill period lately this many
// times over (the flusher refills nothing while it writes the store).
inline constexpr int64_t kRefillsPerInterval = 10;
inline constexpr int64_t kPoolPeriods = 4;
inline constexpr size_t kPageBytes = 4096;

// A block of records. The owning thread writes records and then publishes them by advancing
// `committed` (release); the flusher reads up to `committed` (acquire). When a record does
// not fit, the thread links a new block through `next` and never touches this one again.
struct Block {
  std::atomic<uint32_t> committed{0};
  uint32_t capacity = 0;
  std::atomic<Block*> next{nullptr};
  // All pages mapped (NewPreparedBlock, or Prepare on the keeper's thread before a block that
  // a thread allocated itself goes into a pool).
  bool prepared = false;
  char* data() { return reinterpret_cast<char*>(this) + sizeof(Block); }
};

// A block of `capacity` bytes, unprepared. Blocks of kBlockBytes come from the block arena
// (below) while it has room, larger ones (and any when it has none) from the heap.
Block* NewBlock(uint32_t capacity);
void FreeBlock(Block* b);

// The block arena: standard blocks are carved from one range of address space mapped once,
// at the recorder's first block, with pages present only where blocks are in use or prepared,
// and go back to a free list (their pages returned to the system) when freed; not from
// malloc. Through malloc, the blocks shared heaps with the program: growing and trimming a
// heap changes its mapping (mprotect, munmap), and while it does, every thread's page fault in
// that heap waits, a recording thread's included. In the span load, 16 processes x 8 threads
// flat out, that made about half the recording threads' calls over 10 us. A block is taken
// without a lock that could make a thread wait: a freed one when the free list's lock is free,
// else the range's next (a bump pointer). The keeper maps a block's pages in one call that
// writes nothing (MADV_POPULATE_WRITE; before Linux 5.14, a byte written per page). Where the
// range cannot be mapped (RLIMIT_AS, strict overcommit) or is spent, blocks come from the
// heap as before. A forked child gets the range empty (MADV_WIPEONFORK), not shared
// copy-on-write: the parent's threads then write on into their blocks without a page fault.
inline constexpr size_t kArenaBytes = size_t{512} << 20;
// Held across fork() (the recorder's atfork handlers), innermost: a child must not inherit
// the free list's lock held.
void LockArenaForFork();
void UnlockArenaAfterFork();
// Whether `b` came from the arena (tests).
bool InArena(const Block* b);
// Maps every page of `b` (on the calling thread), without writing to it where it can.
void Prepare(Block* b);
Block* NewPreparedBlock();

// One thread's records not yet drained: a chain of blocks with one writer (the thread) and one
// reader (the flusher, under the recorder's flush_mu), and a pool of prepared blocks that the
// keeper fills and the thread takes from; no lock between them. Made by the keeper (kept ready
// for a thread's first event) or, when none is ready, by the thread itself; held by the
// recorder's registry, which lets it go once its thread has exited and it is drained.
struct ThreadBuffer {
  // Written by the owning thread only.
  Block* tail = nullptr;
  uint32_t tail_pos = 0;
  // Records accepted; only the owning thread writes it (a plain store: no locked instruction),
  // Stats reads it.
  std::atomic<int64_t> produced{0};
  // Blocks taken past an empty pool (spare or allocated: the spares' demand), the bytes of
  // every record that found the pool empty, dropped ones included (the keeper sizes the pool
  // from them), and the blocks the thread allocated itself (no spare block either). Written by
  // the owning thread only.
  std::atomic<int64_t> starved{0};
  std::atomic<int64_t> starved_bytes{0};
  std::atomic<int64_t> allocated{0};
  // Records dropped because no prepared block was left while the keeper runs (TakeBlock).
  // Written by the owning thread only.
  std::atomic<int64_t> no_block_drops{0};
  // The pool: slots [pool_read, pool_write) hold prepared blocks. The keeper (or the flusher
  // after a drain; either under pool_mu) fills slots and advances pool_write (release); the
  // thread takes from pool_read and advances it (release).
  std::atomic<uint64_t> pool_write{0};
  std::atomic<uint64_t> pool_read{0};
  Block* pool[kPoolSlots] = {};
  // Read and written by the flusher only (under flush_mu).
  Block* head = nullptr;
  uint32_t head_pos = 0;
  // Read and written under the recorder's pool_mu (the flusher adds drained blocks, the keeper
  // refills).
  std::vector<Block*> reserve;  // drained blocks kept for the next refills
  uint64_t read_seen = 0;       // pool_read at the last refill
  int64_t starved_seen = 0, starved_bytes_seen = 0;
  // The busiest refill period lately: the most blocks taken in one refill period this flush
  // interval, and before it (halved each interval: an idle thread's pool shrinks).
  int64_t peak_blocks_per_refill = 0;
  int64_t peak_this_interval = 0;
  int64_t refills_this_interval = 0;
  // Shared.
  std::atomic<int64_t> consumed{0};
  std::atomic<int64_t> dropped{0};
  std::atomic<int64_t> block_bytes{0};  // allocated to this buffer: chain, pool and reserve
  std::atomic<bool> thread_exited{false};
  std::atomic<int64_t> tid{0};

  ~ThreadBuffer();
};

// A buffer with its first block and a pool of `pool_blocks`, all prepared. Made by the keeper
// for the ready slots (one pool block: a ready buffer costs 128 KiB), or by a thread that found
// none ready.
std::shared_ptr<ThreadBuffer> MakeBuffer(int64_t pool_blocks);

// The process's spare blocks. Take is lock-free (any thread); the rest is the keeper's, under
// the recorder's pool_mu.
class SparePool {
 public:
  // A spare block, or null when none is left.
  Block* Take();
  // Parks a drained block that its reserve need not keep. False: every slot is taken.
  bool Park(Block* block);
  // Spare blocks held now (any thread; a snapshot).
  int64_t Held() const;
  // Blocks that threads wanted from their empty pools since the last Refill.
  void AddDemand(int64_t blocks) { demand_ += blocks; }
  // Recording starts: the floor is kStartSpareBlocks until a flush interval's refills are done.
  void BeginRecording() { start_floor_ = true; }
  // Tops the spares up to their target; once recording has been idle for a flush interval
  // (`idle`), frees those above it (while threads record, nothing that may have to be mapped
  // again is freed).
  void Refill(bool idle);
  // Frees every spare block and forgets the demand (Stop: the next Start begins afresh).
  void FreeAll();
  // Forgets every spare block without freeing it (a forked child: they are the parent's).
  void Forget();

 private:
  std::atomic<Block*> slots_[kSpareSlots] = {};
  // The blocks wanted in this refill period, and their most in one period this flush interval
  // and lately (halved each interval).
  int64_t demand_ = 0;
  int64_t peak_ = 0;
  int64_t peak_this_interval_ = 0;
  int64_t refills_ = 0;
  bool start_floor_ = false;
};

// The next block for a record of `need` bytes, on the thread that owns `b` (recorder_blocks.cc).
// `bulk`: a bulk write, whose burst is not the thread's rate (not counted). `allocate`: with no
// prepared block left (pool and spares empty), allocate one here rather than drop the record
// (bulk writes, records larger than a block, and a process whose keeper is not running or has
// not refilled yet always may). Null: drop the record (over the thread's memory bound, or no
// prepared block and not `allocate`: counted in no_block_drops).
Block* TakeBlock(ThreadBuffer* b, size_t need, bool bulk, bool allocate, SparePool& spares);

// Moves blocks from the reserve of `b` into its pool, up to the pool's current size (the
// flusher, under pool_mu, right after a drain put them there: a thread held at its bound
// resumes at once, ahead of the keeper's next refill). Changes none of the keeper's
// statistics.
void TopUpPool(ThreadBuffer* b);

// Tops up the pool of `b` (the keeper, under pool_mu). Returns whether the thread took blocks
// or went without since the last refill.
bool RefillPool(ThreadBuffer* b, bool idle, SparePool& spares);

// The flusher's side of a thread buffer: hands every record the thread has published to
// `writer` as events of process `pid` and `rank`; the blocks it is done with go to the reserve
// (under `pool_mu`) and from there into the pool, for the keeper's next refills (a block larger
// than standard is freed; `drained` is scratch). Returns the number of records. Called with the
// recorder's flush_mu held (one drain at a time).
int64_t DrainBuffer(ThreadBuffer* b, store::NodeStoreWriter* writer, int64_t pid, int64_t rank,
                    std::mutex& pool_mu, std::vector<Block*>* drained);

}  // namespace trainprof::instrument::recorder_blocks
