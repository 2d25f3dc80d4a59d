#include "importers/common/trace_streamer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "importers/common/json_text.h"

namespace trainprof::importers {
namespace {

// A sliding window over the decompressed text. Positions are offsets into the buffer; Refill
// keeps the bytes from `keep_from` on and appends new ones, so spans before keep_from go stale
// (unless the window is stable: then they stay in the retired buffer, handed to the sink).
class Window {
 public:
  Window(ByteSource& src, TraceSink& sink, size_t initial, size_t max_bytes, bool stable,
         size_t first)
      : src_(src),
        sink_(sink),
        initial_(initial),
        max_bytes_(std::max(initial, max_bytes)),
        stable_(stable) {
    // Not zero-filled (a vector's resize was): a small trace touches only the pages it reads
    // into, instead of memset and page faults over the whole first window (1 MiB).
    // Stable windows may start smaller; each refill then doubles them up to `initial`.
    size_ = stable_ && first > 0 && first < initial ? first : initial;
    buf_ = stable_ ? sink_.NewWindow(size_)
                   : TextBuffer{std::unique_ptr<char[]>(new char[initial]), initial};
  }

  const char* data() const { return buf_.data.get(); }
  size_t size() const { return len_; }
  bool eof() const { return eof_; }
  int64_t base_offset() const { return base_; }

  // Drops bytes before `keep_from` (returns the shift applied to positions) and reads more.
  StatusOr<size_t> Refill(size_t keep_from) {
    const bool full = keep_from == 0 && len_ == buf_.capacity;
    if (full && buf_.capacity >= max_bytes_) {
      // One element bigger than the window, and the window at the limit on one element.
      return DataLoss(src_.path() + ": at byte " + std::to_string(base_) +
                      ": one JSON element is larger than " + std::to_string(max_bytes_ >> 20) +
                      " MiB (the limit for one trace event or top-level member); the file is "
                      "damaged or not a trace");
    }
    const size_t keep = len_ - keep_from;
    if (stable_ && len_ == 0) {
      // Nothing read into this window yet (the first refill), so nothing points into it: read
      // into it.
    } else if (stable_) {
      // A fresh window (grown when one element fills the old one, else back to the initial
      // size) with the kept bytes copied; the old one, with the views into it, to the sink.
      size_ = std::min(size_ * 2, initial_);
      const size_t cap = full ? std::min(buf_.capacity * 2, max_bytes_)
                              : std::max(size_, std::min(keep * 2, max_bytes_));
      TextBuffer next = sink_.NewWindow(cap);
      std::memcpy(next.data.get(), buf_.data.get() + keep_from, keep);
      sink_.OnWindowRetired(std::exchange(buf_, std::move(next)));
    } else if (full) {
      // One element bigger than the window: grow it, up to the limit on one element.
      const size_t cap = std::min(buf_.capacity * 2, max_bytes_);
      std::unique_ptr<char[]> grown(new char[cap]);
      std::memcpy(grown.get(), buf_.data.get(), len_);
      buf_ = TextBuffer{std::move(grown), cap};
    } else if (keep_from > 0) {
      std::memmove(buf_.data.get(), buf_.data.get() + keep_from, keep);
    }
    len_ = keep;
    base_ += static_cast<int64_t>(keep_from);
    TP_ASSIGN_OR_RETURN(size_t n, src_.Read(buf_.data.get() + len_, buf_.capacity - len_));
    if (n == 0) eof_ = true;
    len_ += n;
    total_ += static_cast<int64_t>(n);
    return keep_from;
  }
  int64_t total() const { return total_; }

  // Reads the rest of the input and drops it. A gzip stream damaged past the end of the JSON
  // (a corrupt block, a wrong CRC) is an error however much of it the last refill happened to
  // read: the outcome of an import does not depend on its window sizes.
  Status Drain() {
    if (eof_) return OkStatus();
    constexpr size_t kBytes = 64 << 10;
    std::unique_ptr<char[]> rest(new char[kBytes]);
    while (true) {
      TP_ASSIGN_OR_RETURN(size_t n, src_.Read(rest.get(), kBytes));
      if (n == 0) break;
      total_ += static_cast<int64_t>(n);
    }
    eof_ = true;
    return OkStatus();
  }

  // Stable windows: the last window to the sink, after the last element.
  void Retire() {
    if (stable_ && buf_.data) sink_.OnWindowRetired(std::move(buf_));
    buf_ = TextBuffer{};
    len_ = 0;
  }

 private:
  ByteSource& src_;
  TraceSink& sink_;
  size_t initial_;
  size_t size_ = 0;  // of the next stable window, unless one element needs more
  size_t max_bytes_;
  bool stable_;
  TextBuffer buf_;
  size_t len_ = 0;
  int64_t base_ = 0;
  int64_t total_ = 0;
  bool eof_ = false;
};

class Streamer {
 public:
  Streamer(ByteSource& src, TraceSink& sink, const StreamOptions& options)
      : w_(src, sink, options.initial_buffer_bytes, options.max_element_bytes,
           options.stable_windows, options.first_window_bytes),
        src_(src),
        sink_(sink),
        options_(options) {}

  void RetireWindow() { w_.Retire(); }

  StatusOr<StreamResult> Run() {
    TP_RETURN_IF_ERROR(SkipWsRefill());
    if (pos_ >= w_.size()) return DataLoss(src_.path() + ": empty file (no JSON)");
    char c = w_.data()[pos_];
    // A UTF-8 byte order mark is tolerated.
    if (static_cast<unsigned char>(c) == 0xEF && w_.size() - pos_ >= 3) {
      pos_ += 3;
      TP_RETURN_IF_ERROR(SkipWsRefill());
      c = pos_ < w_.size() ? w_.data()[pos_] : '\0';
    }
    if (c == '[') {
      ++pos_;
      TP_RETURN_IF_ERROR(Elements(/*top_level_array=*/true));
    } else if (c == '{') {
      ++pos_;
      TP_RETURN_IF_ERROR(Members());
    } else {
      return DataLoss(Where() + "not a JSON trace: expected '{' or '[' but found " + ShowAt());
    }
    TP_RETURN_IF_ERROR(w_.Drain());
    result_.bytes = w_.total();
    return result_;
  }

 private:
  std::string Where() const {
    return src_.path() + ": at byte " +
           std::to_string(w_.base_offset() + static_cast<int64_t>(pos_)) + ": ";
  }
  // What is at pos_: the byte, or "end of file" when the input has ended there (a NUL byte in
  // the file is shown as the byte it is, not as the end).
  std::string ShowAt() const {
    return pos_ < w_.size() ? Show(w_.data()[pos_]) : std::string("end of file");
  }
  static std::string Show(char c) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "byte 0x%02x", static_cast<unsigned char>(c));
      return buf;
    }
    return std::string("'") + c + "'";
  }

  Status Refill() {
    TP_ASSIGN_OR_RETURN(size_t shift, w_.Refill(pos_));
    pos_ -= shift;
    return OkStatus();
  }

  // Skips whitespace; on return pos_ < size() unless at the end of the input.
  Status SkipWsRefill() {
    while (true) {
      const char* p = json::SkipWs(w_.data() + pos_, w_.data() + w_.size());
      pos_ = static_cast<size_t>(p - w_.data());
      if (pos_ < w_.size() || w_.eof()) return OkStatus();
      TP_RETURN_IF_ERROR(Refill());
    }
  }

  // Scans one value starting at pos_; on success [start, end) is valid until the next Refill.
  Status Value(size_t* start, size_t* end, bool* incomplete_at_eof) {
    *incomplete_at_eof = false;
    while (true) {
      const char* ve = nullptr;
      json::ScanResult r =
          json::FindValueEnd(w_.data() + pos_, w_.data() + w_.size(), w_.eof(), &ve);
      if (r == json::ScanResult::kOk) {
        *start = pos_;
        *end = static_cast<size_t>(ve - w_.data());
        pos_ = *end;
        return OkStatus();
      }
      if (r == json::ScanResult::kIncomplete) {
        TP_RETURN_IF_ERROR(Refill());
        continue;
      }
      if (w_.eof() && pos_ < w_.size()) {
        // Distinguish "cut off" from "garbage": a value that starts well but never ends.
        char c = w_.data()[pos_];
        if (c == '{' || c == '[' || c == '"') {
          *incomplete_at_eof = true;
          return OkStatus();
        }
      }
      return DataLoss(Where() + "invalid JSON value starting with " + ShowAt());
    }
  }

  Status Members() {
    bool first = true;
    while (true) {
      TP_RETURN_IF_ERROR(SkipWsRefill());
      if (pos_ >= w_.size()) {
        return DataLoss(src_.path() + ": JSON ends before the closing '}' (truncated file?)");
      }
      char c = w_.data()[pos_];
      if (c == '}') {
        ++pos_;
        return OkStatus();
      }
      if (!first) {
        if (c != ',') return DataLoss(Where() + "expected ',' or '}' but found " + Show(c));
        ++pos_;
        TP_RETURN_IF_ERROR(SkipWsRefill());
        c = pos_ < w_.size() ? w_.data()[pos_] : '\0';
      }
      first = false;
      if (c != '"') return DataLoss(Where() + "expected a member name but found " + ShowAt());
      size_t ks, ke;
      bool cut;
      TP_RETURN_IF_ERROR(Value(&ks, &ke, &cut));
      if (cut) return DataLoss(src_.path() + ": JSON ends inside a member name (truncated?)");
      std::string key;
      if (!json::DecodeString(std::string_view(w_.data() + ks, ke - ks), &key)) {
        return DataLoss(Where() + "invalid member name");
      }
      TP_RETURN_IF_ERROR(SkipWsRefill());
      if (pos_ >= w_.size() || w_.data()[pos_] != ':') {
        return DataLoss(Where() + "expected ':' after \"" + key + "\"");
      }
      ++pos_;
      TP_RETURN_IF_ERROR(SkipWsRefill());
      if (key == "traceEvents") {
        if (pos_ >= w_.size() || w_.data()[pos_] != '[') {
          return DataLoss(Where() + "\"traceEvents\" is not an array");
        }
        ++pos_;
        result_.saw_trace_events = true;
        TP_RETURN_IF_ERROR(Elements(/*top_level_array=*/false));
        if (result_.truncated_element || result_.unterminated) {
          return DataLoss(src_.path() + ": JSON ends inside \"traceEvents\" after " +
                          std::to_string(result_.events) + " events (truncated file?)");
        }
        continue;
      }
      size_t vs, ve;
      TP_RETURN_IF_ERROR(Value(&vs, &ve, &cut));
      if (cut) {
        return DataLoss(src_.path() + ": JSON ends inside member \"" + key + "\" (truncated?)");
      }
      sink_.set_element_offset(w_.base_offset() + static_cast<int64_t>(vs));
      TP_RETURN_IF_ERROR(sink_.OnTopLevel(key, std::string_view(w_.data() + vs, ve - vs)));
    }
  }

  Status Elements(bool top_level_array) {
    bool first = true;
    while (true) {
      TP_RETURN_IF_ERROR(SkipWsRefill());
      if (pos_ >= w_.size()) {
        if (top_level_array && options_.allow_unterminated_array) {
          result_.unterminated = true;
          return OkStatus();
        }
        if (!top_level_array) {
          result_.unterminated = true;
          return OkStatus();
        }
        return DataLoss(src_.path() + ": JSON ends before the closing ']' after " +
                        std::to_string(result_.events) + " events (truncated file?)");
      }
      char c = w_.data()[pos_];
      if (c == ']') {
        ++pos_;
        return OkStatus();
      }
      if (!first) {
        if (c != ',') return DataLoss(Where() + "expected ',' or ']' but found " + Show(c));
        ++pos_;
        TP_RETURN_IF_ERROR(SkipWsRefill());
        if (pos_ >= w_.size()) continue;  // "[a, b," then EOF: unterminated
        if (w_.data()[pos_] == ']') {     // tolerate a trailing comma
          ++pos_;
          return OkStatus();
        }
      }
      first = false;
      bool stop = false;
      while (true) {
        const char* element_end = nullptr;
        Status status;
        sink_.set_element_offset(w_.base_offset() + static_cast<int64_t>(pos_));
        InPlaceResult r =
            sink_.OnEventInPlace(w_.data() + pos_, w_.data() + w_.size(), &element_end, &status);
        if (r == InPlaceResult::kDone) {
          pos_ = static_cast<size_t>(element_end - w_.data());
          ++result_.events;
          TP_RETURN_IF_ERROR(status);
          break;
        }
        if (r == InPlaceResult::kNeedMore && !w_.eof()) {
          TP_RETURN_IF_ERROR(Refill());
          continue;
        }
        // Not taken, or cut off at the end of the input: the general path decides.
        TP_ASSIGN_OR_RETURN(stop, CutElement(top_level_array));
        break;
      }
      if (stop) return OkStatus();
    }
  }

  // The general path for one element: find its end, then hand its text to OnEvent. True when
  // the input ended inside the element and that is accepted (the array ends there).
  StatusOr<bool> CutElement(bool top_level_array) {
    size_t s, e;
    bool cut;
    TP_RETURN_IF_ERROR(Value(&s, &e, &cut));
    if (cut) {
      result_.truncated_element = true;
      if (top_level_array && options_.allow_unterminated_array) return true;
      if (!top_level_array) return true;
      return DataLoss(src_.path() + ": JSON ends inside an event after " +
                      std::to_string(result_.events) + " events (truncated file?)");
    }
    ++result_.events;
    sink_.set_element_offset(w_.base_offset() + static_cast<int64_t>(s));
    TP_RETURN_IF_ERROR(sink_.OnEvent(std::string_view(w_.data() + s, e - s)));
    return false;
  }

  Window w_;
  size_t pos_ = 0;
  ByteSource& src_;
  TraceSink& sink_;
  StreamOptions options_;
  StreamResult result_;
};

}  // namespace

StatusOr<StreamResult> StreamTrace(ByteSource& source, TraceSink& sink,
                                   const StreamOptions& options) {
  Streamer s(source, sink, options);
  auto result = s.Run();
  s.RetireWindow();  // stable windows: the views of the last one, on success or not
  return result;
}

}  // namespace trainprof::importers
