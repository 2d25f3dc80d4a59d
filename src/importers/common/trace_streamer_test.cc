#include "importers/common/trace_streamer.h"

#include <gtest/gtest.h>

#include "base/files.h"
#include "importers/common/test_util.h"

namespace trainprof::importers {
namespace {

class CollectSink : public TraceSink {
 public:
  Status OnEvent(std::string_view e) override {
    events.emplace_back(e);
    return OkStatus();
  }
  Status OnTopLevel(std::string_view k, std::string_view v) override {
    top.emplace_back(std::string(k) + "=" + std::string(v));
    return OkStatus();
  }
  std::vector<std::string> events, top;
};

StatusOr<StreamResult> Stream(const std::string& path, CollectSink* sink,
                              StreamOptions options = {}) {
  auto src = ByteSource::Open(path);
  if (!src.ok()) return src.status();
  return StreamTrace(**src, *sink, options);
}

TEST(TraceStreamerTest, StreamsObjectFormAcrossTinyWindows) {
  std::string dir = testing::TempDir();
  std::string text = R"({"schemaVersion": 1, "traceEvents": [ {"ph":"X","name":"a\"]}"},
    {"ph":"i"} , {"ph":"X","args":{"k":[1,2,3]}}], "baseTimeNanoseconds": 17})";
  for (bool gz : {false, true}) {
    std::string path = dir + (gz ? "/t.json.gz" : "/t.json");
    gz ? testing::WriteGzip(path, text) : testing::WriteFile(path, text);
    CollectSink sink;
    StreamOptions options;
    options.initial_buffer_bytes = 4;  // forces many refills and window growth
    auto r = Stream(path, &sink, options);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(sink.events.size(), 3u);
    EXPECT_EQ(sink.events[0], R"({"ph":"X","name":"a\"]}"})");
    EXPECT_EQ(sink.events[2], R"({"ph":"X","args":{"k":[1,2,3]}})");
    ASSERT_EQ(sink.top.size(), 2u);
    EXPECT_EQ(sink.top[1], "baseTimeNanoseconds=17");
    EXPECT_TRUE(r->saw_trace_events);
  }
}

// Stable windows from a small first one: each refill doubles the window up to the initial
// size. And every element and top-level value is where element_offset says it is in the text.
TEST(TraceStreamerTest, StableWindowsStartSmallAndElementOffsetsPointIntoTheText) {
  class OffsetSink : public TraceSink {
   public:
    Status OnEvent(std::string_view e) override {
      at.emplace_back(element_offset(), std::string(e));
      return OkStatus();
    }
    Status OnTopLevel(std::string_view k, std::string_view v) override {
      (void)k;
      at.emplace_back(element_offset(), std::string(v));
      if (first_value == nullptr) first_value = v.data();
      return OkStatus();
    }
    TextBuffer NewWindow(size_t capacity) override {
      capacities.push_back(capacity);
      TextBuffer b = TraceSink::NewWindow(capacity);
      if (first_window == nullptr) first_window = b.data.get();
      return b;
    }
    void OnWindowRetired(TextBuffer) override {}
    std::vector<std::pair<int64_t, std::string>> at;
    std::vector<size_t> capacities;
    const char* first_window = nullptr;
    const char* first_value = nullptr;  // of the first top-level member
  };
  std::string text = "{\"schemaVersion\": 1, \"traceEvents\": [";
  for (int i = 0; i < 400; ++i) {
    text += i == 0 ? "\n  " : (i % 3 == 0 ? "," : " ,\n    ");
    text += "{\"ph\": \"X\", \"name\": \"op" + std::to_string(i) +
            "\", \"ts\": " + std::to_string(1000 + i) + "}";
  }
  text += "\n], \"baseTimeNanoseconds\": 17}";
  const std::string path = testing::TempDir() + "/offsets.json";
  testing::WriteFile(path, text);
  auto src = ByteSource::Open(path);
  ASSERT_TRUE(src.ok());
  OffsetSink sink;
  StreamOptions options;
  options.stable_windows = true;
  options.initial_buffer_bytes = 1024;
  options.first_window_bytes = 64;
  auto r = StreamTrace(**src, sink, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(sink.at.size(), 402u);  // two top-level values, 400 events
  for (const auto& [offset, element] : sink.at) {
    ASSERT_LE(offset + static_cast<int64_t>(element.size()), static_cast<int64_t>(text.size()));
    EXPECT_EQ(text.substr(static_cast<size_t>(offset), element.size()), element) << offset;
  }
  EXPECT_EQ(sink.at.back().second, "17");
  // The first window is read into (the first member's value, at byte 18, lies in it), not
  // retired empty.
  ASSERT_NE(sink.first_value, nullptr);
  EXPECT_TRUE(sink.first_value >= sink.first_window && sink.first_value < sink.first_window + 64);
  ASSERT_GE(sink.capacities.size(), 6u);
  const std::vector<size_t> first = {64, 128, 256, 512, 1024, 1024};
  EXPECT_EQ(std::vector<size_t>(sink.capacities.begin(), sink.capacities.begin() + 6), first);
}

// A gzip file whose damage lies past the end of the JSON (here its CRC) is an error whatever the
// window's size: the streamer reads the input to its end, so the outcome never depends on how
// much the last refill happened to read (the one-thread and two-thread imports of a fuzzed file
// disagreed on it).
TEST(TraceStreamerTest, DamagePastTheEndOfTheJsonIsAnErrorAtEveryWindowSize) {
  const std::string path = testing::TempDir() + "/crc.json.gz";
  std::string text = R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}]})";
  text += std::string(200 << 10, '\n');  // well past any window's first reads
  testing::WriteGzip(path, text);
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  std::string damaged = *bytes;
  damaged[damaged.size() - 8] ^= 0x01;  // the trailer's CRC-32
  testing::WriteFile(path, damaged);
  for (size_t window : {size_t{16}, size_t{64}, size_t{4096}, size_t{1} << 20}) {
    for (bool stable : {false, true}) {
      CollectSink sink;
      StreamOptions options;
      options.initial_buffer_bytes = window;
      options.stable_windows = stable;
      auto r = Stream(path, &sink, options);
      ASSERT_FALSE(r.ok()) << "window " << window << (stable ? " stable" : "");
      EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().message();
      EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
    }
  }
  testing::WriteGzip(path, text);  // undamaged: read the same way, fine
  CollectSink sink;
  StreamOptions options;
  options.initial_buffer_bytes = 16;
  auto r = Stream(path, &sink, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(sink.events.size(), 1u);
  EXPECT_EQ(r->bytes, static_cast<int64_t>(text.size()));
}

TEST(TraceStreamerTest, BadInputsAreClearErrors) {
  std::string dir = testing::TempDir();
  CollectSink sink;
  testing::WriteFile(dir + "/empty.json", "");
  auto r = Stream(dir + "/empty.json", &sink);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("empty file"), std::string::npos);

  testing::WriteFile(dir + "/garbage.json", "hello");
  r = Stream(dir + "/garbage.json", &sink);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expected '{' or '['"), std::string::npos);

  testing::WriteFile(dir + "/cut.json", R"({"traceEvents": [{"ph":"X"}, {"ph":)");
  r = Stream(dir + "/cut.json", &sink);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();

  testing::WriteFile(dir + "/comma.json", R"({"traceEvents": [{"ph":"X"} {"ph":"X"}]})");
  r = Stream(dir + "/comma.json", &sink);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expected ',' or ']'"), std::string::npos);

  // A gzip file cut in the middle of its deflate stream.
  std::string big = "{\"traceEvents\": [";
  for (int i = 0; i < 20000; ++i) big += "{\"ph\":\"X\",\"ts\":" + std::to_string(i * 7919) + "},";
  big += "{}]}";
  testing::WriteGzip(dir + "/full.json.gz", big);
  std::string gz = ReadAllDecompressed(dir + "/full.json.gz").ok() ? "" : "x";
  ASSERT_EQ(gz, "");
  std::string bytes = *ReadFileToString(dir + "/full.json.gz");
  testing::WriteFile(dir + "/cut.json.gz", bytes.substr(0, bytes.size() / 2));
  r = Stream(dir + "/cut.json.gz", &sink);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated gzip"), std::string::npos) << r.status().message();
}

TEST(TraceStreamerTest, UnterminatedArrayAllowedWhenAsked) {
  std::string dir = testing::TempDir();
  testing::WriteFile(dir + "/h.json", "[\n{\"ph\":\"B\"},\n{\"ph\":\"E\"},\n");
  CollectSink sink;
  StreamOptions options;
  options.allow_unterminated_array = true;
  auto r = Stream(dir + "/h.json", &sink, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(sink.events.size(), 2u);
  EXPECT_TRUE(r->unterminated);
  CollectSink strict;
  EXPECT_FALSE(Stream(dir + "/h.json", &strict).ok());
}

}  // namespace
}  // namespace trainprof::importers
