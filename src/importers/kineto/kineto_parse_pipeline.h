#pragma once
// The Kineto import on two cores: a second thread reads (inflating gzip) and tokenizes the
// trace (finding each element's end, parsing its members, minifying its args) one window of
// text at a time, while the caller's thread gives the parsed events their meaning and stores
// them. The sink sees exactly the calls, in exactly the order, that the one-thread streamer
// (StreamTrace) would make, so the stored run is the same byte for byte; only OnEventInPlace
// becomes OnParsedEvent (the parse already done).
//
// Memory stays bounded: at most kMaxQueuedWindows (kMaxReadAheadWindows while the importer
// looks for the base time at the end of the file) windows of parsed text wait for the caller
// (each the streamer's window, 1 MiB by default; larger only for a window that held one large
// element, itself limited by StreamOptions::max_element_bytes).
// Threads: StreamTraceParallel is called on one thread, which makes every sink call; it starts
// and joins the reading thread.

#include <cstddef>
#include <string>

#include "base/status.h"
#include "importers/common/byte_source.h"
#include "importers/common/trace_streamer.h"
#include "importers/kineto/kineto_event_parser.h"

namespace trainprof::importers::kineto {

// Six: the caller's thread writes each store batch itself (an eighth of the file's text, about
// 6 ms of encoding for an 87 MB trace), and the reading thread parses on meanwhile, about 4
// windows' worth, instead of waiting for room.
inline constexpr size_t kMaxQueuedWindows = 6;
// While the sink says it is busy with something else (ReadAheadScope), the reading thread may
// run this many windows ahead instead: the 2024+ traces whose baseTimeNanoseconds comes after
// the events have their end inflated once more before the first event is stored (about 12 ms
// for an 87 MB trace), and the reading thread keeps parsing meanwhile.
inline constexpr size_t kMaxReadAheadWindows = 16;
// The first window (StreamOptions::first_window_bytes) unless the options set one: the
// caller's thread starts storing once this much is parsed, instead of a whole window.
inline constexpr size_t kFirstWindowBytes = 64 << 10;

class ParsedEventSink : public TraceSink {
 public:
  // One element of the events array that the fast path (ParseEventInPlace) took; e.args is
  // minified. A non-ok status stops the stream.
  virtual Status OnParsedEvent(const RawEvent& e) = 0;

  // Set by StreamTraceParallel while it runs (null otherwise): a queue depth to widen.
  class ReadAhead {
   public:
    virtual ~ReadAhead() = default;
    virtual void Widen(bool wide) = 0;
  };
  void set_read_ahead(ReadAhead* read_ahead) { read_ahead_ = read_ahead; }

 protected:
  // Lets the reading thread run kMaxReadAheadWindows ahead while in scope (no effect when the
  // stream runs on one thread).
  class ReadAheadScope {
   public:
    explicit ReadAheadScope(ParsedEventSink& sink) : r_(sink.read_ahead_) {
      if (r_ != nullptr) r_->Widen(true);
    }
    ~ReadAheadScope() {
      if (r_ != nullptr) r_->Widen(false);
    }
    ReadAheadScope(const ReadAheadScope&) = delete;
    ReadAheadScope& operator=(const ReadAheadScope&) = delete;

   private:
    ReadAhead* r_;
  };

 private:
  ReadAhead* read_ahead_ = nullptr;
};

// A sink's OnEventInPlace on one thread: the element at p (at `offset` in the text) parsed in
// place (its args minified into *args), then given to `take`; what the fast path does not take
// is left to OnEvent.
template <typename Take>
InPlaceResult ParseInPlaceAndTake(const char* p, const char* end, int64_t offset,
                                  const char** element_end, std::string* scratch, std::string* args,
                                  Status* status, const Take& take) {
  RawEvent e;
  args->clear();
  switch (ParseEventInPlace(p, end, &e, scratch, args, element_end)) {
    case InPlace::kOk:
      e.text_end = offset + (*element_end - p);
      *status = take(e);
      return InPlaceResult::kDone;
    case InPlace::kIncomplete:
      return InPlaceResult::kNeedMore;
    case InPlace::kInvalid:
      break;
  }
  return InPlaceResult::kNotHandled;
}

// StreamTrace(source, sink, options) with the reading and tokenizing on a second thread (see
// above). When no thread can be started it streams on this thread instead, with the same
// result.
StatusOr<StreamResult> StreamTraceParallel(ByteSource& source, ParsedEventSink& sink,
                                           const StreamOptions& options = {});

}  // namespace trainprof::importers::kineto
