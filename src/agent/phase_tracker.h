#pragma once
// Turns what happens during a run into "phase" spans and "mark" instants in the node's store.
//
// User marks (from `trainprof mark NAME` or the Python API, through the control channel) are
// stored as instants with category "mark". A mark NAME_start opens phase NAME and NAME_end
// closes it into a span with category "phase" (download_start + download_end -> "download").
// An _end without a matching _start is stored as a mark and counted (`unpaired_marks`); phases
// still open when the run ends are closed at the end with args {"closed_by":"run_end"}.
//
// The job's own phases are written by Finish(): initialization from the start until the first
// training step, training until the last step ends, finalization until the end. Steps are
// reported by instrumentation (NoteStep) or by the user marking training_start/_end. Without
// either, the whole run is one "initialization" span whose args say so.
//
// Threads: any thread (a mutex guards the state); the writer is thread-safe.

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "base/status.h"
#include "store/node_store_writer.h"

namespace trainprof::agent {

// Mark names are short identifiers: [A-Za-z0-9_.-], 1..128 characters.
Status ValidateMarkName(const std::string& name);

class PhaseTracker {
 public:
  PhaseTracker(store::NodeStoreWriter* writer, int64_t run_start_ns, int64_t pid);

  // The pid stored with phase and mark events (the command's, once started).
  void SetPid(int64_t pid);
  void Mark(const std::string& name, int64_t ts_ns);
  // A training step [start_ns, end_ns) was seen (by instrumentation).
  void NoteStep(int64_t start_ns, int64_t end_ns);
  // Writes the job phases and closes open user phases. Call once, at the end of the run.
  void Finish(int64_t run_end_ns);

  int64_t marks() const;

 private:
  void EmitPhase(const std::string& name, int64_t start_ns, int64_t end_ns,
                 const std::string& args);

  store::NodeStoreWriter* writer_;
  int64_t run_start_ns_;
  int64_t pid_;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> open_;  // phase name -> start
  std::optional<int64_t> first_step_ns_;
  std::optional<int64_t> last_step_end_ns_;
  std::optional<int64_t> training_start_ns_;  // from training_start / training_end marks
  std::optional<int64_t> training_end_ns_;
  int64_t marks_ = 0;
  bool finished_ = false;
};

}  // namespace trainprof::agent
