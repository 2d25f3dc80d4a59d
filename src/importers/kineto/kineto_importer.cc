#include "importers/kineto/kineto_importer.h"

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "base/json_dump.h"
#include "base/platform.h"
#include "importers/common/byte_source.h"
#include "importers/common/import_counters.h"
#include "importers/common/json_text.h"
#include "importers/common/run_builder.h"
#include "importers/common/trace_streamer.h"
#include "importers/kineto/kineto_event_parser.h"
#include "importers/kineto/kineto_parse_pipeline.h"
#include "model/data_quality.h"
#include "store/run_directory.h"

namespace trainprof::importers::kineto {
namespace {

// Timestamps below this (1973 as epoch ns) are offsets that need baseTimeNanoseconds.
constexpr int64_t kAbsoluteThresholdNs = 100'000'000'000'000'000;
constexpr int64_t kMaxDurationNs = 30LL * 24 * 3600 * 1'000'000'000;
constexpr size_t kTailBytes = 1 << 16;
// A flush also when this much args text is buffered: events with call stacks in their args
// (~500 bytes each) would otherwise hold 30 MB per 64 Ki-event batch.
constexpr int64_t kFlushArgsBytes = 4 << 20;
// Batches are also cut by the trace text they came from, so that the last one, which is encoded
// after the stream ends while nothing else runs, is small: a batch is cut once it came from an
// eighth of the file's text, or from as much text as the file has left (by its size hint), so
// that the batches shrink by halves toward the end; never below this much text.
constexpr int64_t kMinBatchTextBytes = 1 << 20;
constexpr int64_t kBatchesPerFile = 8;
// One event's args beyond this are not stored (counted): a store chunk must stay readable.
constexpr size_t kMaxArgsBytes = 16 << 20;
// Traces of less JSON than this are read and parsed on the importing thread (auto mode).
constexpr int64_t kPipelineMinTextBytes = 4 << 20;
// Node metadata entries kept per file (track names and the trace's scalar header fields), and
// the longest track name kept: beyond, names are counted, not stored.
constexpr size_t kMaxTrackNames = 1 << 14;
constexpr size_t kMaxTrackNameBytes = 1024;

// Finds `"baseTimeNanoseconds": N` in the last bytes of the (decompressed) file: recent Kineto
// writes it after the events, and we need it before storing them.
StatusOr<int64_t> FindBaseTimeInTail(const std::string& path, bool gzip, bool* found) {
  *found = false;
  std::string tail;
  if (!gzip) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return Unavailable(path + ": cannot reopen to read its end");
    std::fseek(f, 0, SEEK_END);
    long size = std::ftell(f);
    long from = size > static_cast<long>(kTailBytes) ? size - static_cast<long>(kTailBytes) : 0;
    std::fseek(f, from, SEEK_SET);
    tail.resize(static_cast<size_t>(size - from));
    size_t n = std::fread(tail.data(), 1, tail.size(), f);
    tail.resize(n);
    std::fclose(f);
  } else {
    // gzip has no random access: inflate once more, keeping only the last window.
    TP_ASSIGN_OR_RETURN(auto src, ByteSource::Open(path));
    constexpr size_t kBufBytes = 256 << 10;
    std::unique_ptr<char[]> buf(new char[kBufBytes]);  // not zeroed: only what Read fills is read
    while (true) {
      TP_ASSIGN_OR_RETURN(size_t n, src->Read(buf.get(), kBufBytes));
      if (n == 0) break;
      tail.append(buf.get(), n);
      if (tail.size() > 2 * kTailBytes) tail.erase(0, tail.size() - kTailBytes);
    }
  }
  size_t k = tail.rfind("\"baseTimeNanoseconds\"");
  if (k == std::string::npos) return int64_t{0};
  const char* p = tail.data() + k + std::strlen("\"baseTimeNanoseconds\"");
  const char* end = tail.data() + tail.size();
  p = json::SkipWs(p, end);
  if (p >= end || *p != ':') return int64_t{0};
  p = json::SkipWs(p + 1, end);
  const char* q = p;
  while (q < end && ((*q >= '0' && *q <= '9') || *q == '-')) ++q;
  int64_t v;
  if (!json::ParseInt64(std::string_view(p, static_cast<size_t>(q - p)), &v)) return int64_t{0};
  *found = true;
  return v;
}

std::string SnakeCase(std::string_view s) {
  std::string out;
  for (char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      out.push_back(c);
    } else if (c >= 'A' && c <= 'Z') {
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if (!out.empty() && out.back() != '_') {
      out.push_back('_');
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// "step" and "mode" of a step span's args as trainprof's Chrome-trace export writes them.
void StepArgs(std::string_view args, int64_t* step, std::string* mode) {
  if (args.empty() || args.front() != '{') return;
  json::ObjectReader r(args);
  std::string_view k, v;
  while (r.Next(&k, &v)) {
    int64_t n;
    if (k == "step" && json::ParseLooseInt64(v, &n) && n >= 0) *step = n;
    // A mode is a word (train, eval, global); one longer than smdebug's cap is not a mode.
    if (k == "mode" && v.size() <= 66 && !v.empty() && v.front() == '"') {
      json::DecodeString(v, mode);
    }
  }
}

// Step spans remembered to store each once (NewStepSpan).
constexpr size_t kStepSpanWindow = 4096;

// The mode of a global instant ("s": "g") and of a step derived from ProfilerStep#N.
constexpr const char* kModeGlobal = "global";

// What the files of one import share. Files may be read on several threads at once (one file
// a thread); each decides its node in its turn, in the order the files were given, so that the
// nodes' names (and which of two files giving one rank is refused) are those of a one-thread
// import whatever the threads' timing.
struct RunState {
  RunBuilder* builder = nullptr;
  // Guarded by `mu`, like builder's writers (RunBuilder::Node) and next_turn.
  std::map<int64_t, std::string> rank_files;      // rank -> the file that brought it
  std::map<std::string, std::string> node_files;  // node -> the first file stored there
  std::set<std::string> rankless_nodes;           // nodes of files without a rank: one file each
  // A host's node for its ranks when a trace without a rank took the host's name first.
  std::map<std::string, std::string> ranked_alias;
  int64_t flush_events = 1 << 18;
  int file_threads = 1;  // files read at once
  // Files being read into each node's writer: the last to end frees the writer's buffers
  // (NodeStoreWriter::ReleaseBuffers), so that an import of many nodes holds the buffers of
  // those being filled, not of all.
  std::map<store::NodeStoreWriter*, int> readers;

  std::mutex mu;
  std::condition_variable turn_cv;
  size_t next_turn = 0;  // the file whose node is decided next
  // The first file (by its place in the list) that failed: files after it stop being read.
  std::atomic<size_t> first_failure{SIZE_MAX};

  // Waits, `lock` held on `mu`, until the files before `index` have decided their nodes.
  void WaitTurn(std::unique_lock<std::mutex>& lock, size_t index) {
    turn_cv.wait(lock, [&] { return next_turn == index; });
  }
  void EndTurn(size_t index) {  // `mu` held
    next_turn = index + 1;
    turn_cv.notify_all();
  }
  void NoteFailure(size_t index) {
    size_t first = first_failure.load();
    while (index < first && !first_failure.compare_exchange_weak(first, index)) {
    }
  }
  bool EarlierFileFailed(size_t index) const {
    return first_failure.load(std::memory_order_relaxed) < index;
  }
};

// Parses one trace file into the run. The sink half receives elements from the streamer (on
// one thread) or, already parsed, from the pipeline (kineto_parse_pipeline.h).
class FileImporter : public ParsedEventSink {
 public:
  // index: the file's place in the import's list; text_bytes_hint: about how much text the file
  // holds (ByteSource::text_bytes_hint; 0 when unknown).
  FileImporter(RunState& run, size_t index, std::string path, bool gzip, int64_t text_bytes_hint)
      : run_(run), index_(index), path_(std::move(path)), gzip_(gzip), text_hint_(text_bytes_hint) {
    summary_.path = path_;
    batch_text_max_ = std::max(kMinBatchTextBytes, text_hint_ / kBatchesPerFile);
  }

  Status OnTopLevel(std::string_view key, std::string_view value) override {
    if (key == "distributedInfo") {
      json::ObjectReader r(value);
      std::string_view k, v;
      while (r.Next(&k, &v)) {
        int64_t n;
        if (k == "rank" && json::ParseLooseInt64(v, &n)) rank_ = n;
        if (k == "world_size" && json::ParseLooseInt64(v, &n)) summary_.world_size = n;
        if (k == "backend") meta_["kineto.distributed_backend"] = std::string(v);
      }
      if (started_) late_header_ = true;
    } else if (key == "deviceProperties" || key == "computeProperties") {
      json::ArrayReader a(value);
      std::string_view dev;
      while (a.Next(&dev)) {
        model::GpuInfo g;
        json::ObjectReader r(dev);
        std::string_view k, v;
        int64_t n;
        while (r.Next(&k, &v)) {
          if (k == "id" && json::ParseLooseInt64(v, &n)) g.index = static_cast<int>(n);
          if (k == "name") json::DecodeString(v, &g.name);
          if (k == "totalGlobalMem" && json::ParseLooseInt64(v, &n)) g.memory_total_bytes = n;
        }
        node_.gpus.push_back(g);
      }
      summary_.gpus = static_cast<int64_t>(node_.gpus.size());
    } else if (key == "baseTimeNanoseconds") {
      int64_t n;
      if (json::ParseLooseInt64(value, &n)) {
        if (base_decided_ && base_ns_ != 0 && base_ns_ != n) late_header_ = true;
        header_base_ns_ = n;
      }
    } else if (key == "host_name" || key == "hostname") {
      json::DecodeString(value, &host_);
    } else if (!value.empty() && value[0] != '{' && value[0] != '[' && value.size() < 256) {
      std::string text;
      if (value[0] == '"')
        json::DecodeString(value, &text);
      else
        text = std::string(value);
      meta_["kineto." + std::string(key)] = text;
    }
    return OkStatus();
  }

  // The fast path: the element parsed where it lies in the read buffer, in one pass.
  InPlaceResult OnEventInPlace(const char* p, const char* end, const char** element_end,
                               Status* status) override {
    return ParseInPlaceAndTake(p, end, element_offset(), element_end, &scratch_, &args_, status,
                               [&](const RawEvent& e) { return Handle(e); });
  }

  // The same, parsed on the pipeline's reading thread.
  Status OnParsedEvent(const RawEvent& e) override { return Handle(e); }

  // Everything the fast path leaves: the element cut out of the stream as text.
  Status OnEvent(std::string_view text) override {
    RawEvent e;
    if (!ParseRawEvent(text, &e, &scratch_)) {
      ++summary_.elements;
      Problem(dq::kInvalidEvents);
      return OkStatus();
    }
    args_.clear();
    if (!e.args.empty()) json::AppendMinified(e.args, &args_);
    e.args = args_;
    e.text_end = element_offset() + static_cast<int64_t>(text.size());
    return Handle(e);
  }

  // One parsed element; e.args is minified.
  Status Handle(const RawEvent& e) {
    if (run_.EarlierFileFailed(index_)) return Unavailable(path_ + ": not read on");
    ++summary_.elements;
    if (e.text_end > text_seen_) text_seen_ = e.text_end;
    if (!started_) TP_RETURN_IF_ERROR(Start());
    switch (e.ph) {
      case 'X':
        return Complete(e);
      case 'i':
      case 'I':
      case 'R':
        return Instant(e);
      case 's':
      case 'f':
      case 't':
        return Flow(e);
      case 'C':
        return Counter(e);
      case 'M':
        return Metadata(e);
      case 'B':
        return Begin(e);
      case 'E':
        return End(e);
      default:
        Problem(dq::kUnknownPhases);
        return OkStatus();
    }
  }

  // Writes the file's last events and counts what it left open; Apply() gives the run the rest.
  Status Finish() {
    // No events, or refused before any was stored (duplicated rank): nothing to flush.
    if (writer_ == nullptr) return OkStatus();
    const Status flushed = WaitForFlush();
    for (auto& [track, stack] : open_) {
      if (!stack.empty()) Problem(dq::kUnmatchedBegins, static_cast<int64_t>(stack.size()));
    }
    open_.clear();
    for (auto& [category, n] : category_counts_) summary_.categories[category] += n;
    category_counts_.clear();
    // The last batch is encoded while nothing else runs: on two threads (when no other file
    // is read at the same time).
    Status last = writer_->Flush(run_.file_threads > 1 ? 1 : 2).WithContext(path_);
    Done();
    return flushed.ok() ? last : flushed;
  }

  // The file no longer appends to its node's writer (read to its end, or failed).
  void Done() {
    if (writer_ == nullptr || done_) return;
    done_ = true;
    std::lock_guard<std::mutex> lock(run_.mu);
    if (--run_.readers[writer_] == 0) writer_->ReleaseBuffers();
  }

  // What the file gives its node and the run besides events: metadata, counters, warnings and
  // its time span. Called for each file in the order given, once it and the files before it
  // are read (Joiner): a key that two traces of one host both set (kineto.schemaVersion) is the
  // later file's, as when the files are read one after the other.
  void Apply() {
    if (writer_ == nullptr) return;
    // The offset added to relative timestamps: `analyze --hta-compat` redoes HTA's rounding
    // on the values the file wrote (kineto.[rankN.]base_time_ns).
    if (base_ns_ != 0) {
      std::string key = "kineto.";
      if (rank_ != model::kMissing) key += "rank" + std::to_string(rank_) + ".";
      meta_[key + "base_time_ns"] = std::to_string(base_ns_);
    }
    for (const auto& [k, v] : meta_) writer_->SetMeta(k, v);
    if (late_header_) {
      writer_->Annotate(summary_.start_ns, "import_warning",
                        path_ + ": distributedInfo or baseTimeNanoseconds came after events");
    }
    for (const auto& [name, n] : summary_.problems) writer_->AddCounter(name, n);
    for (const std::string& w : summary_.warnings) {
      writer_->Annotate(summary_.start_ns, "import_warning", path_ + ": " + w);
    }
    if (summary_.events_stored > 0) run_.builder->NoteTime(summary_.start_ns, summary_.end_ns);
  }

  // A file that stored nothing (or failed before its first event) still takes its turn to
  // decide a node, so that the files after it get theirs.
  void PassTurn() {
    if (turn_taken_) return;
    turn_taken_ = true;
    std::unique_lock<std::mutex> lock(run_.mu);
    run_.WaitTurn(lock, index_);
    run_.EndTurn(index_);
  }

  KinetoFileSummary& summary() { return summary_; }
  bool started() const { return started_; }
  // Batches written on this thread as they are cut, not on a thread of their own (see
  // FlushInBackground). Set before the first element.
  void set_write_inline(bool write_inline) { write_inline_ = write_inline; }

 private:
  Status Start() {
    started_ = true;
    turn_taken_ = true;
    std::unique_lock<std::mutex> lock(run_.mu);
    run_.WaitTurn(lock, index_);
    Status decided = DecideNode();
    run_.EndTurn(index_);
    lock.unlock();
    TP_RETURN_IF_ERROR(decided);
    // A batch is cut at flush_events events or kFlushArgsBytes of args: room for one from the
    // start (a batch's buffers grown by doubling copied themselves and faulted in twice the
    // pages). Capped: a test's one-batch import asks for millions.
    writer_->ReserveEvents(static_cast<size_t>(std::min<int64_t>(run_.flush_events, 1 << 16)),
                           static_cast<size_t>(kFlushArgsBytes + (64 << 10)));
    return OkStatus();
  }

  // The file's node, in its turn (run_.mu held): by host, rank or file name; refused when its
  // rank came in an earlier file.
  Status DecideNode() {
    summary_.rank = rank_;
    if (rank_ != model::kMissing) {
      auto [it, inserted] = run_.rank_files.emplace(rank_, path_);
      if (!inserted) {
        return InvalidArgument(path_ + ": rank " + std::to_string(rank_) +
                               " (distributedInfo) was already imported from " + it->second +
                               "; one trace per rank");
      }
    }
    if (!host_.empty()) {
      node_.node = host_;
      node_.hostname = host_;
    } else if (rank_ != model::kMissing) {
      node_.node = "rank-" + std::to_string(rank_);
    } else {
      node_.node = FileStem(path_);
    }
    node_.node = store::SanitizeNodeName(node_.node);
    // A trace without a rank is a process of its own: it shares its node with no other file
    // (two traces named alike from two jobs would otherwise become one timeline, and the ranks
    // on a host keep a node that a rankless trace took).
    const std::string wanted = node_.node;
    const bool rankless = rank_ == model::kMissing;
    if (auto alias = run_.ranked_alias.find(wanted);
        !rankless && alias != run_.ranked_alias.end()) {
      node_.node = alias->second;  // the ranks of this host share the node the first one got
    } else if ((rankless && run_.node_files.count(wanted)) || run_.rankless_nodes.count(wanted)) {
      for (int n = 2; run_.node_files.count(node_.node); ++n) {
        node_.node = wanted + "-" + std::to_string(n);
      }
      summary_.warnings.push_back((rankless ? "no rank (distributedInfo) and " : "") +
                                  ("node " + wanted) + " was taken by " + run_.node_files[wanted] +
                                  (rankless ? "" : ", a trace without a rank") +
                                  ": stored as node " + node_.node);
      if (!rankless) run_.ranked_alias.emplace(wanted, node_.node);
    }
    run_.node_files.emplace(node_.node, path_);
    if (rankless) run_.rankless_nodes.insert(node_.node);
    summary_.node = node_.node;
    TP_ASSIGN_OR_RETURN(writer_, run_.builder->Node(node_));
    ++run_.readers[writer_];
    return OkStatus();
  }

  void Problem(const char* name, int64_t n = 1) { summary_.problems[name] += n; }

  // Decides, at the first timestamp, whether timestamps are offsets from baseTimeNanoseconds.
  Status DecideBase(int64_t first_ts_ns) {
    base_decided_ = true;
    if (first_ts_ns >= kAbsoluteThresholdNs) {
      base_ns_ = 0;  // absolute already (integer-us generation)
      return OkStatus();
    }
    if (header_base_ns_) {
      base_ns_ = *header_base_ns_;
      return OkStatus();
    }
    bool found = false;
    ReadAheadScope read_ahead(*this);  // the reading thread parses on meanwhile
    TP_ASSIGN_OR_RETURN(base_ns_, FindBaseTimeInTail(path_, gzip_, &found));
    if (!found) Problem(dq::kRelativeTimestamps);
    return OkStatus();
  }

  // Parses ts into epoch ns; false (counted) when missing or malformed.
  bool Timestamp(const RawEvent& e, int64_t* ns, Status* status) {
    int64_t t;
    if (e.ts.empty() || !json::ParseMicrosToNs(e.ts, &t)) {
      Problem(dq::kEventsWithoutTimestamp);
      return false;
    }
    if (summary_.timestamp_format.empty()) {
      summary_.timestamp_format =
          e.ts.find_first_of(".eE") == std::string_view::npos ? "integer_us" : "decimal_us";
    }
    if (!base_decided_) {
      *status = DecideBase(t);
      if (!status->ok()) return false;
    }
    summary_.base_time_ns = base_ns_;
    if (!json::OffsetTimestampNs(t, base_ns_, ns)) {
      Problem(dq::kAbsurdTimestamps);
      return false;
    }
    return true;
  }

  model::EventView View(const RawEvent& e, model::EventKind kind, int64_t start_ns) {
    model::EventView ev;
    ev.kind = kind;
    ev.start_ns = start_ns;
    ev.name = e.name;
    ev.category = NormalizeCategory(e.cat);
    ev.pid = ParseTrackId(e.pid);
    ev.tid = ParseTrackId(e.tid);
    if (!e.tid.empty() && e.tid.front() == '"') NameStringTid(e.tid, ev.pid, ev.tid);
    ev.rank = rank_;
    if (e.args.size() > kMaxArgsBytes) {
      Problem(dq::kOversizedArgs);  // the event is kept, its args are not
    } else if (e.args.size() > 2 * kMaxArgsDepth && JsonNestingExceeds(e.args, kMaxArgsDepth)) {
      Problem(dq::kDeepArgs);  // likewise: readers and exporters never meet deeper nesting
    } else if (e.args != "{}") {
      ev.args = e.args;
    }
    return ev;
  }

  // Events by category without a map lookup per event: a handful of categories, the same
  // one run after run.
  void CountCategory(std::string_view category) {
    if (last_category_ < category_counts_.size() &&
        category_counts_[last_category_].first == category) {
      ++category_counts_[last_category_].second;
      return;
    }
    for (size_t i = 0; i < category_counts_.size(); ++i) {
      if (category_counts_[i].first == category) {
        last_category_ = i;
        ++category_counts_[i].second;
        return;
      }
    }
    last_category_ = category_counts_.size();
    category_counts_.emplace_back(std::string(category), 1);
  }

  Status Store(const model::EventView& ev) {
    int64_t end = ev.start_ns + ev.duration_ns;
    if (summary_.events_stored == 0) {
      summary_.start_ns = ev.start_ns;
      summary_.end_ns = end;
    } else {
      if (ev.start_ns < summary_.start_ns) summary_.start_ns = ev.start_ns;
      if (end > summary_.end_ns) summary_.end_ns = end;
    }
    ++summary_.events_stored;
    CountCategory(ev.category);
    writer_->AppendEvent(ev);
    if (++pending_ >= run_.flush_events || writer_->buffered_event_bytes() >= kFlushArgsBytes ||
        CutForText()) {
      pending_ = 0;
      batch_from_ = text_seen_;
      TP_RETURN_IF_ERROR(FlushInBackground());
    }
    return OkStatus();
  }

  // The batch came from an eighth of the file's text, or from as much text as is left (neither
  // when the hint proved wrong: more text than it said).
  bool CutForText() const {
    const int64_t batch = text_seen_ - batch_from_;
    if (batch < kMinBatchTextBytes || text_hint_ <= 0 || text_seen_ > text_hint_) return false;
    return batch >= batch_text_max_ || batch >= text_hint_ - text_seen_;
  }

  // Encoding, compressing and writing a batch (about a fifth of an import's CPU) runs on a
  // second thread while this one parses the next batch: two cores share the import. The batch
  // is cut here (the store's chunks are the same whatever the threads' timing); one batch in
  // flight: the parser waits for the previous write first, so at most two batches are held.
  // With write_inline (the two-thread parse, whose reading thread has the other core, or a
  // single core, or files read on several threads) the batch is written here and now: a third
  // thread on two cores would only take turns with the other two, on whichever core the
  // scheduler put it. Cut and written in one step then: another file of the same node may be
  // cutting its batch at the same time.
  Status FlushInBackground() {
    TP_RETURN_IF_ERROR(WaitForFlush());
    if (write_inline_) return writer_->Flush(1).WithContext(path_);
    std::function<Status()> write = writer_->CutBatch();
    try {
      flushing_ = std::async(std::launch::async, write);
    } catch (const std::system_error&) {
      flushing_ = std::async(std::launch::deferred, write);  // no thread: written when waited for
    }
    return OkStatus();
  }

  Status WaitForFlush() {
    if (!flushing_.valid()) return OkStatus();
    return flushing_.get().WithContext(path_);
  }

  Status Complete(const RawEvent& e) {
    Status st;
    int64_t start;
    if (!Timestamp(e, &start, &st)) return st;
    int64_t dur;
    if (e.dur.empty() || !json::ParseMicrosToNs(e.dur, &dur)) {
      Problem(dq::kEventsWithoutDuration);
      return OkStatus();
    }
    if (dur < 0 || dur > kMaxDurationNs) {
      Problem(dq::kAbsurdDurations);
      return OkStatus();
    }
    model::EventView ev = View(e, model::EventKind::kSpan, start);
    ev.duration_ns = dur;
    int64_t step;
    if (ev.category == model::kCategoryStep) {
      // A step span as trainprof's Chrome-trace export writes it (args: step, mode): it keeps
      // its number and mode; one that a ProfilerStep#N of the same file already gave is not
      // stored twice (an imported trace exported again carries both).
      std::string mode;
      StepArgs(ev.args, &ev.step, &mode);
      if (!mode.empty()) {
        step_mode_ = std::move(mode);
        ev.mode = step_mode_;
      }
      if (!NewStepSpan(start, dur, ev.pid, ev.tid)) return OkStatus();
      ++summary_.steps;
      return Store(ev);
    }
    bool cpu_side = ev.category == "user_annotation" || ev.category == "cpu_op";
    if (cpu_side && ParseProfilerStep(e.name, &step)) ev.step = step;
    if (ev.step != model::kMissing && NewStepSpan(start, dur, ev.pid, ev.tid)) {
      ++summary_.steps;
      model::EventView s;
      s.kind = model::EventKind::kSpan;
      s.start_ns = start;
      s.duration_ns = dur;
      s.name = model::kCategoryStep;
      s.category = model::kCategoryStep;
      s.mode = kModeGlobal;
      s.step = ev.step;
      s.pid = ev.pid;
      s.tid = ev.tid;
      s.rank = rank_;
      TP_RETURN_IF_ERROR(Store(s));
    }
    return Store(ev);
  }

  Status Instant(const RawEvent& e) {
    Status st;
    int64_t ts;
    if (!Timestamp(e, &ts, &st)) return st;
    if (e.name == "[memory]" && !e.args.empty()) MemorySample(ts, e.args);
    model::EventView ev = View(e, model::EventKind::kInstant, ts);
    // A global instant ("s": "g": the profiler's "Iteration Start", "Record Window End") marks
    // the whole trace, not a thread: its mode says so, and the export writes it back global.
    if (e.s == "g") ev.mode = kModeGlobal;
    return Store(ev);
  }

  void MemorySample(int64_t ts, std::string_view args) {
    json::ObjectReader r(args);
    std::string_view k, v;
    int64_t type = model::kMissing, id = model::kMissing, allocated = model::kMissing,
            reserved = model::kMissing, n;
    while (r.Next(&k, &v)) {
      if (!json::ParseLooseInt64(v, &n)) continue;
      if (k == "Device Type")
        type = n;
      else if (k == "Device Id")
        id = n;
      else if (k == "Total Allocated")
        allocated = n;
      else if (k == "Total Reserved")
        reserved = n;
    }
    std::string device;
    if (type == 0)
      device = "cpu";
    else if (type == 1 && id != model::kMissing)
      device = "gpu" + std::to_string(id);
    else if (type != model::kMissing) {
      device =
          "device" + std::to_string(type) + ":" + (id == model::kMissing ? "" : std::to_string(id));
    } else {
      return;
    }
    if (allocated != model::kMissing) {
      writer_->Append(writer_->Series("torch_memory_allocated_bytes", device), ts,
                      static_cast<double>(allocated));
      ++summary_.metric_samples;
    }
    if (reserved != model::kMissing) {
      writer_->Append(writer_->Series("torch_memory_reserved_bytes", device), ts,
                      static_cast<double>(reserved));
      ++summary_.metric_samples;
    }
  }

  Status Flow(const RawEvent& e) {
    Status st;
    int64_t ts;
    if (!Timestamp(e, &ts, &st)) return st;
    model::EventView ev;
    ev.kind = model::EventKind::kInstant;
    ev.start_ns = ts;
    ev.name = e.name.empty() ? e.cat : e.name;
    ev.category = e.cat;
    ev.pid = ParseTrackId(e.pid);
    ev.tid = ParseTrackId(e.tid);
    ev.rank = rank_;
    int64_t id = model::kMissing;
    json::ParseLooseInt64(e.id, &id);
    std::string& a = flow_args_;
    a.assign("{\"flow_phase\":\"");
    a.push_back(e.ph);
    a += "\"";
    if (id != model::kMissing) {
      char buf[24];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, id);
      a += ",\"flow_id\":";
      a.append(buf, static_cast<size_t>(end - buf));
    }
    if (!e.bp.empty()) {
      a += ",\"bp\":\"";
      a += e.bp;
      a += "\"";
    }
    a += "}";
    ev.args = a;
    ++summary_.flows;
    return Store(ev);
  }

  Status Counter(const RawEvent& e) {
    Status st;
    int64_t ts;
    if (!Timestamp(e, &ts, &st)) return st;
    std::string metric = "kineto_" + SnakeCase(e.name);
    json::ObjectReader r(e.args);
    std::string_view k, v;
    double d;
    while (r.Next(&k, &v)) {
      if (!json::ParseDouble(v, &d)) continue;
      writer_->Append(writer_->Series(metric, json::DecodeKey(k)), ts, d);
      ++summary_.metric_samples;
    }
    return OkStatus();
  }

  // Track names: what Kineto calls the processes (and, in process_labels, the device of a GPU
  // pid: "GPU 1") and threads (a GPU stream: "stream 7 "), kept as node metadata for the
  // Chrome-trace export. Names on tracks without a numeric id ("Spans") have no event to name.
  Status Metadata(const RawEvent& e) {
    ++summary_.metadata_events;
    const bool thread = e.name == "thread_name";
    const bool labels = e.name == "process_labels";
    if (e.name != "process_name" && !thread && !labels) return OkStatus();
    const int64_t pid = ParseTrackId(e.pid);
    const int64_t tid = thread ? ParseTrackId(e.tid) : model::kMissing;
    if (pid == model::kMissing || (thread && tid == model::kMissing)) return OkStatus();
    json::ObjectReader r(e.args);
    std::string_view k, v;
    while (r.Next(&k, &v)) {
      if (k != (labels ? "labels" : "name")) continue;
      std::string label;
      if (!json::DecodeString(v, &label) || label.size() > kMaxTrackNameBytes) continue;
      std::string key = TrackNameKey(e.name, rank_, pid, tid);
      if (meta_.size() >= kMaxTrackNames && meta_.count(key) == 0) {
        Problem(dq::kTrackNamesDropped);
        continue;
      }
      meta_[key] = std::move(label);
    }
    return OkStatus();
  }

  // False for a step span already stored. The pairs this catches lie side by side (an export
  // writes a ProfilerStep#N and its step span at the same start), so a window of recent steps
  // is enough and memory stays bounded.
  bool NewStepSpan(int64_t start, int64_t dur, int64_t pid, int64_t tid) {
    if (step_spans_.size() >= kStepSpanWindow) step_spans_.clear();
    return step_spans_.insert({start, dur, pid, tid}).second;
  }

  // A tid written as text ("stream 7", 2021 traces, which have no thread_name for it) is the
  // track's name, unless a thread_name names it: kept, so that the export names the track.
  void NameStringTid(std::string_view text, int64_t pid, int64_t tid) {
    if (pid == model::kMissing || tid == model::kMissing) return;
    if (string_tids_.size() >= kMaxTrackNames) return;  // bounded as the track names are
    if (!string_tids_.insert({pid, tid}).second) return;
    std::string label;
    if (!json::DecodeString(text, &label) || label.size() > kMaxTrackNameBytes) return;
    if (label.find_first_not_of("0123456789") == std::string::npos) return;  // just a number
    std::string key = TrackNameKey("thread_name", rank_, pid, tid);
    if (meta_.size() >= kMaxTrackNames && meta_.count(key) == 0) {
      Problem(dq::kTrackNamesDropped);
      return;
    }
    meta_.emplace(std::move(key), std::move(label));  // a thread_name event wins
  }

  // B/E pairs (rare in Kineto, common in other Chrome traces) become spans.
  Status Begin(const RawEvent& e) {
    Status st;
    int64_t ts;
    if (!Timestamp(e, &ts, &st)) return st;
    model::EventView v = View(e, model::EventKind::kSpan, ts);
    model::Event ev;
    ev.kind = v.kind;
    ev.start_ns = v.start_ns;
    ev.name = v.name;
    ev.category = v.category;
    ev.pid = v.pid;
    ev.tid = v.tid;
    ev.rank = v.rank;
    ev.args = v.args;
    open_[{ev.pid, ev.tid}].push_back(std::move(ev));
    return OkStatus();
  }

  Status End(const RawEvent& e) {
    Status st;
    int64_t ts;
    if (!Timestamp(e, &ts, &st)) return st;
    auto it = open_.find({ParseTrackId(e.pid), ParseTrackId(e.tid)});
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
    // The end's args join the begin's (a key the begin has keeps its value), within the same
    // bounds as any event's args (View).
    if (e.args.size() > kMaxArgsBytes) {
      Problem(dq::kOversizedArgs);
    } else if (e.args.size() > 2 * kMaxArgsDepth && JsonNestingExceeds(e.args, kMaxArgsDepth)) {
      Problem(dq::kDeepArgs);
    } else if (!e.args.empty() && e.args != "{}") {
      std::string merged;
      json::MergeObjectMembers(ev.args, e.args, &merged);
      if (merged.size() > kMaxArgsBytes) {
        Problem(dq::kOversizedArgs);
      } else {
        ev.args = std::move(merged);
      }
    }
    return Store(model::ViewOf(ev));
  }

  RunState& run_;
  const size_t index_;
  std::string path_;
  bool gzip_;
  bool turn_taken_ = false;
  bool done_ = false;  // Done() ran
  KinetoFileSummary summary_;
  model::NodeInfo node_;
  std::string host_;
  std::map<std::string, std::string> meta_;
  int64_t rank_ = model::kMissing;
  int64_t base_ns_ = 0;
  bool base_decided_ = false;
  std::optional<int64_t> header_base_ns_;
  bool started_ = false;
  bool late_header_ = false;
  store::NodeStoreWriter* writer_ = nullptr;
  int64_t pending_ = 0;
  const int64_t text_hint_;
  int64_t batch_text_max_ = 0;
  int64_t text_seen_ = 0;         // where the last element handled ends in the text
  int64_t batch_from_ = 0;        // where the batch began
  std::future<Status> flushing_;  // the batch being written on the second thread
  bool write_inline_ = false;
  std::string scratch_;
  std::string args_;       // the current event's args, minified
  std::string flow_args_;  // a flow's args as stored
  std::vector<std::pair<std::string, int64_t>> category_counts_;
  size_t last_category_ = 0;
  std::map<std::pair<int64_t, int64_t>, std::vector<model::Event>> open_;
  // Step spans stored, by start, duration, pid and tid: each is stored once, whether it came
  // from a ProfilerStep#N or as a step span of trainprof's export.
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> step_spans_;
  std::string step_mode_;  // the mode of the step span being stored (its view points here)
  std::set<std::pair<int64_t, int64_t>> string_tids_;  // (pid, tid) written as text, seen
};

}  // namespace

std::string TrackNameKey(std::string_view what, int64_t rank, int64_t pid, int64_t tid) {
  std::string key = "kineto.";
  if (rank != model::kMissing) key += "rank" + std::to_string(rank) + ".";
  key += what;
  key += "." + std::to_string(pid);
  if (tid != model::kMissing) key += "." + std::to_string(tid);
  return key;
}

namespace {

// One file's part of an import, joined to the run in the order the files were given.
struct FileOutcome {
  bool read = false;  // read to its end, or to its failure (files after a failure are not)
  Status status;
  std::unique_ptr<FileImporter> file;  // null when the file did not open; freed once joined
  bool apply = false;                  // its metadata, counters and time span go to the run
  KinetoFileSummary summary;           // once joined
};

// Joins the files read to the run in the order given, as far as they are read: each file's
// metadata, counters and warnings go to its node as soon as the files before it went (so that
// the parse state of a file read early is not held until the last one ends), none after the
// first failure. `mu` held.
struct Joiner {
  std::vector<FileOutcome>& outcomes;
  size_t next = 0;
  bool failed = false;
  void JoinReady() {
    for (; next < outcomes.size() && outcomes[next].read; ++next) {
      FileOutcome& o = outcomes[next];
      if (!failed && o.apply) o.file->Apply();
      if (!failed && o.status.ok()) o.summary = std::move(o.file->summary());
      if (!o.status.ok()) failed = true;
      o.file.reset();
    }
  }
};

// Above this many files read at once, memory (a read window and batch buffers each) grows for
// little: the disk and the store's writers are shared.
constexpr int kMaxFileThreads = 8;

int FileThreads(const KinetoImportOptions& options, int cpus) {
  const int files = static_cast<int>(std::min<size_t>(options.traces.size(), kMaxFileThreads));
  if (options.file_threads > 0) return std::min(options.file_threads, files);
  return std::max(1, std::min(cpus, files));
}

FileOutcome ImportFile(RunState& run, const KinetoImportOptions& options, size_t index, int cpus) {
  FileOutcome out;
  out.read = true;
  const std::string& path = options.traces[index];
  auto src = ByteSource::Open(path);
  if (!src.ok()) {
    FileImporter(run, index, path, false, 0).PassTurn();
    out.status = src.status();
    return out;
  }
  (*src)->set_progress(options.progress);
  out.file =
      std::make_unique<FileImporter>(run, index, path, (*src)->gzip(), (*src)->text_bytes_hint());
  FileImporter& file = *out.file;
  StreamOptions stream_options;
  stream_options.initial_buffer_bytes = std::max<size_t>(16, options.read_buffer_bytes);
  // A small trace reads through a smaller window (it still grows for a larger element): a
  // quarter of its text is four refills, and three quarters fewer fresh pages to fault in.
  if (const int64_t hint = (*src)->text_bytes_hint(); hint > 0) {
    stream_options.initial_buffer_bytes =
        std::min(stream_options.initial_buffer_bytes,
                 std::max<size_t>(64 << 10, static_cast<size_t>(hint / 4)));
  }
  // Under kPipelineMinTextBytes of JSON, starting and feeding a second thread costs more than
  // it saves (measured in docs/benchmarks.md): one thread. Files read at once take a core each:
  // a file gets a reading thread of its own only when there are cores to spare for it.
  const bool pipeline =
      options.parse_threads >= 2 || (options.parse_threads == 0 && cpus >= 2 * run.file_threads &&
                                     (*src)->text_bytes_hint() >= kPipelineMinTextBytes);
  // Batches are written on a thread of their own only when a core is free for it: not beside
  // the two-thread parse (its two threads take two cores), not on one core, not beside other
  // files.
  file.set_write_inline(pipeline || cpus < 2 || run.file_threads > 1);
  auto streamed = pipeline ? StreamTraceParallel(**src, file, stream_options)
                           : StreamTrace(**src, file, stream_options);
  if (!streamed.ok()) {
    out.status = streamed.status();
    (void)file.Finish();  // keep what was read, with its counters
    out.apply = true;
  } else if (!streamed->saw_trace_events && streamed->events == 0) {
    out.status = DataLoss(path + ": not a Kineto trace (no \"traceEvents\" array)");
  } else if (!file.started() && file.summary().elements > 0) {
    out.status = DataLoss(path + ": not a Kineto trace: none of its " +
                          std::to_string(file.summary().elements) +
                          " elements is a trace event object with a \"ph\"");
  } else {
    out.status = file.Finish();
    out.apply = true;
  }
  file.PassTurn();
  file.Done();  // a file that failed before its Finish
  return out;
}

}  // namespace

StatusOr<KinetoImportResult> ImportKineto(const KinetoImportOptions& options) {
  if (options.traces.empty()) return InvalidArgument("import kineto needs at least one trace");
  std::vector<std::string> command = {"trainprof", "import", "kineto"};
  command.insert(command.end(), options.traces.begin(), options.traces.end());
  TP_ASSIGN_OR_RETURN(auto builder, RunBuilder::Create(options.out, options.name, "import kineto",
                                                       command, options.scratch));
  TP_RETURN_IF_ERROR(RefuseFilesGivenTwice(options.traces));
  const int cpus = platform::UsableCpuCount();
  RunState run;
  run.builder = builder.get();
  run.flush_events = std::max<int64_t>(1, options.flush_events);
  run.file_threads = FileThreads(options, cpus);
  for (const std::string& path : options.traces) ProgressAddFile(options.progress, path);
  // Each thread takes the next file in the list until none is left, or one failed (the files
  // after it are not read on: the import fails with the first failure in the list, as it would
  // one file at a time).
  std::vector<FileOutcome> outcomes(options.traces.size());
  Joiner joiner{outcomes};
  std::atomic<size_t> next{0};
  auto read_files = [&] {
    for (size_t k; (k = next.fetch_add(1)) < outcomes.size();) {
      if (run.EarlierFileFailed(k)) break;
      FileOutcome o = ImportFile(run, options, k, cpus);
      if (!o.status.ok()) run.NoteFailure(k);
      std::lock_guard<std::mutex> lock(run.mu);
      outcomes[k] = std::move(o);
      joiner.JoinReady();
    }
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < run.file_threads; ++t) {
    try {
      helpers.emplace_back(read_files);
    } catch (const std::system_error&) {
      break;  // no thread to be had: the files are read on fewer
    }
  }
  read_files();
  for (std::thread& t : helpers) t.join();
  KinetoImportResult result;
  Status failure;
  for (FileOutcome& o : outcomes) {
    if (!o.read) break;
    if (!o.status.ok()) {
      failure = o.status;
      break;
    }
    result.events_stored += o.summary.events_stored;
    result.files.push_back(std::move(o.summary));
  }
  Status finish = builder->Finish();
  result.nodes = builder->node_names();
  if (!failure.ok()) return failure;
  TP_RETURN_IF_ERROR(finish);
  return result;
}

}  // namespace trainprof::importers::kineto
