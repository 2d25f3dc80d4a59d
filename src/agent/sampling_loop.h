#pragma once
// The sampling loop: one thread that, on a fixed schedule, takes one timestamp, calls every
// collector in order, stores the tick's values and sleeps until the next tick.
//
// Schedule: tick k is due at start + k * interval (monotonic clock), so the interval does not
// drift with the time a tick takes. A tick that runs past the next due time makes the loop skip
// to the next future slot; every skipped slot is counted in the data-quality counter
// `sampling_overruns` (never silently skipped).
//
// Never harms the job: a collector that throws is caught, logged once and counted
// (`collector_errors`); values that are not finite are dropped and counted (`invalid_values`);
// store problems (a slow or full disk) show up in the writer's counters and are logged once
// here. Nothing the loop does can stop or slow the command it watches.
//
// Threads: Start/Stop from the owning thread; collectors, the sink and the writer's Append run
// on the loop's own thread. RunTick is public so tests can drive ticks without the thread.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agent/latest_values.h"
#include "agent/summary_stats.h"
#include "collect/collector.h"
#include "store/node_store_writer.h"

namespace trainprof::agent {

// The intervals `--interval` accepts: 100ms, 200ms, 500ms, 1s, 5s, 1min.
inline constexpr int64_t kDefaultIntervalNs = 500'000'000;
bool IsAllowedInterval(int64_t interval_ns);
// Parses "100ms", "0.5s", "500ms", "1s", "5s", "1min" / "1m" / "60s"; only the allowed set.
StatusOr<int64_t> ParseInterval(const std::string& text);

struct SamplingOptions {
  int64_t interval_ns = kDefaultIntervalNs;
};

struct SamplingStats {
  int64_t ticks = 0;
  int64_t overruns = 0;
  int64_t collector_errors = 0;
  int64_t invalid_values = 0;
  int64_t values = 0;
};

class SamplingLoop {
 public:
  // `writer` must outlive the loop; `latest` and `summary` may be null.
  SamplingLoop(std::vector<std::unique_ptr<collect::Collector>> collectors,
               store::NodeStoreWriter* writer, LatestValues* latest, SummaryStats* summary,
               SamplingOptions options);
  ~SamplingLoop();
  SamplingLoop(const SamplingLoop&) = delete;
  SamplingLoop& operator=(const SamplingLoop&) = delete;

  // Starts the sampling thread; Unavailable when no thread can be started (the caller goes
  // on without sampling).
  Status Start();
  // Wakes the thread, lets the current tick finish and joins. Idempotent.
  void Stop();

  // Samples every collector once at `tick` and stores the values (the loop body).
  void RunTick(const collect::Tick& tick);

  // Adds to a data-quality counter from another thread (e.g. the control channel).
  void CountFromOutside(const std::string& counter, int64_t delta);

  SamplingStats stats() const;
  // Data-quality counters this loop has seen (from collectors, itself and CountFromOutside).
  std::map<std::string, int64_t> counters() const;

 private:
  class Sink;
  void Loop();
  void CheckWriter();

  std::vector<std::unique_ptr<collect::Collector>> collectors_;
  store::NodeStoreWriter* writer_;
  LatestValues* latest_;
  SummaryStats* summary_;
  SamplingOptions options_;

  // Loop-thread state.
  std::unordered_map<std::string, store::SeriesId> series_ids_;  // "metric\0device"
  int64_t last_write_errors_ = 0;
  int64_t last_dropped_ = 0;

  mutable std::mutex mu_;  // guards stats_, counters_, stop_
  std::condition_variable cv_;
  bool stop_ = false;
  SamplingStats stats_;
  std::map<std::string, int64_t> counters_;
  std::thread thread_;
};

}  // namespace trainprof::agent
