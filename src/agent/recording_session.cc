#include "agent/recording_session.h"

#include <unistd.h>

#include <chrono>
#include <system_error>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/json_dump.h"
#include "base/logging.h"
#include "base/time.h"
#include "collect/collector_factory.h"
#include "model/data_quality.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace trainprof::agent {

RecordingSession::~RecordingSession() { Finish(WallNowNs()); }

StatusOr<std::unique_ptr<RecordingSession>> RecordingSession::Open(const SessionOptions& options,
                                                                   int64_t start_ns) {
  std::unique_ptr<RecordingSession> s(new RecordingSession(options));
  s->start_ns_ = start_ns;
  s->node_ = model::DetectLocalNode(options.node);
  if (!options.instance_type.empty()) s->node_.instance_type = options.instance_type;
  store::WriterOptions wo;
  wo.auto_flush_interval_ns = options.flush_interval_ns;
  TP_ASSIGN_OR_RETURN(s->writer_, store::OpenNodeWriter(options.run_dir, s->node_, wo));
  s->phases_ = std::make_unique<PhaseTracker>(s->writer_.get(), start_ns, model::kMissing);

  std::string socket = options.control_socket;
  if (socket.empty()) {
    std::string node_dir = store::NodeStorePath(options.run_dir, s->node_.node);
    node_dir = node_dir.substr(0, node_dir.rfind('/'));
    socket = JoinPath(node_dir, kControlSocketName);
  }
  RecordingSession* self = s.get();
  // Requests are validated against the run; refusals are counted with the run's data quality.
  ControlServerOptions control_options;
  control_options.run_start_ns = start_ns;
  control_options.count = [self](const std::string& counter, int64_t n) {
    self->writer_->AddCounter(counter, n);
  };
  auto control = ControlServer::Start(
      socket, [self](const ControlRequest& r) { return self->HandleControl(r); },
      std::move(control_options));
  if (control.ok()) {
    s->control_ = std::move(*control);
  } else {
    // Marks will not reach this run, but the recording itself is fine.
    TP_LOG_WARNING("control channel unavailable, `trainprof mark` will not reach this run: " +
                   control.status().message());
    s->writer_->AddCounter("control_channel_errors", 1);
  }
  return s;
}

StatusOr<std::string> RecordingSession::HandleControl(const ControlRequest& request) {
  if (request.type == "mark") {
    TP_RETURN_IF_ERROR(ValidateMarkName(request.name));
    phases_->Mark(request.name, request.ts_ns.value_or(WallNowNs()));
    return std::string();
  }
  if (request.type == "step") {
    if (!request.start_ns || !request.end_ns || *request.end_ns < *request.start_ns) {
      return InvalidArgument("step needs start_ns <= end_ns");
    }
    phases_->NoteStep(*request.start_ns, *request.end_ns);
    return std::string();
  }
  if (request.type == "ping") {
    nlohmann::json j;
    j["run_dir"] = options_.run_dir;
    j["node"] = node_.node;
    j["pid"] = static_cast<int64_t>(::getpid());
    return DumpJson(j);
  }
  return InvalidArgument("unknown request type '" + request.type + "'");
}

Status RecordingSession::StartSampling(const std::vector<int>& root_pids) {
  collect::CollectorContext context;
  context.root_pids = root_pids;
  context.gpus = options_.gpus;
  context.cgroup_path = options_.cgroup_path;
  context.fs_paths = {options_.run_dir};
  if (const char* nvml = std::getenv("TRAINPROF_NVML_LIBRARY"); nvml != nullptr && *nvml) {
    context.nvml_library = nvml;
  }
  // The host's /proc mounted elsewhere (a container), or a prepared tree (benches).
  if (const char* proc = std::getenv("TRAINPROF_PROC_ROOT"); proc != nullptr && *proc) {
    context.proc_root = proc;
  }
  std::vector<std::unique_ptr<collect::Collector>> collectors;
  if (options_.collector_factory) {
    collectors = options_.collector_factory(context);
  } else {
    collect::CollectorSet set = collect::BuildCollectors(context);
    collectors = std::move(set.collectors);
    // Sources this node lacks (no NVML, no cgroup v2...): said once, kept with the run.
    for (const std::string& note : set.notes) {
      TP_LOG_INFO(note);
      writer_->Annotate(WallNowNs(), "collector_note", note);
    }
  }
  for (const auto& c : collectors) c->Describe(&node_);
  writer_->SetMeta("node_info", model::NodeInfoToJson(node_));
  if (root_pids.size() == 1) phases_->SetPid(root_pids[0]);

  if (options_.prometheus) {
    TP_ASSIGN_OR_RETURN(prometheus_,
                        PrometheusServer::Start(*options_.prometheus, &latest_, node_,
                                                options_.prometheus_names, &step_metrics_));
    try {
      step_thread_ = std::thread([this] {
        StepWatcher watcher(options_.run_dir, node_.node, &step_metrics_);
        std::unique_lock<std::mutex> lock(step_mu_);
        while (!step_stop_) {
          step_cv_.wait_for(lock, std::chrono::nanoseconds(options_.step_poll_ns),
                            [this] { return step_stop_; });
          if (step_stop_) break;
          lock.unlock();
          Status polled = watcher.Poll();
          if (!polled.ok())
            TP_LOG_ONCE(LogLevel::kWarning, "steps for /metrics: " + polled.message());
          lock.lock();
        }
      });
    } catch (const std::system_error& e) {
      TP_LOG_WARNING(std::string("steps for /metrics are off: cannot start their thread: ") +
                     e.what());
    }
  }
  SamplingOptions so;
  so.interval_ns = options_.interval_ns;
  loop_ =
      std::make_unique<SamplingLoop>(std::move(collectors), writer_.get(), &latest_, &summary_, so);
  return loop_->Start();
}

void RecordingSession::NoteInstrumentedSteps() {
  // In-process instrumentation writes steps into each process's own store (no socket round
  // trip on the training thread); the first and the last of them bound the training phase.
  auto reader = store::RunReader::Open(options_.run_dir);
  if (!reader.ok()) return;
  store::EventQuery query;
  query.categories = {model::kCategoryStep};
  query.nodes = {node_.node};
  auto steps = (*reader)->Events(query);
  if (!steps.ok() || steps->size() == 0) return;
  size_t first = 0, last = 0;
  for (size_t i = 1; i < steps->size(); ++i) {
    if (steps->start_ns[i] < steps->start_ns[first]) first = i;
    if (steps->start_ns[i] + steps->duration_ns[i] >
        steps->start_ns[last] + steps->duration_ns[last]) {
      last = i;
    }
  }
  phases_->NoteStep(steps->start_ns[first], steps->start_ns[first] + steps->duration_ns[first]);
  phases_->NoteStep(steps->start_ns[last], steps->start_ns[last] + steps->duration_ns[last]);
}

void RecordingSession::AddFinding(model::Finding finding) {
  if (writer_ && !result_) writer_->AddFinding(std::move(finding));
}

SessionResult RecordingSession::Finish(int64_t end_ns) {
  if (result_) return *result_;
  SessionResult result;
  if (prometheus_) prometheus_->Stop();
  if (step_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(step_mu_);
      step_stop_ = true;
    }
    step_cv_.notify_all();
    step_thread_.join();
  }
  if (loop_) {
    loop_->Stop();
    result.sampling = loop_->stats();
    for (const auto& [name, value] : loop_->counters()) {
      if (value != 0) result.problems[name] += value;
    }
  }
  // Marks may arrive until the very end; stop the channel before closing the phases.
  if (control_) control_->Stop();
  if (phases_) {
    NoteInstrumentedSteps();
    phases_->Finish(end_ns);
    result.marks = phases_->marks();
  }
  if (writer_) {
    Status closed = writer_->Close();
    if (!closed.ok()) {
      TP_LOG_WARNING("closing the run store: " + closed.message());
    }
    store::WriterStats ws = writer_->stats();
    if (ws.write_errors > 0) result.problems[model::dq::kWriteErrors] = ws.write_errors;
    if (ws.dropped_values > 0) result.problems[model::dq::kDroppedSamples] = ws.dropped_values;
    if (ws.dropped_events > 0) result.problems[model::dq::kDroppedEvents] = ws.dropped_events;
  }
  result.summary = summary_.Summarize();
  result_ = result;
  return result;
}

}  // namespace trainprof::agent
