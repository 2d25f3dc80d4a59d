#include "importers/common/json_minify.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "importers/common/json_text.h"

namespace trainprof::importers::json {
namespace {

// The oracle: where json::FindValueEnd says the value ends, and json::AppendMinified's bytes of
// it (the general path of the import, written apart from MinifyValue).
bool Oracle(const std::string& text, std::string* out, size_t* value_end) {
  const char* ve = nullptr;
  if (FindValueEnd(text.data(), text.data() + text.size(), false, &ve) != ScanResult::kOk) {
    return false;
  }
  *value_end = static_cast<size_t>(ve - text.data());
  AppendMinified(std::string_view(text.data(), *value_end), out);
  return true;
}

// A random JSON object or array of the shapes Kineto writes (and some it does not): strings
// holding brackets, quotes and backslashes, runs of whitespace, long strings, nesting.
class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}

  std::string Value(int depth) {
    std::string s;
    const bool object = Pick(2) == 0;
    s += object ? '{' : '[';
    const int n = static_cast<int>(Pick(depth > 4 ? 2 : 6));
    for (int i = 0; i < n; ++i) {
      if (i > 0) s += ',';
      s += Ws();
      if (object) {
        s += String();
        s += Ws() + ":" + Ws();
      }
      switch (depth < 6 ? Pick(5) : Pick(3)) {
        case 0:
          s += String();
          break;
        case 1:
          s += std::to_string(static_cast<int64_t>(rng_()) - (int64_t{1} << 31));
          break;
        case 2:
          s += Pick(2) ? "true" : "null";
          break;
        default:
          s += Value(depth + 1);
          break;
      }
      s += Ws();
    }
    s += object ? '}' : ']';
    return s;
  }

 private:
  uint32_t Pick(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }
  std::string Ws() {
    static const char kWs[] = {' ', '\n', '\r', '\t'};
    std::string s;
    const uint32_t kind = Pick(4);
    const uint32_t n = kind == 0 ? 0 : kind == 1 ? 1 : kind == 2 ? Pick(8) : Pick(80);
    for (uint32_t i = 0; i < n; ++i) s += kWs[Pick(kind == 3 ? 2 : 4)];
    return s;
  }
  std::string String() {
    static const char kChars[] = "abcXYZ019 {}[],:\t\xc3\xa9";
    std::string s = "\"";
    const uint32_t kind = Pick(10);
    const uint32_t n = kind == 0 ? 0 : kind < 7 ? Pick(12) : kind < 9 ? Pick(200) : Pick(9000);
    const bool escapes = Pick(8) == 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (escapes && Pick(6) == 0) {
        s += Pick(2) ? "\\\"" : "\\\\";
      } else {
        s += kChars[Pick(sizeof kChars - 1)];
      }
    }
    return s + "\"";
  }

  std::mt19937 rng_;
};

TEST(JsonMinifyTest, TheVectorPathIsTakenWhereTheCpuHasIt) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  EXPECT_EQ(MinifyValueIsVectorized(),
            __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
                __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi"));
#else
  EXPECT_FALSE(MinifyValueIsVectorized());
#endif
}

// Every generated value, followed by more text (what follows an args object in a trace, with
// or without a backslash), and cut short at several points: both paths agree with the oracle on
// whether it is complete, where it ends and its minified bytes.
TEST(JsonMinifyTest, BothPathsGiveTheOraclesBytesAndEnd) {
  Gen gen(20261205);
  const std::string tails[] = {"", "\n  },\n  {\"ph\": \"X\", \"name\": \"a\\\\b\"}", "}]}",
                               std::string(70, ' ') + "\\"};
  int vector_blocks = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string value = gen.Value(0);
    const std::string& tail = tails[i % 4];
    const std::string text = value + tail;
    std::string want;
    size_t want_end = 0;
    ASSERT_TRUE(Oracle(text, &want, &want_end)) << text;
    ASSERT_EQ(want_end, value.size());
    if (text.size() >= 64) ++vector_blocks;
    for (bool scalar : {false, true}) {
      std::string got = "prefix";  // appended after what *out holds
      const char* end = nullptr;
      const bool ok = scalar ? MinifyValueScalar(text.data(), text.data() + text.size(), &got, &end)
                             : MinifyValue(text.data(), text.data() + text.size(), &got, &end);
      ASSERT_TRUE(ok) << (scalar ? "scalar " : "vector ") << text;
      EXPECT_EQ(got, "prefix" + want) << (scalar ? "scalar " : "vector ") << text;
      EXPECT_EQ(static_cast<size_t>(end - text.data()), want_end) << text;
    }
    // Cut inside the value: incomplete on both paths (the text before the cut is all there is).
    for (size_t cut : {value.size() - 1, value.size() / 2, value.size() * 7 / 8}) {
      if (cut == 0) continue;
      const std::string part = text.substr(0, cut);
      std::string got;
      const char* end = nullptr;
      EXPECT_FALSE(MinifyValue(part.data(), part.data() + part.size(), &got, &end)) << part;
      EXPECT_FALSE(MinifyValueScalar(part.data(), part.data() + part.size(), &got, &end)) << part;
    }
  }
  EXPECT_GT(vector_blocks, 1000);  // most values are long enough for the 64-byte path
}

// A Kineto args object as the profiler writes it (indented, after a line break), at every
// offset from the end of the text: the 64-byte blocks hand over to the scalar loop at each
// point, inside strings and between tokens.
TEST(JsonMinifyTest, EveryHandOverToTheScalarTailGivesTheSameBytes) {
  const std::string args =
      "{\n      \"External id\": 33283,\"Record function id\": 0, \"Concrete Inputs\": [\"\", "
      "\"0\"], \"Input type\": [\"float\", \"Scalar\"], \"Input Dims\": [[], []], \"Ev Idx\": "
      "2, \"name\": \"a {quoted} [string] with   spaces\"\n    }";
  std::string want;
  size_t want_end = 0;
  ASSERT_TRUE(Oracle(args, &want, &want_end));
  for (size_t pad = 0; pad < 200; ++pad) {
    const std::string text = args + std::string(pad, ' ');
    std::string got;
    const char* end = nullptr;
    ASSERT_TRUE(MinifyValue(text.data(), text.data() + text.size(), &got, &end)) << pad;
    EXPECT_EQ(got, want) << pad;
    EXPECT_EQ(static_cast<size_t>(end - text.data()), args.size()) << pad;
  }
}

}  // namespace
}  // namespace trainprof::importers::json
