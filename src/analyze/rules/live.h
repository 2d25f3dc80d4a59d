#pragma once
// LiveEvaluator: the rules evaluated while a run is being recorded, incrementally.
//
// `record` polls it every few seconds on its own thread: each Poll() reads only what the run's
// stores gained since the previous one (system samples after the last timestamp seen, steps
// after the last step of each process and mode, phase / collective / dataloader events from the
// chunks written since), feeds one RuleEngine, and hands back the findings that became final.
// When the job has ended and its store is closed, Finish() reads the rest, finalises the rules
// and returns the last findings. The engine's canonical order and release lag make the live
// results the same as `trainprof rules RUN` on the finished run (tested end to end).
//
// Threads: one thread at a time (the record loop's live thread, then the CLI at the end).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>
#include "analyze/rules/config.h"
#include "analyze/rules/engine.h"
#include "base/status.h"
#include "model/finding.h"
#include "store/run_reader.h"

namespace trainprof::analyze::rules {

struct LiveStats {
  int64_t polls = 0;
  int64_t values_read = 0;
  int64_t steps_read = 0;
  int64_t events_read = 0;
  int64_t findings = 0;
  // This thread's CPU time in Poll() (reading, evaluating) and in Finish() (the rest, final
  // windows), and the monotonic span from the first poll to Finish(): the live overhead.
  int64_t poll_cpu_ns = 0;
  int64_t finish_cpu_ns = 0;
  int64_t first_poll_mono_ns = 0;
  int64_t finish_mono_ns = 0;
};

class LiveEvaluator {
 public:
  // Opens the run directory (run.json must exist) and creates the rules `config` selects.
  static StatusOr<std::unique_ptr<LiveEvaluator>> Open(const std::string& run_dir,
                                                       const RuleConfig& config,
                                                       const EngineOptions& options = {});
  // Reads what the run gained, feeds it, returns the findings emitted since the last call.
  StatusOr<std::vector<model::Finding>> Poll();
  // Reads the rest, finalises; returns the findings not returned before. Idempotent.
  StatusOr<std::vector<model::Finding>> Finish();

  const RuleEngine& engine() const { return *engine_; }
  LiveStats stats() const { return stats_; }

 private:
  LiveEvaluator() = default;
  Status ReadNew();

  std::unique_ptr<store::RunReader> reader_;
  std::unique_ptr<RuleEngine> engine_;
  store::ChunkCursor metric_chunks_;
  // Node and mode names as small ids that last across polls (a poll's tables code them anew).
  std::unordered_map<std::string, int32_t> name_ids_;
  // The start of the last step fed per (node, pid, mode) (name ids).
  std::map<std::tuple<int32_t, int64_t, int32_t>, int64_t> last_step_;
  // The events rules read and the step and step-part events come from the chunks written since
  // the last poll, read once. A step's parts end before it and can sit in the chunk before the
  // step's own span: parts that found no step yet are carried to the next poll (for a bounded
  // time).
  store::EventCursor events_;
  store::EventTable unmatched_parts_;
  std::map<std::string, bool> node_info_set_;
  LiveStats stats_;
};

}  // namespace trainprof::analyze::rules
