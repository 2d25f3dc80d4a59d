#pragma once
// One node's recording into a run directory: the store writer (auto-flushed every second),
// the control channel (marks), the phase tracker, the sampling loop over the node's collectors
// and the optional Prometheus endpoint. `record` and `agent` both drive one of these; they
// differ only in what they watch and when they stop.
//
// Lifecycle (owning thread): Open -> StartSampling(pids) -> ... -> Finish.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/control_channel.h"
#include "agent/latest_values.h"
#include "agent/phase_tracker.h"
#include "agent/prometheus_exporter.h"
#include "agent/sampling_loop.h"
#include "agent/step_metrics.h"
#include "agent/summary_stats.h"
#include "collect/collector.h"
#include "model/run_metadata.h"
#include "store/node_store_writer.h"

namespace trainprof::agent {

// Makes the collectors for a context; the default is collect::BuildCollectors. Tests inject
// their own.
using CollectorFactory = std::function<std::vector<std::unique_ptr<collect::Collector>>(
    const collect::CollectorContext&)>;

struct SessionOptions {
  std::string run_dir;
  std::string node;  // "" -> this host's name
  std::string instance_type;
  int64_t interval_ns = kDefaultIntervalNs;
  int64_t flush_interval_ns = 1'000'000'000;  // durability bound: <= 1 s
  bool gpus = true;
  std::string cgroup_path;
  std::optional<ListenAddress> prometheus;
  PrometheusNaming prometheus_names;
  // With Prometheus: how often the steps the job stored are read for /metrics.
  int64_t step_poll_ns = 1'000'000'000;
  std::string control_socket;          // "" -> <run>/nodes/<node>/control.sock
  CollectorFactory collector_factory;  // empty -> collect::BuildCollectors
};

struct SessionResult {
  std::vector<SeriesSummary> summary;
  std::map<std::string, int64_t> problems;  // data-quality counters that are not zero
  SamplingStats sampling;
  int64_t marks = 0;
};

class RecordingSession {
 public:
  ~RecordingSession();
  // Opens the node's store and the control channel. `start_ns` is the run's start.
  static StatusOr<std::unique_ptr<RecordingSession>> Open(const SessionOptions& options,
                                                          int64_t start_ns);
  // Creates the collectors for `root_pids` and starts sampling (and Prometheus, if asked).
  Status StartSampling(const std::vector<int>& root_pids);
  // Stops sampling, writes the phases, closes the store. Idempotent.
  SessionResult Finish(int64_t end_ns);

  const std::string& run_dir() const { return options_.run_dir; }
  const std::string& node_name() const { return node_.node; }
  std::string control_socket() const { return control_ ? control_->path() : ""; }
  std::string prometheus_url() const { return prometheus_ ? prometheus_->url() : ""; }
  PhaseTracker* phases() { return phases_.get(); }
  // Stores a finding in this node's store (any thread; until Finish).
  void AddFinding(model::Finding finding);
  const LatestValues& latest() const { return latest_; }

 private:
  // Feeds the first and last steps that instrumented processes stored to the phase tracker.
  void NoteInstrumentedSteps();
  explicit RecordingSession(SessionOptions options) : options_(std::move(options)) {}
  StatusOr<std::string> HandleControl(const ControlRequest& request);

  SessionOptions options_;
  model::NodeInfo node_;
  int64_t start_ns_ = 0;
  std::unique_ptr<store::NodeStoreWriter> writer_;
  std::unique_ptr<PhaseTracker> phases_;
  std::unique_ptr<ControlServer> control_;
  LatestValues latest_;
  SummaryStats summary_;
  std::unique_ptr<SamplingLoop> loop_;
  std::unique_ptr<PrometheusServer> prometheus_;
  StepMetrics step_metrics_;
  // Reads the job's steps for /metrics while Prometheus is served (StepWatcher).
  std::thread step_thread_;
  std::mutex step_mu_;
  std::condition_variable step_cv_;
  bool step_stop_ = false;
  std::optional<SessionResult> result_;
};

}  // namespace trainprof::agent
