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
