#include "agent/record.h"

#include <stdlib.h>

#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>

#include "agent/child_process.h"
#include "base/files.h"
#include "base/logging.h"
#include "base/platform.h"
#include "base/time.h"
#include "instrument/child_env.h"
#include "model/data_quality.h"
#include "store/run_directory.h"
#include "trainprof/version.h"

namespace trainprof::agent {
namespace {

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A run directory that does not exist yet: <root>/<time>-<name>, then -2, -3, ...
std::string FreshRunDir(const std::string& root, int64_t start_ns, const std::string& name) {
  std::string base =
      JoinPath(root, FormatCompactUtc(start_ns) + "-" + store::SanitizeNodeName(name));
  std::string dir = base;
  for (int i = 2; PathExists(dir); ++i) dir = base + "-" + std::to_string(i);
  return dir;
}

std::string FormatBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  std::ostringstream s;
  s << std::fixed << std::setprecision(unit == 0 ? 0 : 1) << bytes << " " << kUnits[unit];
  return s.str();
}

std::string FormatSummaryValue(const std::string& metric, double v) {
  std::ostringstream s;
  if (metric.size() > 6 && metric.compare(metric.size() - 6, 6, "_bytes") == 0) {
    return FormatBytes(v);
  }
  if (metric == "process_cpu_utilization_ratio") {
    s << std::fixed << std::setprecision(2) << v << " cores";
  } else {
    s << std::fixed << std::setprecision(1) << v * 100 << " %";
  }
  return s.str();
}

}  // namespace

StatusOr<std::map<std::string, std::string>> ParseTags(const std::vector<std::string>& tags) {
  std::map<std::string, std::string> out;
  for (const std::string& tag : tags) {
    size_t eq = tag.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--tag '" + tag + "': expected key=value");
    }
    out[tag.substr(0, eq)] = tag.substr(eq + 1);
  }
  return out;
}

void PrintSummary(const SessionResult& result, int64_t duration_ns, std::ostream& out,
                  int64_t recorder_cpu_ns) {
  if (!result.summary.empty()) {
    out << "  " << std::left << std::setw(32) << "series" << std::setw(8) << "device" << std::right
        << std::setw(13) << "p50" << std::setw(13) << "p95" << std::setw(13) << "max"
        << "\n";
    for (const SeriesSummary& s : result.summary) {
      out << "  " << std::left << std::setw(32) << s.metric << std::setw(8)
          << (s.device.empty() ? "-" : s.device) << std::right << std::setw(13)
          << FormatSummaryValue(s.metric, s.p50) << std::setw(13)
          << FormatSummaryValue(s.metric, s.p95) << std::setw(13)
          << FormatSummaryValue(s.metric, s.max) << "\n";
    }
  } else {
    out << "  no samples (the command ended before the first tick)\n";
  }
  out << "  " << result.sampling.ticks << " ticks in " << FormatDuration(duration_ns);
  if (result.marks > 0) out << ", " << result.marks << " marks";
  if (recorder_cpu_ns >= 0 && duration_ns > 0) {
    // What the recorder itself took (all its threads, start-up included): the most it can have
    // taken from the job.
    char buf[96];
    std::snprintf(buf, sizeof buf, "; trainprof used %.0f ms of CPU = %.3f %% of one core",
                  static_cast<double>(recorder_cpu_ns) / 1e6,
                  static_cast<double>(recorder_cpu_ns) / static_cast<double>(duration_ns) * 100);
    out << buf;
  }
  out << "\n";
  if (result.problems.empty()) {
    out << "  data quality: no problems\n";
  } else {
    out << "  data quality:";
    for (const auto& [name, value] : result.problems) out << " " << name << "=" << value;
    out << "\n";
  }
}

StatusOr<int> RunRecord(const RecordOptions& options, std::ostream& out) {
  if (options.command.empty()) {
    return InvalidArgument("record: no command given (trainprof record [options] -- CMD ...)");
  }
  TP_ASSIGN_OR_RETURN(int64_t interval_ns, ParseInterval(options.interval));
  TP_ASSIGN_OR_RETURN(auto tags, ParseTags(options.tags));
  if (!options.detail_steps.empty()) {
    TP_RETURN_IF_ERROR(instrument::CheckStepRange("--detail-steps", options.detail_steps));
  }
  if (!options.python_profile.empty()) {
    TP_RETURN_IF_ERROR(instrument::CheckStepRange("--python-profile", options.python_profile));
  }
  // Windows are checked now, before anything starts; converted once the start time is known.
  if (!options.detail_time.empty()) {
    TP_RETURN_IF_ERROR(
        instrument::ParseTimeWindow("--detail-time", options.detail_time, 0).status());
  }
  if (!options.python_profile_time.empty()) {
    TP_RETURN_IF_ERROR(
        instrument::ParseTimeWindow("--python-profile-time", options.python_profile_time, 0)
            .status());
  }
  if (!options.detail_steps.empty() && !options.detail_time.empty()) {
    return InvalidArgument("--detail-steps and --detail-time: choose one (one profiler at a time)");
  }
  if (!options.python_profile.empty() && !options.python_profile_time.empty()) {
    return InvalidArgument("--python-profile and --python-profile-time: choose one");
  }
  TP_ASSIGN_OR_RETURN(PrometheusNaming prometheus_names,
                      ParsePrometheusNames(options.prometheus_names));
  std::optional<ListenAddress> prometheus;
  if (!options.prometheus.empty()) {
    TP_ASSIGN_OR_RETURN(
        prometheus, ParsePrometheusAddress(options.prometheus, options.prometheus_allow_remote));
  }

  // Before any thread exists (the writer's flusher, the control and HTTP servers).
  SignalBlock signals;
  const int64_t start_ns = WallNowNs();
  model::RunMetadata meta;
  meta.name = options.name.empty() ? BaseName(options.command[0]) : options.name;
  meta.run_id = model::NewRunId(meta.name, start_ns);
  meta.command = options.command;
  meta.start_ns = start_ns;
  meta.source = "record";
  meta.instance_type = options.instance_type;
  meta.instance_count = 1;
  meta.tags = tags;
  meta.trainprof_version = kVersion;
  std::string run_dir =
      options.out.empty() ? FreshRunDir(options.runs_root, start_ns, meta.name) : options.out;
  TP_RETURN_IF_ERROR(store::WriteRunMetadata(run_dir, meta).WithContext("record"));

  SessionOptions so;
  so.run_dir = run_dir;
  so.node = options.node;
  so.instance_type = options.instance_type;
  so.interval_ns = interval_ns;
  so.gpus = !options.no_gpu;
  so.prometheus = prometheus;
  so.prometheus_names = prometheus_names;
  so.collector_factory = options.collector_factory;
  TP_ASSIGN_OR_RETURN(auto session, RecordingSession::Open(so, start_ns));
  if (!options.quiet) out << "trainprof: recording to " << run_dir << "\n" << std::flush;
  if (options.on_started) options.on_started(run_dir, out);

  // The child may change directory: hand it the run directory as an absolute path.
  std::string abs_run_dir = run_dir;
  if (char* real = realpath(run_dir.c_str(), nullptr)) {
    abs_run_dir = real;
    free(real);
  }
  instrument::ChildEnvOptions instrumentation;
  instrumentation.run_dir = abs_run_dir;
  instrumentation.node = session->node_name();
  instrumentation.auto_instrument = !options.no_auto;
  if (std::getenv("TRAINPROF_PYTHON_PACKAGE_DIR") == nullptr) {
    // Run as <package>/bin/trainprof without the console script: the hook is beside us.
    if (std::string dir = platform::SelfExecutablePath(); !dir.empty()) {
      dir = dir.substr(0, dir.rfind('/'));
      std::string package = dir.substr(0, dir.rfind('/'));
      if (PathExists(package + "/_hook/sitecustomize.py")) {
        instrumentation.python_package_dir = package;
      }
    }
  }
  instrumentation.detail_steps = options.detail_steps;
  instrumentation.python_profile = options.python_profile;
  instrumentation.health_every = options.health_every;
  if (!options.detail_time.empty()) {
    TP_ASSIGN_OR_RETURN(
        instrumentation.detail_time,
        instrument::ParseTimeWindow("--detail-time", options.detail_time, start_ns));
  }
  if (!options.python_profile_time.empty()) {
    TP_ASSIGN_OR_RETURN(instrumentation.python_profile_time,
                        instrument::ParseTimeWindow("--python-profile-time",
                                                    options.python_profile_time, start_ns));
  }
  std::map<std::string, std::string> env = instrument::ChildEnvironmentFromProcess(instrumentation);
  env.insert({
      {"TRAINPROF_RUN_DIR", abs_run_dir},
      {"TRAINPROF_NODE", session->node_name()},
      {"TRAINPROF_SOCKET", session->control_socket()},
      {"TRAINPROF_RUN_ID", meta.run_id},
  });
  BecomeSubreaper();
  SpawnResult child = SpawnChild(options.command, env, signals.original());
  if (child.pid < 0) {
    int code = ExitCodeForSpawnError(child.error);
    out << "error: cannot start '" << options.command[0] << "': " << ErrnoMessage(child.error)
        << "\n";
    int64_t end_ns = WallNowNs();
    session->Finish(end_ns);
    meta.end_ns = end_ns;
    meta.exit_status = code;
    Status st = store::WriteRunMetadata(run_dir, meta);
    if (!st.ok()) TP_LOG_WARNING("updating run.json: " + st.message());
    return code;
  }

  Status sampling = session->StartSampling({static_cast<int>(child.pid)});
  if (!sampling.ok()) {
    // The command already runs: never take it down for our sake. Record what we can.
    TP_LOG_WARNING("recording partly unavailable: " + sampling.message());
  }
  if (!options.quiet && !session->prometheus_url().empty()) {
    out << "trainprof: Prometheus metrics at " << session->prometheus_url() << "\n" << std::flush;
  }

  // Live work (rules) on its own thread while the command runs; stopped before the session
  // closes, so every poll sees an open store.
  std::mutex live_mu;
  std::condition_variable live_cv;
  bool live_stop = false;
  std::thread live;
  if (options.live_poll) {
    RecordOptions::LiveContext ctx;
    ctx.run_dir = run_dir;
    ctx.child = child.pid;
    ctx.store_finding = [s = session.get()](model::Finding f) { s->AddFinding(std::move(f)); };
    ctx.out = options.quiet ? nullptr : &out;
    try {
      live = std::thread([&, ctx] {
        std::unique_lock<std::mutex> lock(live_mu);
        while (!live_cv.wait_for(lock, std::chrono::nanoseconds(options.live_period_ns),
                                 [&] { return live_stop; })) {
          lock.unlock();
          options.live_poll(ctx);
          lock.lock();
        }
      });
    } catch (const std::system_error& e) {
      // The command already runs: live rules are off, the recording goes on.
      TP_LOG_WARNING(std::string("live rules are off: cannot start their thread: ") + e.what());
    }
  }
  auto stop_live = [&] {
    if (!live.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(live_mu);
      live_stop = true;
    }
    live_cv.notify_all();
    live.join();
  };

  int wait_status =
      WaitForChild(child.pid, signals, /*reap_orphans=*/true, [](int sig, bool forwarded) {
        if (forwarded) {
          TP_LOG_INFO(std::string("forwarded signal ") + sigabbrev_np(sig) + " to the command");
        }
      });
  int code = ExitCodeFromWaitStatus(wait_status);
  int64_t end_ns = WallNowNs();
  stop_live();
  int64_t recorder_cpu_ns = -1;
  if (rusage ru{}; ::getrusage(RUSAGE_SELF, &ru) == 0) {
    recorder_cpu_ns =
        (static_cast<int64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec)) * 1'000'000'000 +
        static_cast<int64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
  }
  SessionResult result = session->Finish(end_ns);
  meta.end_ns = end_ns;
  meta.exit_status = code;
  Status st = store::WriteRunMetadata(run_dir, meta);
  if (!st.ok()) {
    TP_LOG_WARNING("updating run.json: " + st.message());
    result.problems[model::dq::kWriteErrors] += 1;
  }
  if (!options.quiet) {
    out << "trainprof: " << meta.name << " finished in " << FormatDuration(end_ns - start_ns)
        << " with exit status " << code << "\n";
    PrintSummary(result, end_ns - start_ns, out, recorder_cpu_ns);
  }
  if (options.on_finished) options.on_finished(run_dir, out);
  if (!options.quiet) out << "trainprof: run directory " << run_dir << "\n" << std::flush;
  return code;
}

}  // namespace trainprof::agent
