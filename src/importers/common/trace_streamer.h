#pragma once
// Streams a Chrome-trace-shaped JSON file ({"traceEvents": [...], ...} or a bare [...] array)
// element by element from a ByteSource, holding only a window of the text: each event object
// is handed to the sink as a complete text span, each other top-level member as (key, value
// text). A 1 GB trace never becomes one DOM.
// Threads: one streamer per thread; the sink is called on the caller's thread.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "importers/common/byte_source.h"

namespace trainprof::importers {

inline constexpr size_t kMaxTraceElementBytes = size_t{64} << 20;

enum class InPlaceResult {
  kDone,        // the element was taken; *element_end is one past it
  kNeedMore,    // the buffer ends inside the element: the streamer reads more and asks again
  kNotHandled,  // the streamer cuts the element out and calls OnEvent with its text
};

// One window of the decompressed text (stable windows, StreamOptions::stable_windows).
struct TextBuffer {
  std::unique_ptr<char[]> data;
  size_t capacity = 0;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  // Optional fast path, tried first for each element of the events array: parse the element
  // starting at p (the buffer holds [p, end)) where it lies, finding its end in the same pass.
  // Must have no effect unless it returns kDone; a non-ok *status then stops the stream.
  virtual InPlaceResult OnEventInPlace(const char* p, const char* end, const char** element_end,
                                       Status* status) {
    (void)p;
    (void)end;
    (void)element_end;
    (void)status;
    return InPlaceResult::kNotHandled;
  }
  // One element of the events array (normally an object). A non-ok status stops the stream.
  virtual Status OnEvent(std::string_view event_text) = 0;
  // A top-level member other than "traceEvents" (only for the object form).
  virtual Status OnTopLevel(std::string_view key, std::string_view value_text) {
    (void)key;
    (void)value_text;
    return OkStatus();
  }
  // Stable windows only: the streamer is done with `buffer` (every view it handed out into it
  // points before the bytes it kept, which it copied into a new window), and after the last
  // element with the final window. Views into it stay valid for as long as the sink keeps it.
  virtual void OnWindowRetired(TextBuffer buffer) { (void)buffer; }
  // Stable windows only: a window of at least `capacity` bytes (a sink may recycle retired ones).
  virtual TextBuffer NewWindow(size_t capacity) {
    return TextBuffer{std::unique_ptr<char[]>(new char[capacity]), capacity};
  }

  // Where the element handed to OnEventInPlace or OnEvent (or the value to OnTopLevel) starts in
  // the text, in bytes from its start: set by the streamer before each of those calls.
  int64_t element_offset() const { return element_offset_; }
  void set_element_offset(int64_t offset) { element_offset_ = offset; }

 private:
  int64_t element_offset_ = 0;
};

struct StreamOptions {
  // Horovod writes "[" and then events each followed by ",\n", closing the array only at
  // shutdown: accept a file that ends after a complete element.
  bool allow_unterminated_array = false;
  size_t initial_buffer_bytes = 1 << 20;
  // One element (an event, or a top-level member) larger than this stops the stream with an
  // error naming the file and offset: a small gzip file can hold a string of gigabytes, and
  // the window holding it would grow to match (docs/importers.md, "Limits").
  size_t max_element_bytes = kMaxTraceElementBytes;
  // Views handed to the sink stay valid after the call (the window is never moved in place):
  // a refill continues in a fresh window from TraceSink::NewWindow and hands the old one to
  // TraceSink::OnWindowRetired, so a sink can keep the views of a whole window and parse them
  // on another thread (the Kineto importer's pipeline). A window grown for one large element
  // goes back to initial_buffer_bytes at the next refill.
  bool stable_windows = false;
  // Stable windows: the first window's size, when smaller than initial_buffer_bytes (0: the
  // same); each refill doubles it, up to initial_buffer_bytes. The pipeline's second thread
  // waits for the first window to be parsed before it has anything to do; small ones get it
  // going sooner.
  size_t first_window_bytes = 0;
};

struct StreamResult {
  int64_t events = 0;              // elements handed to OnEvent
  int64_t bytes = 0;               // decompressed bytes scanned
  bool unterminated = false;       // the array was not closed (allowed by the options)
  bool truncated_element = false;  // the text ended inside an element (also allowed then)
  bool saw_trace_events = false;   // object form: a "traceEvents" member was present
};

// Streams `source` into `sink`. Errors name the file and the byte offset.
StatusOr<StreamResult> StreamTrace(ByteSource& source, TraceSink& sink,
                                   const StreamOptions& options = {});

}  // namespace trainprof::importers
