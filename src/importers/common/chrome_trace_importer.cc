#include "importers/common/chrome_trace_importer.h"

#include <vector>

#include "importers/common/byte_source.h"
#include "importers/common/import_counters.h"
#include "importers/common/json_text.h"
#include "importers/common/trace_streamer.h"
#include "importers/kineto/kineto_event_parser.h"
#include "model/event.h"

namespace trainprof::importers {
namespace {

constexpr int64_t kMaxDurationNs = 30LL * 24 * 3600 * 1'000'000'000;

class ChromeSink : public TraceSink {
 public:
  ChromeSink(const ChromeImportOptions& o, store::NodeStoreWriter* w) : o_(o), w_(w) {
    if (o.base_time_ns) base_ns_ = *o.base_time_ns;
  }

  Status OnEvent(std::string_view text) override {
    ++stats_.elements;
    kineto::RawEvent e;
    if (!kineto::ParseRawEvent(text, &e, &scratch_)) {
      Problem(dq::kInvalidEvents);
      return OkStatus();
    }
    if (e.ph == 'M') return Metadata(e);
    int64_t ts;
    if (e.ts.empty() || !json::ParseMicrosToNs(e.ts, &ts)) {
      Problem(dq::kEventsWithoutTimestamp);
      return OkStatus();
    }
    if (!base_ns_) {
      Problem(dq::kRelativeTimestamps);
      base_ns_ = 0;
    }
    if (!json::OffsetTimestampNs(ts, *base_ns_, &ts)) {
      Problem(dq::kAbsurdTimestamps);
      return OkStatus();
    }
    switch (e.ph) {
      case 'X': {
        int64_t dur;
        if (e.dur.empty() || !json::ParseMicrosToNs(e.dur, &dur)) {
          Problem(dq::kEventsWithoutDuration);
          return OkStatus();
        }
        if (dur < 0 || dur > kMaxDurationNs) {
          Problem(dq::kAbsurdDurations);
          return OkStatus();
        }
        model::Event ev = Make(e, ts);
        ev.duration_ns = dur;
        Store(std::move(ev));
        return OkStatus();
      }
      case 'B':
        open_[{kineto::ParseTrackId(e.pid), kineto::ParseTrackId(e.tid)}].push_back(Make(e, ts));
        return OkStatus();
      case 'E': {
        auto it = open_.find({kineto::ParseTrackId(e.pid), kineto::ParseTrackId(e.tid)});
        if (it == open_.end() || it->second.empty()) {
          Problem(dq::kUnmatchedEnds);
          return OkStatus();
        }
        model::Event ev = std::move(it->second.back());
        it->second.pop_back();
        ev.duration_ns = ts - ev.start_ns;
        if (ev.duration_ns < 0 || ev.duration_ns > kMaxDurationNs) {
          Problem(dq::kAbsurdDurations);
          return OkStatus();
        }
        // The end's args join the begin's: Horovod writes a tensor's dtype and shape on the
        // end event only; smdebug's reader takes an E event's args.pid / thread_id too.
        if (!e.args.empty()) {
          std::string end_args, merged;
          json::AppendMinified(e.args, &end_args);
          json::MergeObjectMembers(ev.args, end_args, &merged);
          if (merged.size() > 2) ev.args = std::move(merged);
          ProcessFromArgs(e.args, &ev);
        }
        Store(std::move(ev));
        return OkStatus();
      }
      case 'i':
      case 'I': {
        model::Event ev = Make(e, ts);
        ev.kind = model::EventKind::kInstant;
        Store(std::move(ev));
        return OkStatus();
      }
      default:
        Problem(dq::kUnknownPhases);
        return OkStatus();
    }
  }

  void Finish() {
    for (auto& [k, v] : open_) {
      if (!v.empty()) Problem(dq::kUnmatchedBegins, static_cast<int64_t>(v.size()));
    }
    for (const auto& [name, n] : stats_.problems) w_->AddCounter(name, n);
  }

  ChromeImportStats& stats() { return stats_; }

 private:
  void Problem(const char* name, int64_t n = 1) { stats_.problems[name] += n; }

  Status Metadata(const kineto::RawEvent& e) {
    if (e.name != "process_name") return OkStatus();
    json::ObjectReader r(e.args);
    std::string_view k, v;
    while (r.Next(&k, &v)) {
      if (k == "start_time_since_epoch_in_micros") {
        int64_t ns;
        if (json::ParseMicrosToNs(v, &ns)) base_ns_ = stats_.file_base_ns = ns;
      } else if (k == "name") {
        std::string label;
        json::DecodeString(v, &label);
        process_names_[kineto::ParseTrackId(e.pid)] = label;
      }
    }
    return OkStatus();
  }

  model::Event Make(const kineto::RawEvent& e, int64_t ts) {
    model::Event ev;
    ev.start_ns = ts;
    ev.name.assign(e.name);
    const int64_t track = kineto::ParseTrackId(e.pid);
    ev.pid = o_.pid != model::kMissing ? o_.pid : track;
    ev.tid = kineto::ParseTrackId(e.tid);
    ev.rank = o_.rank;
    std::string process;
    auto it = process_names_.find(track);
    if (it != process_names_.end()) process = it->second;
    switch (o_.flavor) {
      case ChromeFlavor::kHorovod:
        ev.category = "horovod";
        ev.args = "{\"tensor\":\"" + Escape(process) + "\"}";
        return ev;
      case ChromeFlavor::kTensorflow:
        // The trace's processes are its devices: "/host:CPU", "/device:GPU:0"... An op on a
        // device track ran there (the report counts it as GPU time, not CPU time).
        ev.category = !e.cat.empty()                      ? std::string(e.cat)
                      : process.rfind("/device:", 0) == 0 ? "tf_device_op"
                                                          : "tf_op";
        break;
      case ChromeFlavor::kSmdebugFramework:
        // SageMaker's PyTorch writes a "DataLoaderWorker" span per batch a worker process
        // loads (smdebug's PT_dataloader_analysis reads them): our "dataloader" spans, whose
        // distinct pids the Dataloader rule counts.
        ev.category = e.name == "DataLoaderWorker" ? std::string("dataloader")
                      : !e.cat.empty()             ? std::string(e.cat)
                      : !process.empty()           ? process
                                                   : std::string("framework");
        break;
    }
    if (!e.args.empty()) json::AppendMinified(e.args, &ev.args);
    // smdebug's step events: "Step:ModeKeys.TRAIN" with args.step_num (int or string).
    constexpr std::string_view kStep = "Step:ModeKeys.";
    if (e.name.substr(0, kStep.size()) == kStep) {
      std::string mode(e.name.substr(kStep.size()));
      for (char& c : mode) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      ev.category = model::kCategoryStep;
      ev.mode = mode;
      json::ObjectReader r(e.args);
      std::string_view k, v;
      int64_t n;
      while (r.Next(&k, &v)) {
        if (k == "step_num" && json::ParseLooseInt64(v, &n)) ev.step = n;
      }
      ev.name = model::kCategoryStep;
      ++stats_.steps;
    } else {
      json::ObjectReader r(e.args);
      std::string_view k, v;
      int64_t n;
      while (r.Next(&k, &v)) {
        if (k == "step_num" && json::ParseLooseInt64(v, &n)) ev.step = n;
        // `trainprof export smdebug` keeps an event's mode (train/eval/...) in args.mode: only
        // the step events carry it in their name.
        if (k == "mode" && o_.flavor == ChromeFlavor::kSmdebugFramework && v.size() <= 66) {
          std::string mode;
          if (json::DecodeString(v, &mode)) ev.mode = std::move(mode);
        }
      }
    }
    ProcessFromArgs(e.args, &ev);
    return ev;
  }

  // The process and thread an event names in its args (SageMaker's framework and TF
  // detailed-profiling writers), as smdebug's reader takes them: the trace's own pid is a lane
  // of the timeline (1, 2...), not a process. A process id in the file's node id
  // ("<pid>-<host>") names the writing process already, and stays.
  void ProcessFromArgs(std::string_view args, model::Event* ev) const {
    if (args.find("\"pid\"") == std::string_view::npos &&
        args.find("\"thread_id\"") == std::string_view::npos) {
      return;
    }
    json::ObjectReader r(args);
    std::string_view k, v;
    int64_t n;
    while (r.Next(&k, &v)) {
      if (k == "pid" && o_.pid == model::kMissing && json::ParseLooseInt64(v, &n) && n > 0) {
        ev->pid = n;
      }
      if (k == "thread_id" && json::ParseLooseInt64(v, &n) && n > 0) ev->tid = n;
    }
  }

  static std::string Escape(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\') out.push_back('\\');
      if (static_cast<unsigned char>(c) < 0x20) continue;
      out.push_back(c);
    }
    return out;
  }

  void Store(model::Event ev) {
    if (ev.kind == model::EventKind::kInstant)
      ++stats_.instants;
    else
      ++stats_.spans;
    stats_.start_ns = std::min(stats_.start_ns, ev.start_ns);
    stats_.end_ns = std::max(stats_.end_ns, ev.end_ns());
    w_->AppendEvent(std::move(ev));
  }

  const ChromeImportOptions& o_;
  store::NodeStoreWriter* w_;
  std::optional<int64_t> base_ns_;
  std::map<int64_t, std::string> process_names_;
  std::map<std::pair<int64_t, int64_t>, std::vector<model::Event>> open_;
  std::string scratch_;
  ChromeImportStats stats_;
};

}  // namespace

StatusOr<ChromeImportStats> ImportChromeTrace(const std::string& path,
                                              const ChromeImportOptions& options,
                                              store::NodeStoreWriter* writer) {
  TP_ASSIGN_OR_RETURN(auto src, ByteSource::Open(path));
  src->set_progress(options.progress);
  ChromeSink sink(options, writer);
  StreamOptions so;
  so.allow_unterminated_array = options.allow_unterminated;
  auto r = StreamTrace(*src, sink, so);
  if (!r.ok()) return r.status();
  if (r->truncated_element) sink.stats().problems[dq::kTruncatedFiles] += 1;
  sink.Finish();
  TP_RETURN_IF_ERROR(writer->Flush().WithContext(path));
  return sink.stats();
}

}  // namespace trainprof::importers
