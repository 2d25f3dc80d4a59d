#include "importers/kineto/kineto_event_parser.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "importers/common/byte_source.h"
#include "importers/common/json_text.h"
#include "importers/common/test_util.h"
#include "importers/common/trace_streamer.h"

namespace trainprof::importers::kineto {
namespace {

// What the general path makes of one element: ParseRawEvent, then the args minified.
struct Parsed {
  bool ok = false;
  RawEvent e;
  std::string name, args;
};

Parsed General(std::string_view text) {
  Parsed p;
  std::string scratch;
  p.ok = ParseRawEvent(text, &p.e, &scratch);
  p.name = std::string(p.e.name);
  if (!p.e.args.empty()) json::AppendMinified(p.e.args, &p.args);
  return p;
}

// Compares the fast path's result for `text` (followed by `after`, as in a stream) with the
// general path's. Returns the fast path's verdict.
InPlace CheckAgainstGeneral(const std::string& text, const std::string& after = ",\n") {
  const std::string buffer = text + after;
  RawEvent e;
  std::string scratch, args;
  const char* end = nullptr;
  InPlace r =
      ParseEventInPlace(buffer.data(), buffer.data() + buffer.size(), &e, &scratch, &args, &end);
  if (r != InPlace::kOk) return r;
  Parsed g = General(text);
  EXPECT_TRUE(g.ok) << "the fast path took an element the general path refuses: " << text;
  EXPECT_EQ(end, buffer.data() + text.size()) << text;
  EXPECT_EQ(e.ph, g.e.ph) << text;
  EXPECT_EQ(std::string(e.name), g.name) << text;
  EXPECT_EQ(e.has_name, g.e.has_name) << text;
  EXPECT_EQ(e.cat, g.e.cat) << text;
  EXPECT_EQ(e.pid, g.e.pid) << text;
  EXPECT_EQ(e.tid, g.e.tid) << text;
  EXPECT_EQ(e.ts, g.e.ts) << text;
  EXPECT_EQ(e.dur, g.e.dur) << text;
  EXPECT_EQ(e.id, g.e.id) << text;
  EXPECT_EQ(e.s, g.e.s) << text;
  EXPECT_EQ(e.bp, g.e.bp) << text;
  EXPECT_EQ(std::string(e.args), g.args) << text;
  return r;
}

// Every element of a trace file, as text, by the streamer's general path.
class Collect : public TraceSink {
 public:
  Status OnEvent(std::string_view text) override {
    texts.emplace_back(text);
    return OkStatus();
  }
  std::vector<std::string> texts;
};

std::vector<std::string> Elements(const std::string& rel) {
  auto src = ByteSource::Open(testing::SharedData(rel));
  EXPECT_TRUE(src.ok()) << rel;
  if (!src.ok()) return {};
  Collect c;
  auto r = StreamTrace(**src, c);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return c.texts;
}

TEST(KinetoEventParserTest, FastPathAgreesWithTheGeneralPathOnRealTraces) {
  // One trace of each generation: 2021 integer µs with pretty-printed args, 2024+ decimal µs,
  // NCCL collectives' args, AMD.
  for (const std::string rel :
       {"traces/kineto/tb_plugin/samples/resnet50_num_workers_0/"
        "worker0.1623143566756.pt.trace.json.gz",
        "traces/HolisticTraceAnalysis/tests/data/ns_resolution_trace/"
        "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
        "traces/HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz",
        "traces/HolisticTraceAnalysis/tests/data/amd_trace/"
        "mi250_minitoy_train_ROCm6_2_kineto.json.gz"}) {
    std::vector<std::string> texts = Elements(rel);
    ASSERT_GT(texts.size(), 100u) << rel;
    size_t fast = 0;
    for (const std::string& t : texts) fast += CheckAgainstGeneral(t) == InPlace::kOk;
    // The fast path is the path: (nearly) every real event goes through it.
    EXPECT_GE(fast * 1000, texts.size() * 999) << rel << ": " << fast << " of " << texts.size();
  }
}

TEST(KinetoEventParserTest, EveryPrefixNeedsMoreOrIsRefused) {
  const std::string text =
      R"j({"ph": "X", "cat": "kernel", "name": "void k<\"a\">(int)", "pid": 0, "tid": "stream 7",)j"
      R"j( "ts": 1623143093496.523, "dur": 21, "args": {"grid": [1, 2, 3], "s": "x } ]",)j"
      R"j( "n": null, "t": true}})j";
  ASSERT_EQ(CheckAgainstGeneral(text), InPlace::kOk);
  for (size_t n = 0; n < text.size(); ++n) {
    std::string prefix = text.substr(0, n);
    RawEvent e;
    std::string scratch, args;
    const char* end = nullptr;
    InPlace r =
        ParseEventInPlace(prefix.data(), prefix.data() + prefix.size(), &e, &scratch, &args, &end);
    EXPECT_NE(r, InPlace::kOk) << "prefix of " << n << " bytes";
  }
}

TEST(KinetoEventParserTest, UnusualElementsAreLeftToTheGeneralPath) {
  // Each is refused by the fast path (and the general path then decides), or taken with the
  // general path's result.
  const std::vector<std::string> odd = {
      R"({})",                                              // no ph
      R"({"name": "x", "ts": 1})",                          // no ph
      R"({"p\u0068": "X", "ts": 1, "dur": 1})",             // escaped key
      R"({"ph": "XX", "ts": 1})",                           // ph of two characters
      R"({"ph": 7, "ts": 1})",                              // ph not a string
      R"({"ph": "X" "ts": 1})",                             // missing comma
      R"({"ph": "X", "ts": ]})",                            // not a value
      R"({"ph": "X", "ts": 1,})",                           // trailing comma
      R"({"ph": "X", "name": "a\nb", "ts": 1, "dur": 2})",  // escaped name: decoded
      R"({"ph": "X", "ts": 1, "dur": 2, "args": 5})",       // scalar args
      R"({"ph": "X", "ts": 1, "dur": 2, "args": "text"})",
      R"({"ph": "X", "args": {"a": 1}, "ts": 1, "args": { "b" : [ 2 , 3 ] }})",  // duplicate
      R"({"ph": "X", "ts": 1, "dur": 2, "args": { }})",
      R"({"ph":"i","ts":1,"s":"g","cat":7})",  // non-string cat: "?"
      R"( {"ph": "X"})",                       // not at '{'
  };
  for (const std::string& t : odd) CheckAgainstGeneral(t);
  EXPECT_EQ(CheckAgainstGeneral(R"({"ph": "X", "name": "a\nb", "ts": 1, "dur": 2})"), InPlace::kOk);
  EXPECT_EQ(CheckAgainstGeneral(R"({"p\u0068": "X", "ts": 1})"), InPlace::kInvalid);
  EXPECT_EQ(CheckAgainstGeneral(R"({})"), InPlace::kInvalid);
}

TEST(KinetoEventParserTest, ArgsAreMinifiedOutsideStringsOnly) {
  const std::string text =
      "{\"ph\": \"X\", \"args\": {\n  \"Call stack\": \"a.py(1): f; b.py(2): g\",\n"
      "  \"Input Dims\": [[1, 2], [ ]],\t\"x\": \" { \\\" } \"\n}}";
  RawEvent e;
  std::string scratch, args;
  const char* end = nullptr;
  ASSERT_EQ(ParseEventInPlace(text.data(), text.data() + text.size(), &e, &scratch, &args, &end),
            InPlace::kOk);
  EXPECT_EQ(std::string(e.args),
            R"({"Call stack":"a.py(1): f; b.py(2): g","Input Dims":[[1,2],[]],"x":" { \" } "})");
}

// Generated events whose args hold every kind of byte the args minifier stops at or passes:
// whitespace runs of every length, nested brackets, strings with escaped quotes, brackets and
// backslashes, control and high bytes. The fast path agrees with the general one (ParseRawEvent
// and json::AppendMinified, written apart) on each.
TEST(KinetoEventParserTest, GeneratedArgsAgreeWithTheGeneralPath) {
  std::mt19937 rng(20261204);
  auto ws = [&] {
    std::string s;
    for (size_t k = rng() % 4 == 0 ? rng() % 40 : rng() % 3; k > 0; --k) s += " \n\r\t"[rng() % 4];
    return s;
  };
  auto str = [&] {
    std::string s = "\"";
    for (size_t k = rng() % 30; k > 0; --k) {
      switch (rng() % 6) {
        case 0:
          s += "\\\"";
          break;
        case 1:
          s += "\\\\";
          break;
        case 2:
          s += "{[ ]}";
          break;
        case 3:
          s += "\x01\x1f\x7f\xc3\xa9";
          break;
        default:
          s += "word ";
      }
    }
    return s + "\"";
  };
  std::function<std::string(int)> value = [&](int depth) -> std::string {
    switch (depth < 4 ? rng() % 5 : rng() % 3) {
      case 0:
        return str();
      case 1:
        return std::to_string(static_cast<int64_t>(rng()) - 1000000) + "." +
               std::to_string(rng() % 1000);
      case 2:
        return rng() % 2 ? "true" : "null";
      case 3: {
        std::string a = "[" + ws();
        for (size_t k = rng() % 5; k > 0; --k)
          a += value(depth + 1) + ws() + (k > 1 ? "," + ws() : "");
        return a + "]";
      }
      default: {
        std::string o = "{" + ws();
        for (size_t k = rng() % 6; k > 0; --k)
          o += str() + ws() + ":" + ws() + value(depth + 1) + ws() + (k > 1 ? "," + ws() : "");
        return o + "}";
      }
    }
  };
  int objects = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string args = "{" + ws();
    for (size_t k = 1 + rng() % 8; k > 0; --k)
      args += str() + ws() + ":" + ws() + value(1) + ws() + (k > 1 ? "," + ws() : "");
    args += ws() + "}";
    const std::string text = "{\"ph\": \"X\"," + ws() + "\"ts\": " + std::to_string(rng()) + "." +
                             std::to_string(rng() % 1000) + ws() + ",\"args\":" + ws() + args +
                             ws() + "}";
    EXPECT_EQ(CheckAgainstGeneral(text), InPlace::kOk) << text;
    ++objects;
  }
  EXPECT_EQ(objects, 3000);
}

}  // namespace
}  // namespace trainprof::importers::kineto
