#pragma once
// The in-process recorder: spans and instants recorded by a training process (from C++, from
// Python through the bindings, or by the automatic PyTorch instrumentation) and written to the
// process's own store file, <run>/nodes/<node>/proc-<pid>.sqlite.
//
// Threads: Record* may be called from any thread and never blocks: each thread appends to its
// own bounded chain of blocks, taking new blocks from a pool that the keeper fills with
// prepared (already mapped) blocks, with no lock, no allocation and no page fault on the way.
// A thread that outruns its pool takes one of the process's spare prepared blocks; when those
// are gone too, or the chain is full, the event is dropped and counted (data-quality counter
// dropped_events; no_block_drops and pool_empty_allocations below say which). One
// background flusher thread moves the buffers into the store every flush interval (default
// 500 ms), so a process that is killed loses at most that interval; a second one (the pool
// keeper) refills the pools and the spare blocks in between, whatever the store write costs.
//
// Fork: after fork() the child drops the parent's buffers and never touches the parent's
// SQLite connection; if the child records anything it starts its own flusher and opens its own
// proc-<pid>.sqlite on first use. Start/Stop are serialized by a mutex; Stop is idempotent and
// also runs at exit.

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "model/event.h"

namespace trainprof::instrument {

struct RecorderOptions {
  std::string run_dir;  // required: the run directory
  std::string node;     // node name; "" = $TRAINPROF_NODE, else the hostname
  int64_t rank = model::kMissing;
  int64_t local_rank = model::kMissing;
  int64_t world_size = model::kMissing;
  int64_t flush_interval_ns = 500'000'000;
  // Events buffered per thread between flushes; more are dropped and counted.
  int64_t max_events_per_thread = 1 << 17;
  // Write run.json when the run directory has none (the embedded default; under
  // `trainprof record` the recorder has written it already).
  bool write_run_json = true;
  std::string run_name;  // for run.json; default "run"
};

struct RecorderStats {
  int64_t recorded_events = 0;  // accepted into buffers
  int64_t dropped_events = 0;   // buffers full (events or bytes), records too large
  // Records dropped (within dropped_events) because their thread found no prepared block, in
  // its pool or among the spares, while the keeper ran: it wrote faster than the keeper
  // prepared blocks for it. Taking a fresh block instead would page-fault on that thread.
  int64_t no_block_drops = 0;
  // Blocks a thread allocated itself with no prepared block left: bulk writes, and any thread
  // before the keeper runs and has refilled (a forked child's first events, no thread to be
  // had). Nothing lost, but the allocation and its page faults happened on that thread.
  int64_t pool_empty_allocations = 0;
  // Prepared blocks held now for threads whose pools run empty (kMinSpareBlocks at least while
  // recording; more while threads outrun the keeper, freed once idle).
  int64_t spare_blocks = 0;
  int64_t written_events = 0;  // handed to the store
  int64_t flushes = 0;
  int64_t flush_cpu_ns = 0;  // CPU time of the drains and store writes (any thread)
};

// Starts recording into options.run_dir. A second Start while active is an error.
Status Start(const RecorderOptions& options);
// Flushes everything and closes the process store. Returns ok when not active.
Status Stop();
// Moves every buffer into the store now and makes it durable (for tests and before exec).
Status FlushNow();
bool Active();

// Updates the identity stamped on events recorded from now on (e.g. once
// torch.distributed.init_process_group knows the rank).
void SetRank(int64_t rank, int64_t local_rank, int64_t world_size);
int64_t Rank();

// The recorder's clock: CLOCK_MONOTONIC (cheap, never jumps) plus a fixed offset to the Unix
// epoch taken at Start, so stored timestamps are epoch ns. Python's time.perf_counter_ns reads
// the same CLOCK_MONOTONIC, so ClockOffsetNs() converts its readings too.
int64_t NowNs();
int64_t ClockOffsetNs();

// The hot path. Timestamps are epoch ns (NowNs()); step may be model::kMissing; args is a JSON
// object as text or empty; tid 0 = the calling thread's id.
void RecordSpan(std::string_view name, std::string_view category, std::string_view mode,
                int64_t step, int64_t start_ns, int64_t duration_ns, std::string_view args = {},
                int64_t tid = 0);
void RecordInstant(std::string_view name, std::string_view category, std::string_view mode,
                   int64_t step, int64_t ts_ns, std::string_view args = {}, int64_t tid = 0);
// Bulk writes on the calling thread (a profiler's thousands of events stored at once, off the
// step's path): while on, a record that finds the thread's pool of prepared blocks empty gets a
// block allocated there and then instead of being dropped.
void SetBulkWrites(bool on);
// Annotations (key/value facts about the process: DataLoader configuration, exit reason...).
void Annotate(std::string_view key, std::string_view value);
// Adds to a data-quality counter of this process's store.
void AddCounter(std::string_view name, int64_t delta);
// Sets a metadata key of this process's store (written at the next flush).
void SetMeta(std::string_view key, std::string_view value);

RecorderStats Stats();

}  // namespace trainprof::instrument
