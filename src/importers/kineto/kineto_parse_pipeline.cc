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

// One element of the stream as the reading thread saw it.
struct Item {
  enum class Kind : uint8_t { kParsed, kText, kTopLevel };
  Kind kind = Kind::kParsed;
  RawEvent event;  // kParsed; args (and a name with escapes) live in the batch's arena
  size_t args_at = 0, args_size = 0;
  size_t name_at = 0, name_size = 0;
  bool name_in_arena = false;
  std::string_view text;  // kText: the element; kTopLevel: the member's value
  size_t key = 0;         // kTopLevel: its name, in Batch::keys (Item stays trivial to drop)
};

static_assert(std::is_trivially_destructible_v<Item>);

// The elements of one window, with the window their views point into.
struct Batch {
  TextBuffer window;
  std::vector<Item> items;
  std::string arena;  // minified args and unescaped names, appended element after element
  std::vector<std::string> keys;  // top-level member names

  // Points the parsed events' args and names into the arena, which no longer grows.
  void Seal() {
    for (Item& it : items) {
      if (it.kind != Item::Kind::kParsed) continue;
      if (it.args_size > 0)
        it.event.args = std::string_view(arena).substr(it.args_at, it.args_size);
      if (it.name_in_arena)
        it.event.name = std::string_view(arena).substr(it.name_at, it.name_size);
    }
  }
  void Clear() {
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
      : channel_(channel), window_bytes_(window_bytes), batch_(channel.TakeBatch()) {}

  InPlaceResult OnEventInPlace(const char* p, const char* end, const char** element_end,
                               Status* status) override {
    std::string& arena = batch_->arena;
    const size_t mark = arena.size();
    // Parsed straight into its item (no copy of the event): dropped again when not taken.
    Item& it = NewItem(Item::Kind::kParsed);
    switch (ParseEventInPlace(p, end, &it.event, &scratch_, &arena, element_end)) {
      case InPlace::kOk:
        break;
      case InPlace::kIncomplete:
        batch_->items.pop_back();
        arena.resize(mark);
        return InPlaceResult::kNeedMore;
      case InPlace::kInvalid:
        batch_->items.pop_back();
        arena.resize(mark);
        return InPlaceResult::kNotHandled;
    }
    if (++since_check_ >= 1024) {  // the caller refused an element: stop reading soon
      since_check_ = 0;
      if (channel_.cancelled()) *status = Stopped();
    }
    const RawEvent& e = it.event;
    if (!e.args.empty()) {
      it.args_at = static_cast<size_t>(e.args.data() - arena.data());
      it.args_size = e.args.size();
    }
    // A name with escapes was decoded into scratch_, which the next one overwrites.
    if (!e.name.empty() && (e.name.data() < p || e.name.data() >= *element_end)) {
      it.name_in_arena = true;
      it.name_at = arena.size();
      it.name_size = e.name.size();
      arena.append(e.name);
    }
    return InPlaceResult::kDone;
  }

  Status OnEvent(std::string_view text) override {
    NewItem(Item::Kind::kText).text = text;
    return channel_.cancelled() ? Stopped() : OkStatus();
  }

  Status OnTopLevel(std::string_view key, std::string_view value) override {
    Item& it = NewItem(Item::Kind::kTopLevel);
    it.key = batch_->keys.size();
    batch_->keys.emplace_back(key);
    it.text = value;
    return OkStatus();
  }

  TextBuffer NewWindow(size_t capacity) override { return channel_.TakeWindow(capacity); }

  void OnWindowRetired(TextBuffer window) override {
    if (batch_->items.empty()) {  // nothing points into it (a window grown for one element)
      batch_->window = std::move(window);
      channel_.Recycle(std::move(batch_), window_bytes_);
    } else {
      batch_->window = std::move(window);
      batch_->Seal();
      if (!channel_.Push(std::move(batch_))) {
        // The caller stopped: nothing more is read from this batch.
      }
    }
    batch_ = channel_.TakeBatch();
  }

 private:
  Item& NewItem(Item::Kind kind) {
    Item& it = batch_->items.emplace_back();
    it.kind = kind;
    return it;
  }

  Channel& channel_;
  size_t window_bytes_;
  std::unique_ptr<Batch> batch_;
  std::string scratch_;
  int since_check_ = 0;
};

// The one-thread fallback: the same parse, on the caller's thread.
class SerialAdapter : public TraceSink {
 public:
  explicit SerialAdapter(ParsedEventSink& sink) : sink_(sink) {}
  InPlaceResult OnEventInPlace(const char* p, const char* end, const char** element_end,
                               Status* status) override {
    return ParseInPlaceAndTake(p, end, element_end, &scratch_, &args_, status,
                               [&](const RawEvent& e) { return sink_.OnParsedEvent(e); });
  }
  Status OnEvent(std::string_view text) override { return sink_.OnEvent(text); }
  Status OnTopLevel(std::string_view key, std::string_view value) override {
    return sink_.OnTopLevel(key, value);
  }

 private:
  ParsedEventSink& sink_;
  std::string scratch_, args_;
};

Status Dispatch(const Batch& b, const Item& it, ParsedEventSink& sink) {
  switch (it.kind) {
    case Item::Kind::kParsed:
      return sink.OnParsedEvent(it.event);
    case Item::Kind::kText:
      return sink.OnEvent(it.text);
    case Item::Kind::kTopLevel:
      return sink.OnTopLevel(b.keys[it.key], it.text);
  }
  return OkStatus();
}

}  // namespace

StatusOr<StreamResult> StreamTraceParallel(ByteSource& source, ParsedEventSink& sink,
                                           const StreamOptions& options) {
  StreamOptions stable = options;
  stable.stable_windows = true;
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
  while (std::unique_ptr<Batch> batch = channel.Pop()) {
    if (refused.ok()) {
      for (const Item& it : batch->items) {
        refused = Dispatch(*batch, it, sink);
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
