// `trainprof export chrome-trace RUN --out trace.json[.gz]`: the run as one Chrome Trace Event
// Format file (the JSON object form), which Perfetto's UI and chrome://tracing open.
//
//   framework spans    "X" events, ts/dur in µs with ns decimals; args: node, step, mode, rank
//                      (when recorded) and the event's own args
//   instants           "i" events, thread scope ("s": "t")
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
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <tuple>
#include <vector>

#include "cli/commands.h"
#include "cli/export_writer.h"
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

  // The Chrome-trace pid of a track group; writes its process_name when new.
  int64_t Process(const std::string& key, const std::string& label) {
    auto [it, inserted] = processes_.emplace(key, next_pid_);
    if (inserted) {
      ++next_pid_;
      std::string& b = Next();
      b.append("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
      b.append(std::to_string(it->second));
      b.append(",\"tid\":0,\"args\":{\"name\":");
      AppendJsonString(label, &b);
      b.append("}}");
    }
    return it->second;
  }

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
  int64_t next_pid_ = 1;
};

// Appends the members of a stored args object (JSON text) after ours, leaving out keys we set
// ourselves; args that are not a JSON object are kept as the string "args_text".
void AppendOwnArgs(const std::string& args, const std::set<std::string>& taken, std::string* b) {
  if (args.empty()) return;
  nlohmann::json j = nlohmann::json::parse(args, nullptr, /*allow_exceptions=*/false);
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
  TP_ASSIGN_OR_RETURN(auto file, ExportFile::Create(options.out, gzip));
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
  int64_t spans = 0, instants = 0, counters = 0, findings_written = 0, non_finite = 0;

  // Framework events: one process per (node, rank, pid), one thread per tid.
  {
    TP_ASSIGN_OR_RETURN(auto t, reader->Events({}));
    static const std::set<std::string> kTaken = {"node", "step", "mode", "rank"};
    for (size_t i = 0; i < t.size(); ++i) {
      const std::string& node = t.nodes.at(t.node[i]);
      const int64_t rank = t.rank[i], pid = t.pid[i], tid = t.tid[i];
      std::string label = node;
      if (rank != model::kMissing) label += " rank " + std::to_string(rank);
      if (pid != model::kMissing) label += " pid " + std::to_string(pid);
      std::string key =
          "e\x1f" + node + "\x1f" + std::to_string(rank) + "\x1f" + std::to_string(pid);
      int64_t track = w.Process(key, label);
      int64_t thread = tid == model::kMissing ? 0 : tid;
      w.Thread(track, thread,
               tid == model::kMissing ? std::string("events") : "tid " + std::to_string(tid));
      const bool instant = t.kind[i] == static_cast<uint8_t>(model::EventKind::kInstant);
      std::string& b = w.Next();
      b.append(instant ? "{\"ph\":\"i\",\"s\":\"t\",\"name\":" : "{\"ph\":\"X\",\"name\":");
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
      nlohmann::json ev = nlohmann::json::parse(x.evidence_json, nullptr, false);
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
  out << "wrote " << options.out << (gzip ? " (gzip)" : "") << ": " << spans << " spans, "
      << instants << " instants, " << counters << " counter samples, " << findings_written
      << " findings on " << w.processes() << " processes; ts = µs since the Unix epoch\n";
  if (non_finite > 0) {
    out << "skipped " << non_finite << " metric samples that are not finite numbers (NaN/inf)\n";
  }
  for (const std::string& p : reader->problems()) out << "warning: " << p << "\n";
  return OkStatus();
}

}  // namespace trainprof::cli
