#pragma once
// `trainprof record [options] -- CMD ...`: runs CMD, records the node and CMD's process tree
// into a run directory while it runs, and exits with CMD's exit status.
//
// Environment given to CMD (so in-process instrumentation and `trainprof mark` find the run):
//   TRAINPROF_RUN_DIR   the run directory
//   TRAINPROF_NODE      this node's name in the run
//   TRAINPROF_SOCKET    the control socket (marks, steps)
//   TRAINPROF_RUN_ID    the run's id (run.json)
// plus the in-process instrumentation's variables (PYTHONPATH with the startup hook,
// TRAINPROF_AUTO, TRAINPROF_DETAIL_STEPS...; instrument/child_env.h, docs/instrumentation.md).
//
// Threads: the caller's thread waits for CMD and relays signals; see child_process.h. Call it
// from a process's main thread before other threads start, so every thread inherits the
// blocked relayed signals.

#include <sys/types.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "agent/recording_session.h"
#include "base/status.h"
#include "model/finding.h"

namespace trainprof::agent {

struct RecordOptions {
  std::vector<std::string> command;
  std::string out;  // run directory; "" -> <runs_root>/<UTC time>-<name>
  std::string runs_root = "trainprof-runs";
  std::string name;  // "" -> CMD's base name
  std::string interval = "500ms";
  std::string instance_type;
  std::vector<std::string> tags;  // key=value
  std::string node;               // "" -> host name
  bool no_gpu = false;
  std::string prometheus;  // "" -> no endpoint
  bool prometheus_allow_remote = false;
  std::string prometheus_names = "trainprof";  // ParsePrometheusNames
  bool quiet = false;                          // no start line and summary (tests)
  bool no_auto = false;                        // no automatic framework instrumentation in CMD
  std::string detail_steps;                    // "10-20": operator-level profiling for those steps
  std::string python_profile;                  // "10-12": cProfile for those steps
  // START+SECONDS (seconds after the start, or a Unix time): the same over a time window.
  std::string detail_time;
  std::string python_profile_time;
  int64_t health_every = -1;  // train_loss / grad_norm every N training steps (0 off; -1 default)
  // Called once the command has ended and the run is closed (rules, cost, report: the CLI
  // joins those in; agent/ depends on none of them). Its problems never change the exit code.
  std::function<void(const std::string& run_dir, std::ostream& out)> on_finished;
  // Called once the run directory exists, before the command starts (the CLI starts the
  // dashboard there for `record --serve`). Its problems never stop the command.
  std::function<void(const std::string& run_dir, std::ostream& out)> on_started;
  // Work joined in while the command runs (live rules; the CLI provides it): `poll` runs on its
  // own thread every `live_period_ns` from the start of sampling until the command ends, and
  // is never called after that. Its problems never touch the command.
  struct LiveContext {
    std::string run_dir;
    pid_t child = -1;
    std::function<void(model::Finding)> store_finding;  // into this node's store, thread-safe
    std::ostream* out = nullptr;                        // for "rule fired" lines
  };
  std::function<void(const LiveContext&)> live_poll;
  int64_t live_period_ns = 5'000'000'000;
  CollectorFactory collector_factory;  // tests; empty -> collect::BuildCollectors
};

// Returns the exit code `trainprof record` should exit with: CMD's status, 128+signal when CMD
// was killed, 127/126 when it could not be started. Errors before CMD starts (bad options, a
// run directory that cannot be created) come back as a Status, and CMD is not started.
StatusOr<int> RunRecord(const RecordOptions& options, std::ostream& out);

// Parses "key=value" tags.
StatusOr<std::map<std::string, std::string>> ParseTags(const std::vector<std::string>& tags);

// Prints the end-of-run summary: duration, headline series p50/p95/max, data-quality problems.
// `recorder_cpu_ns` (>= 0): this process's own CPU time, printed beside the ticks.
void PrintSummary(const SessionResult& result, int64_t duration_ns, std::ostream& out,
                  int64_t recorder_cpu_ns = -1);

}  // namespace trainprof::agent
