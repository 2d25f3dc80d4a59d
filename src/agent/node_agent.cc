#include "agent/node_agent.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "agent/child_process.h"
#include "agent/record.h"
#include "base/files.h"
#include "base/logging.h"
#include "base/time.h"
#include "store/run_directory.h"
#include "trainprof/version.h"

namespace trainprof::agent {
namespace {

// Alive and not a zombie (a zombie's parent has not reaped it yet; it runs no more).
bool ProcessExists(int pid) {
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  auto stat = ReadFileToString("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return false;
  size_t paren = stat->rfind(')');
  return paren == std::string::npos || paren + 2 >= stat->size() || (*stat)[paren + 2] != 'Z';
}

}  // namespace

Status RunAgent(const AgentOptions& options, std::ostream& out) {
  TP_ASSIGN_OR_RETURN(int64_t interval_ns, ParseInterval(options.interval));
  TP_ASSIGN_OR_RETURN(auto tags, ParseTags(options.tags));
  TP_ASSIGN_OR_RETURN(PrometheusNaming prometheus_names,
                      ParsePrometheusNames(options.prometheus_names));
  std::optional<ListenAddress> prometheus;
  if (!options.prometheus.empty()) {
    TP_ASSIGN_OR_RETURN(
        prometheus, ParsePrometheusAddress(options.prometheus, options.prometheus_allow_remote));
  }
  for (int pid : options.pids) {
    if (pid <= 0 || !ProcessExists(pid)) {
      return InvalidArgument("--pid " + std::to_string(pid) + ": no such process");
    }
  }
  if (!options.cgroup.empty() && !IsDirectory(options.cgroup)) {
    return InvalidArgument("--cgroup " + options.cgroup + ": not a directory");
  }

  SignalBlock signals;
  const int64_t start_ns = WallNowNs();
  std::string run_dir = options.out;
  if (run_dir.empty()) {
    run_dir = JoinPath(options.runs_root,
                       FormatCompactUtc(start_ns) + "-" + store::SanitizeNodeName(options.name));
  }
  // Agents of a multi-node job share the run directory: the first one writes run.json, the
  // others keep it.
  bool created_run_json = false;
  if (!PathExists(store::RunJsonPath(run_dir))) {
    model::RunMetadata meta;
    meta.name = options.name;
    meta.run_id = model::NewRunId(options.name, start_ns);
    meta.start_ns = start_ns;
    meta.source = "agent";
    meta.instance_type = options.instance_type;
    meta.tags = tags;
    meta.trainprof_version = kVersion;
    TP_RETURN_IF_ERROR(store::WriteRunMetadata(run_dir, meta).WithContext("agent"));
    created_run_json = true;
  }

  SessionOptions so;
  so.run_dir = run_dir;
  so.node = options.node;
  so.instance_type = options.instance_type;
  so.interval_ns = interval_ns;
  so.gpus = !options.no_gpu;
  so.cgroup_path = options.cgroup;
  so.prometheus = prometheus;
  so.prometheus_names = prometheus_names;
  so.collector_factory = options.collector_factory;
  TP_ASSIGN_OR_RETURN(auto session, RecordingSession::Open(so, start_ns));
  TP_RETURN_IF_ERROR(session->StartSampling(options.pids));
  if (!options.quiet) {
    out << "trainprof agent: recording node " << session->node_name() << " to " << run_dir;
    if (!options.pids.empty()) out << " (" << options.pids.size() << " pid(s) and descendants)";
    if (!options.cgroup.empty()) out << " (cgroup " << options.cgroup << ")";
    out << "\n";
    if (!session->prometheus_url().empty()) {
      out << "trainprof agent: Prometheus metrics at " << session->prometheus_url() << "\n";
    }
    out << std::flush;
  }

  const int64_t deadline_mono =
      options.duration_s > 0
          ? MonotonicNowNs() + static_cast<int64_t>(options.duration_s * kNanosPerSecond)
          : 0;
  std::string stop_reason;
  RecordOptions::LiveContext live;
  live.run_dir = run_dir;
  live.child = -1;  // the agent started no job: a "stop" action has nothing to signal
  live.store_finding = [s = session.get()](model::Finding f) { s->AddFinding(std::move(f)); };
  live.out = options.quiet ? nullptr : &out;
  int64_t next_live_mono = MonotonicNowNs() + options.live_period_ns;
  while (stop_reason.empty()) {
    if (options.live_poll && options.live_period_ns > 0 && MonotonicNowNs() >= next_live_mono) {
      options.live_poll(live);
      next_live_mono = MonotonicNowNs() + options.live_period_ns;
    }
    timespec timeout{0, 200 * 1000 * 1000};
    siginfo_t info;
    int sig = sigtimedwait(&signals.relayed(), &info, &timeout);
    if (sig > 0 && sig != SIGCHLD) {
      stop_reason = std::string("signal ") + sigabbrev_np(sig);
      break;
    }
    if (deadline_mono > 0 && MonotonicNowNs() >= deadline_mono) stop_reason = "duration reached";
    if (!options.pids.empty()) {
      bool any = false;
      for (int pid : options.pids) any |= ProcessExists(pid);
      if (!any) stop_reason = "watched processes exited";
    }
  }
  int64_t end_ns = WallNowNs();
  SessionResult result = session->Finish(end_ns);

  // Extend the run's end (several agents may finish at different times).
  auto meta = store::ReadRunMetadata(run_dir);
  if (meta.ok()) {
    if (!meta->end_ns || *meta->end_ns < end_ns) meta->end_ns = end_ns;
    Status st = store::WriteRunMetadata(run_dir, *meta);
    if (!st.ok()) TP_LOG_WARNING("updating run.json: " + st.message());
  } else if (created_run_json) {
    TP_LOG_WARNING("run.json unreadable at the end: " + meta.status().message());
  }
  if (!options.quiet) {
    out << "trainprof agent: stopped (" << stop_reason << ")\n";
    PrintSummary(result, end_ns - start_ns, out);
  }
  if (options.on_finished) options.on_finished(run_dir, out);
  return OkStatus();
}

}  // namespace trainprof::agent
