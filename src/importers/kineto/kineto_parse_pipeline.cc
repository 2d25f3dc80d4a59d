#include "importers/kineto/kineto_parse_pipeline.h"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace trainprof::importers::kineto {
namespace {

// A view into the batch's window (offset from its anchor) or, with kInArena, into its arena:
// 8 bytes instead of a string_view's 16, and valid while the arena still grows.
struct PackedView {
  static constexpr uint32_t kInArena = uint32_t{1} << 31;
  uint32_t off = 0;
  uint32_t len = 0;  // | kInArena
};

// One element of the stream as the reading thread saw it: about a third of a RawEvent's size,
// since every event is written by the reading thread and read again by the importer's, on
// another core.
struct Item {
  enum class Kind : uint8_t { kParsed, kText, kTopLevel };
  enum Field : uint8_t { kName, kCat, kArgs, kS, kBp, kPid, kTid, kTs, kDur, kId, kFields };
  Kind kind = Kind::kParsed;
  char ph = 0;
  bool has_name = false;
  // kTopLevel: its name, in Batch::keys (Item stays trivial to drop); kParsed and kText: where
  // the element ends in the text, from Batch::text_base.
  uint32_t key = 0;
  // kParsed: the RawEvent's views; kText: the element in [0]; kTopLevel: the value in [0].
  PackedView view[kFields];
};

static_assert(std::is_trivially_destructible_v<Item>);
static_assert(sizeof(Item) <= 88);
static_assert((size_t{1} << 20) + kMaxTraceElementBytes < PackedView::kInArena);  // the defaults

// The elements of one window, with the window their views point into.
struct Batch {
  TextBuffer window;
  const char* anchor = nullptr;  // the window's first element: window views are offsets from it
  int64_t text_base = 0;         // where the anchor is in the text
  std::vector<Item> items;
  std::string arena;              // minified args, unescaped names, anything not in the window
  std::vector<std::string> keys;  // top-level member names

  std::string_view View(PackedView v) const {
    if (v.len & PackedView::kInArena) {
      return std::string_view(arena).substr(v.off, v.len & ~PackedView::kInArena);
    }
    return std::string_view(anchor + v.off, v.len);
  }
  void Unpack(const Item& it, RawEvent* e) const {
    e->ph = it.ph;
    e->has_name = it.has_name;
    e->text_end = text_base + it.key;
    e->name = View(it.view[Item::kName]);
    e->cat = View(it.view[Item::kCat]);
    e->args = View(it.view[Item::kArgs]);
    e->s = View(it.view[Item::kS]);
    e->bp = View(it.view[Item::kBp]);
    e->pid = View(it.view[Item::kPid]);
    e->tid = View(it.view[Item::kTid]);
    e->ts = View(it.view[Item::kTs]);
    e->dur = View(it.view[Item::kDur]);
    e->id = View(it.view[Item::kId]);
  }
  void Clear() {
    anchor = nullptr;
    text_base = 0;
    items.clear();
    arena.clear();
    keys.clear();
  }
};

// What the two threads share: batches ready for the caller, and the recycled ones.
class Channel : public ParsedEventSink::ReadAhead {
 public:
  void Widen(bool wide) override {
    std::lock_guard<std::mutex> lock(mu_);
    limit_ = wide ? kMaxReadAheadWindows : kMaxQueuedWindows;
    space_.notify_all();
  }

  // Reading thread: waits for room (false when the caller stopped: drop the batch).
  bool Push(std::unique_ptr<Batch> b) {
    std::unique_lock<std::mutex> lock(mu_);
    space_.wait(lock, [&] { return cancelled_ || ready_.size() < limit_; });
    if (cancelled_) return false;
    ready_.push_back(std::move(b));
    ready_cv_.notify_one();
    return true;
  }
  // Caller: the next batch, or null once the reading thread is done and all are taken.
  std::unique_ptr<Batch> Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    ready_cv_.wait(lock, [&] { return !ready_.empty() || done_; });
    if (ready_.empty()) return nullptr;
    std::unique_ptr<Batch> b = std::move(ready_.front());
    ready_.pop_front();
    space_.notify_one();
    return b;
  }
  void Recycle(std::unique_ptr<Batch> b, size_t window_bytes) {
    b->Clear();
    std::lock_guard<std::mutex> lock(mu_);
    // Only windows of the usual size are kept: one grown for a large element is freed.
    if (b->window.data && b->window.capacity == window_bytes &&
        free_windows_.size() < kMaxQueuedWindows + 2) {
      free_windows_.push_back(std::move(b->window));
    }
    b->window = TextBuffer{};
    if (free_batches_.size() < 4) free_batches_.push_back(std::move(b));
  }
  TextBuffer TakeWindow(size_t capacity) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_windows_.size(); ++i) {
        if (free_windows_[i].capacity >= capacity) {
          TextBuffer w = std::move(free_windows_[i]);
          free_windows_.erase(free_windows_.begin() + static_cast<std::ptrdiff_t>(i));
          return w;
        }
      }
    }
    return TextBuffer{std::unique_ptr<char[]>(new char[capacity]), capacity};
  }
  std::unique_ptr<Batch> TakeBatch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_batches_.empty()) {
        std::unique_ptr<Batch> b = std::move(free_batches_.back());
        free_batches_.pop_back();
        return b;
      }
    }
    return std::make_unique<Batch>();
  }
  void Finish(StatusOr<StreamResult> result) {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(result);
    done_ = true;
    ready_cv_.notify_all();
  }
  void Cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    space_.notify_all();
  }
  bool cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  StatusOr<StreamResult> result() {
    std::lock_guard<std::mutex> lock(mu_);
    return result_;
  }

 private:
  std::mutex mu_;
  std::condition_variable ready_cv_, space_;
  std::deque<std::unique_ptr<Batch>> ready_;
  std::vector<std::unique_ptr<Batch>> free_batches_;
  std::vector<TextBuffer> free_windows_;
  size_t limit_ = kMaxQueuedWindows;
  bool done_ = false;
  bool cancelled_ = false;
  StatusOr<StreamResult> result_ = Internal("the reading thread did not finish");
};

Status Stopped() { return FailedPrecondition("stopped: the importer refused an earlier element"); }

// The reading thread's sink: records each element into the current window's batch.
class Recorder : public TraceSink {
 public:
  Recorder(Channel& channel, size_t window_bytes)
      : channel_(channel), window_bytes_(window_bytes), batch_(NextBatch()) {}

  InPlaceResult OnEventInPlace(const char* p, const char* end, const char** element_end,
                               Status* status) override {
    std::string& arena = batch_->arena;
    const size_t mark = arena.size();
    switch (ParseEventInPlace(p, end, &event_, &scratch_, &arena, element_end)) {
      case InPlace::kOk:
        break;
      case InPlace::kIncomplete:
        arena.resize(mark);
        return InPlaceResult::kNeedMore;
      case InPlace::kInvalid:
        arena.resize(mark);
        return InPlaceResult::kNotHandled;
    }
    if (++since_check_ >= 1024) {  // the caller refused an element: stop reading soon
      since_check_ = 0;
      if (channel_.cancelled()) *status = Stopped();
    }
    Anchor(p);
    Item& it = NewItem(Item::Kind::kParsed);
    const RawEvent& e = event_;
    it.ph = e.ph;
    it.has_name = e.has_name;
    it.key = static_cast<uint32_t>(*element_end - batch_->anchor);
    // The args first: they are in the arena, which the others may still grow.
    it.view[Item::kArgs] = Pack(e.args, *element_end);
    it.view[Item::kName] = Pack(e.name, *element_end);  // scratch_ when it had escapes
    it.view[Item::kCat] = Pack(e.cat, *element_end);
    it.view[Item::kS] = Pack(e.s, *element_end);
    it.view[Item::kBp] = Pack(e.bp, *element_end);
    it.view[Item::kPid] = Pack(e.pid, *element_end);
    it.view[Item::kTid] = Pack(e.tid, *element_end);
    it.view[Item::kTs] = Pack(e.ts, *element_end);
    it.view[Item::kDur] = Pack(e.dur, *element_end);
    it.view[Item::kId] = Pack(e.id, *element_end);
    return InPlaceResult::kDone;
  }

  Status OnEvent(std::string_view text) override {
    Anchor(text.data());
    Item& it = NewItem(Item::Kind::kText);
    it.key = static_cast<uint32_t>(text.data() + text.size() - batch_->anchor);
    it.view[0] = Pack(text, text.data() + text.size());
    return channel_.cancelled() ? Stopped() : OkStatus();
  }

  Status OnTopLevel(std::string_view key, std::string_view value) override {
    Anchor(value.data());
    Item& it = NewItem(Item::Kind::kTopLevel);
    it.key = static_cast<uint32_t>(batch_->keys.size());
    batch_->keys.emplace_back(key);
    it.view[0] = Pack(value, value.data() + value.size());
    return OkStatus();
  }

  TextBuffer NewWindow(size_t capacity) override { return channel_.TakeWindow(capacity); }

  void OnWindowRetired(TextBuffer window) override {
    if (batch_->items.empty()) {  // nothing points into it (a window grown for one element)
      batch_->window = std::move(window);
      channel_.Recycle(std::move(batch_), window_bytes_);
    } else {
      batch_->window = std::move(window);
      if (!channel_.Push(std::move(batch_))) {
        // The caller stopped: nothing more is read from this batch.
      }
    }
    batch_ = NextBatch();
  }

 private:
  // A recycled batch, or a new one with room for a window of events of 128 bytes each (a
  // trace's are 150 to 500): its items grow rarely, each growth a copy and fresh pages.
  std::unique_ptr<Batch> NextBatch() {
    std::unique_ptr<Batch> b = channel_.TakeBatch();
    if (b->items.capacity() == 0) b->items.reserve(window_bytes_ / 128);
    return b;
  }

  // The batch's first element (at element_offset() in the text) anchors its views.
  void Anchor(const char* element) {
    if (batch_->anchor == nullptr) {
      batch_->anchor = element;
      batch_->text_base = element_offset();
    }
  }

  Item& NewItem(Item::Kind kind) {
    Item& it = batch_->items.emplace_back();
    it.kind = kind;
    return it;
  }

  // `v` as the batch keeps it: an offset into the window when it lies between the batch's
  // anchor and `window_end` (the element's end), else copied into the arena (a name decoded
  // into scratch_, a default like the "?" category) unless it is there already (the args).
  PackedView Pack(std::string_view v, const char* window_end) {
    PackedView out;
    if (v.empty()) return out;
    const char* anchor = batch_->anchor;
    std::string& arena = batch_->arena;
    if (v.data() >= anchor && v.data() + v.size() <= window_end) {
      out.off = static_cast<uint32_t>(v.data() - anchor);
      out.len = static_cast<uint32_t>(v.size());
      return out;
    }
    if (!arena.empty() && v.data() >= arena.data() &&
        v.data() + v.size() <= arena.data() + arena.size()) {
      out.off = static_cast<uint32_t>(v.data() - arena.data());
    } else {
      out.off = static_cast<uint32_t>(arena.size());
      arena.append(v);
    }
    out.len = static_cast<uint32_t>(v.size()) | PackedView::kInArena;
    return out;
  }

  Channel& channel_;
  size_t window_bytes_;
  std::unique_ptr<Batch> batch_;
  RawEvent event_;
  std::string scratch_;
  int since_check_ = 0;
};

// The one-thread fallback: the same parse, on the caller's thread.
class SerialAdapter : public TraceSink {
 public:
  explicit SerialAdapter(ParsedEventSink& sink) : sink_(sink) {}
  InPlaceResult OnEventInPlace(const char* p, const char* end, const char** element_end,
                               Status* status) override {
    return ParseInPlaceAndTake(p, end, element_offset(), element_end, &scratch_, &args_, status,
                               [&](const RawEvent& e) { return sink_.OnParsedEvent(e); });
  }
  Status OnEvent(std::string_view text) override {
    sink_.set_element_offset(element_offset());
    return sink_.OnEvent(text);
  }
  Status OnTopLevel(std::string_view key, std::string_view value) override {
    sink_.set_element_offset(element_offset());
    return sink_.OnTopLevel(key, value);
  }

 private:
  ParsedEventSink& sink_;
  std::string scratch_, args_;
};

Status Dispatch(const Batch& b, const Item& it, ParsedEventSink& sink, RawEvent* event) {
  switch (it.kind) {
    case Item::Kind::kParsed:
      b.Unpack(it, event);
      return sink.OnParsedEvent(*event);
    case Item::Kind::kText: {
      const std::string_view text = b.View(it.view[0]);
      sink.set_element_offset(b.text_base + it.key - static_cast<int64_t>(text.size()));
      return sink.OnEvent(text);
    }
    case Item::Kind::kTopLevel:
      if (!(it.view[0].len & PackedView::kInArena)) {  // a value lies in the window
        sink.set_element_offset(b.text_base + it.view[0].off);
      }
      return sink.OnTopLevel(b.keys[it.key], b.View(it.view[0]));
  }
  return OkStatus();
}

}  // namespace

StatusOr<StreamResult> StreamTraceParallel(ByteSource& source, ParsedEventSink& sink,
                                           const StreamOptions& options) {
  StreamOptions stable = options;
  stable.stable_windows = true;
  // The caller's thread has nothing to do until the first window is parsed: a small one.
  if (stable.first_window_bytes == 0) stable.first_window_bytes = kFirstWindowBytes;
  // Items hold 31-bit offsets into a window and its arena (PackedView): a window, which holds
  // at most one read buffer and one element, must stay below that.
  if (options.initial_buffer_bytes + options.max_element_bytes >= PackedView::kInArena) {
    SerialAdapter adapter(sink);
    return StreamTrace(source, adapter, options);
  }
  Channel channel;
  std::thread reader;
  try {
    reader = std::thread([&source, &channel, stable] {
      Recorder recorder(channel, stable.initial_buffer_bytes);
      channel.Finish(StreamTrace(source, recorder, stable));
    });
  } catch (const std::system_error&) {
    SerialAdapter adapter(sink);  // no second thread here: the same work on this one
    return StreamTrace(source, adapter, options);
  }
  sink.set_read_ahead(&channel);
  Status refused;
  RawEvent event;
  while (std::unique_ptr<Batch> batch = channel.Pop()) {
    if (refused.ok()) {
      for (const Item& it : batch->items) {
        refused = Dispatch(*batch, it, sink, &event);
        if (!refused.ok()) {
          channel.Cancel();
          break;
        }
      }
    }
    channel.Recycle(std::move(batch), stable.initial_buffer_bytes);
  }
  reader.join();
  sink.set_read_ahead(nullptr);
  if (!refused.ok()) return refused;
  return channel.result();
}

}  // namespace trainprof::importers::kineto
