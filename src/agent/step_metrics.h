#pragma once
// The training job's own figures for /metrics: steps, step time, data wait and throughput, per
// step mode ("train", "eval", ...). Fed from the steps the instrumented processes store in the
// run (StepWatcher reads them as the stores grow, RecordingSession runs it once a second while
// Prometheus is served).
//
// Exported (prometheus_exporter.cc): trainprof_steps_total, trainprof_step_duration_seconds (a
// histogram: _bucket / _sum / _count), trainprof_data_wait_seconds_total (the time the steps
// waited for their batches: every data_wait span), trainprof_data_wait_ratio and
// trainprof_throughput_steps_per_second (over the steps that ended in the last
// kThroughputWindowNs before the newest one), trainprof_last_step_timestamp_seconds.
// Threads: Add* from the watcher's thread, Get from the server's; a mutex orders them.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "store/run_reader.h"

namespace trainprof::agent {

inline constexpr int64_t kThroughputWindowNs = 10'000'000'000;

// Upper bounds (seconds) of the step-time histogram's buckets; +Inf is implied.
const std::vector<double>& StepDurationBuckets();

struct StepModeStats {
  int64_t steps = 0;
  double duration_sum_s = 0;
  std::vector<int64_t> bucket_counts;  // cumulative, one per StepDurationBuckets() bound
  double data_wait_sum_s = 0;
  int64_t last_end_ns = 0;
  // Over the steps that ended within kThroughputWindowNs of the newest one; NaN with fewer
  // than two steps there.
  double throughput_steps_per_second = 0;
  double data_wait_ratio = 0;  // data_wait in the window / step time in the window; NaN: none
};

class StepMetrics {
 public:
  void AddStep(const std::string& mode, int64_t start_ns, int64_t duration_ns);
  void AddDataWait(const std::string& mode, int64_t start_ns, int64_t duration_ns);
  std::map<std::string, StepModeStats> Get() const;

 private:
  struct Mode {
    StepModeStats stats;
    std::deque<std::pair<int64_t, int64_t>> window;  // (end_ns, duration_ns) of recent steps
    std::deque<std::pair<int64_t, int64_t>> waits;   // (end_ns, duration_ns) of recent waits
  };
  mutable std::mutex mu_;
  std::map<std::string, Mode> modes_;
};

// Reads the steps and data waits that the run's stores gained since the last Poll (one node's)
// and adds them to a StepMetrics. Each process writes its steps in order: per (store's pid,
// mode) only those that start after the last one taken are new.
class StepWatcher {
 public:
  StepWatcher(std::string run_dir, std::string node, StepMetrics* metrics)
      : run_dir_(std::move(run_dir)), node_(std::move(node)), metrics_(metrics) {}
  Status Poll();

 private:
  std::string run_dir_, node_;
  StepMetrics* metrics_;
  std::unique_ptr<store::RunReader> reader_;
  store::EventCursor cursor_;
  std::map<std::tuple<int64_t, std::string, std::string>, int64_t> last_start_;
};

}  // namespace trainprof::agent
