// `trainprof export chrome-trace RUN --out trace.json[.gz]`: the run as one Chrome Trace Event
// Format file (the JSON object form), which Perfetto's UI and chrome://tracing open.
//
//   framework spans    "X" events, ts/dur in µs with ns decimals; args: node, step, mode, rank
//                      (when recorded) and the event's own args
//   instants           "i" events, thread scope ("s": "t")
//   flows              an imported trace's flow events (Kineto's ac2g kernel-launch arrows...),
//                      stored as instants with args {"flow_phase", "flow_id", "bp"}, are flow
//                      events again: "s"/"t"/"f" with their id, category, name and binding point
//   tracks             events keep their pid when no other node or rank uses it, and the names
//                      an imported trace gave its tracks ("GPU 1", "stream 7 ", "python3.8")
//   system metrics     "C" counter events, one track per metric and device
//                      ("gpu_utilization_ratio gpu0"), in one process per node
//   findings           a "findings" process, one thread per node; a finding with a time range is
//                      an "X" span, a point-in-time one an "i" instant; args carry the message,
//                      recommendation, severity and evidence
//   names              "M" process_name / thread_name events, written where a track first appears
//
// Time base: absolute. ts is microseconds since the Unix epoch (ns in the three decimals), so
// events of different runs and of other tools' traces line up; Perfetto shows times relative to
// the trace's first event. Events are written as they are read (the output is streamed through
// ExportFile, gzip when the name ends in .gz).

#include <cmath>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <string_view>
#include <tuple>
#include <vector>

#include "base/json_dump.h"
#include "cli/commands.h"
#include "cli/export_writer.h"
#include "cli/progress.h"
#include "importers/kineto/kineto_importer.h"
#include "model/event.h"
#include "model/finding.h"
#include "store/run_reader.h"

namespace trainprof::cli {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class TraceWriter {
 public:
  explicit TraceWriter(ExportFile* file) : f_(file) {}

  // Starts the next element of traceEvents and returns the buffer to append it to.
  std::string& Next() {
    f_->MaybeFlush();
    std::string& b = f_->buffer();
    if (!first_) b.append(",\n");
    first_ = false;
    return b;
  }

  // Pids that events keep as they are: the numbers given to the other track groups skip them.
  void Reserve(int64_t pid) { reserved_.insert(pid); }

  // The Chrome-trace pid of a track group (`pid` when given, else the next free number);
  // writes its process_name, and its process_labels when not empty, when new.
  int64_t Process(const std::string& key, const std::string& label,
                  std::optional<int64_t> pid = std::nullopt, const std::string& labels = "") {
    auto it = processes_.find(key);
    if (it != processes_.end()) return it->second;
    if (!pid) {
      while (reserved_.count(next_pid_)) ++next_pid_;
      pid = next_pid_++;
    }
    processes_.emplace(key, *pid);
    std::string& b = Next();
    b.append("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
    b.append(std::to_string(*pid));
    b.append(",\"tid\":0,\"args\":{\"name\":");
    AppendJsonString(label, &b);
    b.append("}}");
    if (!labels.empty()) {
      std::string& l = Next();
      l.append("{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":");
      l.append(std::to_string(*pid));
      l.append(",\"tid\":0,\"args\":{\"labels\":");
      AppendJsonString(labels, &l);
      l.append("}}");
    }
    return *pid;
  }

  // Whether a track group has its pid already (its process_name is written).
  bool HasProcess(const std::string& key) const { return processes_.count(key) > 0; }

  // Writes a thread_name the first time (pid, tid) is used.
  void Thread(int64_t pid, int64_t tid, const std::string& label) {
    if (!threads_.emplace(pid, tid).second) return;
    std::string& b = Next();
    b.append("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
    b.append(std::to_string(pid));
    b.append(",\"tid\":");
    b.append(std::to_string(tid));
    b.append(",\"args\":{\"name\":");
    AppendJsonString(label, &b);
    b.append("}}");
  }

  int64_t processes() const { return static_cast<int64_t>(processes_.size()); }

 private:
  ExportFile* f_;
  bool first_ = true;
  std::map<std::string, int64_t> processes_;
  std::set<std::pair<int64_t, int64_t>> threads_;
  std::set<int64_t> reserved_;
  int64_t next_pid_ = 1;
};

// A flow event as the Kineto importer stores it: an instant whose args are
// {"flow_phase":"s|t|f","flow_id":N[,"bp":"e"]}. False for every other event.
struct Flow {
  char phase = 0;
  int64_t id = 0;
  std::string bp;
};
bool ParseFlow(uint8_t kind, const std::string& args, Flow* flow) {
  static constexpr std::string_view kPrefix = "{\"flow_phase\":\"";
  if (kind != static_cast<uint8_t>(model::EventKind::kInstant) ||
      args.compare(0, kPrefix.size(), kPrefix) != 0 || JsonNestingExceeds(args, 1)) {
    return false;  // the importer's flow args are one flat object
  }
  nlohmann::json j = nlohmann::json::parse(args, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return false;
  auto phase = j.find("flow_phase");
  auto id = j.find("flow_id");
  if (phase == j.end() || !phase->is_string() || id == j.end() || !id->is_number_integer()) {
    return false;
  }
  const std::string ph = phase->get<std::string>();
  if (ph != "s" && ph != "t" && ph != "f") return false;
  flow->phase = ph[0];
  flow->id = id->get<int64_t>();
  auto bp = j.find("bp");
  flow->bp = bp != j.end() && bp->is_string() ? bp->get<std::string>() : "";
  return true;
}

// Flow ids of the second and later (node, rank) groups with flows are offset by this times the
// group's index: ids are per process in Kineto, and viewers join flows across the whole file.
constexpr int64_t kFlowIdGroupStride = 1'000'000'000'000;

// Appends the members of a stored args object (JSON text) after ours, leaving out keys we set
// ourselves; args that are not a JSON object are kept as the string "args_text".
void AppendOwnArgs(const std::string& args, const std::set<std::string>& taken, std::string* b) {
  if (args.empty()) return;
  // Stored args nested deeper than kMaxExportArgsDepth stay text: nlohmann's dump recurses,
  // and a million levels (a hostile trace, an older import) overflowed the stack.
  const bool too_deep = JsonNestingExceeds(args, kMaxExportArgsDepth);
  nlohmann::json j = too_deep ? nlohmann::json(nlohmann::json::value_t::discarded)
                              : nlohmann::json::parse(args, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    b->append(",\"args_text\":");
    AppendJsonString(args, b);
    return;
  }
  for (const auto& [key, value] : j.items()) {
    if (taken.count(key)) continue;
    b->push_back(',');
    AppendJsonString(key, b);
    b->push_back(':');
    b->append(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

}  // namespace

Status RunExportChromeTrace(const ExportChromeTraceOptions& options, std::ostream& out) {
  if (options.out.empty()) return InvalidArgument("export chrome-trace needs --out FILE");
  TP_ASSIGN_OR_RETURN(auto reader, store::RunReader::Open(options.run));
  const bool gzip = EndsWith(options.out, ".gz");
  // Bytes written (the JSON text), by stage; reading a stage's table shows as its name alone.
  TerminalProgress progress({.label = "export chrome-trace"});
  TP_ASSIGN_OR_RETURN(auto file, ExportFile::Create(options.out, gzip, &progress));
  const model::RunMetadata& meta = reader->metadata();

  {
    std::string& b = file->buffer();
    b.append("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"exporter\":\"trainprof\",\"run_id\":");
    AppendJsonString(meta.run_id, &b);
    b.append(",\"run_name\":");
    AppendJsonString(meta.name, &b);
    b.append(",\"source\":");
    AppendJsonString(meta.source, &b);
    b.append(
        ",\"time_base\":\"ts is microseconds since the Unix epoch (ns in the decimals)\"},"
        "\"traceEvents\":[\n");
  }
  TraceWriter w(file.get());
  int64_t spans = 0, instants = 0, flow_events = 0, counters = 0, findings_written = 0,
          non_finite = 0;

  // Framework events: one process per (node, rank, pid), one thread per tid.
  {
    progress.SetStage("events");
    TP_ASSIGN_OR_RETURN(auto t, reader->Events({}));
    TP_ASSIGN_OR_RETURN(auto node_meta, reader->NodeMeta());
    static const std::set<std::string> kTaken = {"node", "step", "mode", "rank"};
    // First pass: which (node, rank) groups use each pid and which have flows. A pid used by
    // one group only is written as it is (a Kineto GPU pid is the device), others are numbered.
    std::map<int64_t, std::set<std::pair<int32_t, int64_t>>> pid_groups;
    std::set<std::pair<int32_t, int64_t>> groups, flow_groups;
    std::vector<Flow> flows(t.size());
    std::vector<bool> is_flow(t.size(), false);
    for (size_t i = 0; i < t.size(); ++i) {
      const std::pair<int32_t, int64_t> group{t.node[i], t.rank[i]};
      groups.insert(group);
      if (t.pid[i] != model::kMissing) pid_groups[t.pid[i]].insert(group);
      if (ParseFlow(t.kind[i], t.args[i], &flows[i])) {
        is_flow[i] = true;
        flow_groups.insert(group);
      }
    }
    for (const auto& [pid, users] : pid_groups) w.Reserve(pid);
    auto meta_of = [&](const std::string& node, const std::string& key) -> std::string {
      auto n = node_meta.find(node);
      if (n == node_meta.end()) return "";
      auto v = n->second.find(key);
      return v == n->second.end() ? std::string() : v->second;
    };
    for (size_t i = 0; i < t.size(); ++i) {
      const std::string& node = t.nodes.at(t.node[i]);
      const int64_t rank = t.rank[i], pid = t.pid[i], tid = t.tid[i];
      std::string key =
          "e\x1f" + node + "\x1f" + std::to_string(rank) + "\x1f" + std::to_string(pid);
      int64_t track;
      if (!w.HasProcess(key)) {
        // The imported trace's names first: a device label ("GPU 1") over the process name
        // Kineto repeats on every device pid; ours ("<node> rank R pid P") otherwise.
        std::string label, labels;
        if (pid != model::kMissing) {
          labels = meta_of(node, importers::kineto::TrackNameKey("process_labels", rank, pid));
          label = labels.empty() || labels == "CPU"
                      ? meta_of(node, importers::kineto::TrackNameKey("process_name", rank, pid))
                      : labels;
        }
        if (label.empty()) {
          label = node;
          if (rank != model::kMissing) label += " rank " + std::to_string(rank);
          if (pid != model::kMissing) label += " pid " + std::to_string(pid);
        } else if (groups.size() > 1) {
          label +=
              " (" + node + (rank != model::kMissing ? " rank " + std::to_string(rank) : "") + ")";
        }
        std::optional<int64_t> keep;
        if (pid != model::kMissing && pid_groups[pid].size() == 1) keep = pid;
        track = w.Process(key, label, keep, labels);
      } else {
        track = w.Process(key, "");
      }
      int64_t thread = tid == model::kMissing ? 0 : tid;
      std::string thread_label;
      if (pid != model::kMissing && tid != model::kMissing) {
        thread_label =
            meta_of(node, importers::kineto::TrackNameKey("thread_name", rank, pid, tid));
      }
      if (thread_label.empty()) {
        thread_label =
            tid == model::kMissing ? std::string("events") : "tid " + std::to_string(tid);
      }
      w.Thread(track, thread, thread_label);
      if (is_flow[i]) {
        const Flow& f = flows[i];
        int64_t id = f.id;
        if (flow_groups.size() > 1) {
          auto g = flow_groups.find({t.node[i], rank});
          id += static_cast<int64_t>(std::distance(flow_groups.begin(), g)) * kFlowIdGroupStride;
        }
        std::string& b = w.Next();
        b.append("{\"ph\":\"");
        b.push_back(f.phase);
        b.append("\",\"id\":");
        b.append(std::to_string(id));
        b.append(",\"name\":");
        AppendJsonString(t.names.at(t.name[i]), &b);
        b.append(",\"cat\":");
        AppendJsonString(t.categories.at(t.category[i]), &b);
        b.append(",\"ts\":");
        AppendMicros(t.start_ns[i], &b);
        b.append(",\"pid\":");
        b.append(std::to_string(track));
        b.append(",\"tid\":");
        b.append(std::to_string(thread));
        if (!f.bp.empty()) {
          b.append(",\"bp\":");
          AppendJsonString(f.bp, &b);
        }
        b.append("}");
        ++flow_events;
        continue;
      }
      const bool instant = t.kind[i] == static_cast<uint8_t>(model::EventKind::kInstant);
      std::string& b = w.Next();
      // An instant of mode "global" (a Kineto trace's "s": "g") marks the whole trace.
      const bool global = instant && t.modes.at(t.mode[i]) == "global";
      b.append(!instant ? "{\"ph\":\"X\",\"name\":"
               : global ? "{\"ph\":\"i\",\"s\":\"g\",\"name\":"
                        : "{\"ph\":\"i\",\"s\":\"t\",\"name\":");
      AppendJsonString(t.names.at(t.name[i]), &b);
      b.append(",\"cat\":");
      AppendJsonString(t.categories.at(t.category[i]), &b);
      b.append(",\"ts\":");
      AppendMicros(t.start_ns[i], &b);
      if (!instant) {
        b.append(",\"dur\":");
        AppendMicros(t.duration_ns[i], &b);
      }
      b.append(",\"pid\":");
      b.append(std::to_string(track));
      b.append(",\"tid\":");
      b.append(std::to_string(thread));
      b.append(",\"args\":{\"node\":");
      AppendJsonString(node, &b);
      if (t.step[i] != model::kMissing) b.append(",\"step\":").append(std::to_string(t.step[i]));
      const std::string& mode = t.modes.at(t.mode[i]);
      if (!mode.empty()) {
        b.append(",\"mode\":");
        AppendJsonString(mode, &b);
      }
      if (rank != model::kMissing) b.append(",\"rank\":").append(std::to_string(rank));
      AppendOwnArgs(t.args[i], kTaken, &b);
      b.append("}}");
      ++(instant ? instants : spans);
    }
  }

  // System metrics: counter tracks named "<metric> <device>" in a process per node.
  {
    progress.SetStage("metrics");
    TP_ASSIGN_OR_RETURN(auto t, reader->SystemMetrics({}));
    std::vector<std::string> track_names(t.metrics.values().size() * t.devices.values().size());
    for (size_t i = 0; i < t.size(); ++i) {
      if (!std::isfinite(t.value[i])) {
        ++non_finite;  // JSON has no NaN/Infinity
        continue;
      }
      const std::string& node = t.nodes.at(t.node[i]);
      int64_t track = w.Process("m\x1f" + node, node + " system metrics");
      w.Thread(track, 0, "system metrics");
      std::string& name = track_names[static_cast<size_t>(t.metric[i]) * t.devices.values().size() +
                                      static_cast<size_t>(t.device[i])];
      if (name.empty()) {
        name = t.metrics.at(t.metric[i]);
        const std::string& device = t.devices.at(t.device[i]);
        if (!device.empty()) name += " " + device;
      }
      std::string& b = w.Next();
      b.append("{\"ph\":\"C\",\"name\":");
      AppendJsonString(name, &b);
      b.append(",\"ts\":");
      AppendMicros(t.timestamp_ns[i], &b);
      b.append(",\"pid\":");
      b.append(std::to_string(track));
      b.append(",\"tid\":0,\"args\":{\"value\":");
      AppendDouble(t.value[i], &b);
      b.append("}}");
      ++counters;
    }
  }

  // Findings: their own process, one thread per node.
  {
    progress.SetStage("findings");
    TP_ASSIGN_OR_RETURN(auto findings, reader->Findings());
    std::map<std::string, int64_t> node_threads;
    for (const auto& x : findings) {
      int64_t track = w.Process("f", "findings");
      auto [it, inserted] =
          node_threads.emplace(x.node, static_cast<int64_t>(node_threads.size()) + 1);
      w.Thread(track, it->second, x.node.empty() ? std::string("run") : x.node);
      const bool span = x.end_ns > x.start_ns;
      std::string& b = w.Next();
      b.append(span ? "{\"ph\":\"X\",\"name\":" : "{\"ph\":\"i\",\"s\":\"t\",\"name\":");
      AppendJsonString(x.rule, &b);
      b.append(",\"cat\":\"finding\",\"ts\":");
      AppendMicros(x.start_ns, &b);
      if (span) {
        b.append(",\"dur\":");
        AppendMicros(x.end_ns - x.start_ns, &b);
      }
      b.append(",\"pid\":");
      b.append(std::to_string(track));
      b.append(",\"tid\":");
      b.append(std::to_string(it->second));
      b.append(",\"args\":{\"message\":");
      AppendJsonString(x.message, &b);
      b.append(",\"severity\":");
      AppendJsonString(model::SeverityName(x.severity), &b);
      b.append(",\"node\":");
      AppendJsonString(x.node, &b);
      if (!x.device.empty()) {
        b.append(",\"device\":");
        AppendJsonString(x.device, &b);
      }
      b.append(",\"recommendation\":");
      AppendJsonString(x.recommendation, &b);
      b.append(",\"evidence\":");
      nlohmann::json ev = JsonNestingExceeds(x.evidence_json, kMaxExportArgsDepth)
                              ? nlohmann::json(nlohmann::json::value_t::discarded)
                              : nlohmann::json::parse(x.evidence_json, nullptr, false);
      if (ev.is_discarded()) {
        AppendJsonString(x.evidence_json, &b);
      } else {
        b.append(ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      }
      b.append("}}");
      ++findings_written;
    }
  }

  file->Write("\n]}\n");
  TP_RETURN_IF_ERROR(file->Close());
  progress.Finish();
  if (Quiet()) {
    for (const std::string& p : reader->problems()) std::cerr << "warning: " << p << "\n";
    return OkStatus();
  }
  out << "wrote " << options.out << (gzip ? " (gzip)" : "") << ": " << spans << " spans, "
      << instants << " instants, " << flow_events << " flow events, " << counters
      << " counter samples, " << findings_written << " findings on " << w.processes()
      << " processes; ts = µs since the Unix epoch\n";
  if (non_finite > 0) {
    out << "skipped " << non_finite << " metric samples that are not finite numbers (NaN/inf)\n";
  }
  for (const std::string& p : reader->problems()) out << "warning: " << p << "\n";
  return OkStatus();
}

}  // namespace trainprof::cli
