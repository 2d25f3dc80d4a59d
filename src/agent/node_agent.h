#pragma once
// `trainprof agent`: the same collection as `record`, as a long-running per-node process for
// jobs started by someone else (a scheduler, torchrun on other nodes). It watches given pids
// (and their descendants), a cgroup, or just the node, and writes into a run directory under
// its node name, so one agent per node of a multi-node job can share one run directory on
// shared storage. It stops on SIGTERM/SIGINT/SIGHUP (clean: the store is closed and run.json
// gets its end), after --duration, or when every watched pid has exited.
//
// Threads: the caller's thread waits for signals; call it before other threads start.

#include <ostream>
#include <string>
#include <vector>

#include "agent/record.h"
#include "agent/recording_session.h"
#include "base/status.h"

namespace trainprof::agent {

struct AgentOptions {
  std::string out;  // run directory; "" -> <runs_root>/<UTC time>-<name>
  std::string runs_root = "trainprof-runs";
  std::string name = "agent";
  std::string node;  // "" -> host name
  std::vector<int> pids;
  std::string cgroup;  // cgroup v2 directory of the job
  std::string interval = "500ms";
  std::string instance_type;
  std::vector<std::string> tags;
  bool no_gpu = false;
  std::string prometheus;
  bool prometheus_allow_remote = false;
  std::string prometheus_names = "trainprof";  // ParsePrometheusNames
  double duration_s = 0;                       // > 0: stop after this long
  bool quiet = false;
  CollectorFactory collector_factory;  // tests; empty -> collect::BuildCollectors
  // Live work (rules) joined in by the CLI, as for `record` (record.h): `live_poll` runs on the
  // agent's loop every `live_period_ns`; `on_finished` once the session is closed. One agent of
  // a multi-node job should evaluate the rules (it reads every node of the run directory).
  std::function<void(const RecordOptions::LiveContext&)> live_poll;
  int64_t live_period_ns = 0;
  std::function<void(const std::string& run_dir, std::ostream& out)> on_finished;
};

Status RunAgent(const AgentOptions& options, std::ostream& out);

}  // namespace trainprof::agent
