#include "importers/common/json_text.h"

#include <gtest/gtest.h>

namespace trainprof::importers::json {
namespace {

TEST(JsonTextTest, MicrosecondsTextBecomesExactNanoseconds) {
  int64_t ns;
  ASSERT_TRUE(ParseMicrosToNs("1623142623529248", &ns));
  EXPECT_EQ(ns, 1623142623529248000);
  // Beyond 2^53: a double would lose the last digits.
  ASSERT_TRUE(ParseMicrosToNs("1712195495519689.123", &ns));
  EXPECT_EQ(ns, 1712195495519689123);
  ASSERT_TRUE(ParseMicrosToNs("2413669096090.1", &ns));
  EXPECT_EQ(ns, 2413669096090100);
  ASSERT_TRUE(ParseMicrosToNs("35.591", &ns));
  EXPECT_EQ(ns, 35591);
  ASSERT_TRUE(ParseMicrosToNs("0.0005", &ns));  // rounds half up at the nanosecond
  EXPECT_EQ(ns, 1);
  ASSERT_TRUE(ParseMicrosToNs("-2", &ns));
  EXPECT_EQ(ns, -2000);
  ASSERT_TRUE(ParseMicrosToNs("1.5e3", &ns));
  EXPECT_EQ(ns, 1500000);
  ASSERT_TRUE(ParseMicrosToNs("\"12\"", &ns));  // quoted numbers occur in the wild
  EXPECT_EQ(ns, 12000);
  EXPECT_FALSE(ParseMicrosToNs("", &ns));
  EXPECT_FALSE(ParseMicrosToNs("abc", &ns));
  EXPECT_FALSE(ParseMicrosToNs("12.", &ns));
  EXPECT_FALSE(ParseMicrosToNs("null", &ns));
  EXPECT_FALSE(ParseMicrosToNs("99999999999999999999", &ns));  // overflow
}

TEST(JsonTextTest, FindValueEndHandlesStringsAndNesting) {
  std::string t = R"({"a": "x}\"y", "b": [1, {"c": 2}]} tail)";
  const char* end = nullptr;
  ASSERT_EQ(FindValueEnd(t.data(), t.data() + t.size(), false, &end), ScanResult::kOk);
  EXPECT_EQ(std::string(static_cast<const char*>(t.data()), end),
            R"({"a": "x}\"y", "b": [1, {"c": 2}]})");
  std::string cut = R"({"a": [1, 2)";
  EXPECT_EQ(FindValueEnd(cut.data(), cut.data() + cut.size(), false, &end),
            ScanResult::kIncomplete);
  EXPECT_EQ(FindValueEnd(cut.data(), cut.data() + cut.size(), true, &end), ScanResult::kInvalid);
  std::string num = "123";
  EXPECT_EQ(FindValueEnd(num.data(), num.data() + 3, false, &end), ScanResult::kIncomplete);
  EXPECT_EQ(FindValueEnd(num.data(), num.data() + 3, true, &end), ScanResult::kOk);
  std::string bad = "}";
  EXPECT_EQ(FindValueEnd(bad.data(), bad.data() + 1, true, &end), ScanResult::kInvalid);
}

TEST(JsonTextTest, DecodesEscapesAndSurrogatePairs) {
  std::string out;
  ASSERT_TRUE(DecodeString(R"("a\"b\\c\n\u00e9\ud83d\ude00")", &out));
  EXPECT_EQ(out, "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_FALSE(DecodeString(R"("bad \q")", &out));
  EXPECT_FALSE(DecodeString(R"("\u12")", &out));
}

TEST(JsonTextTest, ObjectReaderWalksMembers) {
  ObjectReader r(R"( { "ph" : "X", "args": {"x": [1,2]}, "ts": 1.5 } )");
  std::string_view k, v;
  ASSERT_TRUE(r.Next(&k, &v));
  EXPECT_EQ(k, "ph");
  EXPECT_EQ(v, "\"X\"");
  ASSERT_TRUE(r.Next(&k, &v));
  EXPECT_EQ(v, R"({"x": [1,2]})");
  ASSERT_TRUE(r.Next(&k, &v));
  EXPECT_EQ(v, "1.5");
  EXPECT_FALSE(r.Next(&k, &v));
  EXPECT_TRUE(r.ok());
  ObjectReader bad(R"({"a" 1})");
  EXPECT_FALSE(bad.Next(&k, &v));
  EXPECT_FALSE(bad.ok());
}

TEST(JsonTextTest, MinifyKeepsStringsIntact) {
  std::string out;
  AppendMinified("{ \"a b\" : [ 1, 2 ],\n  \"c\": \"x  y\" }", &out);
  EXPECT_EQ(out, R"({"a b":[1,2],"c":"x  y"})");
}

}  // namespace
}  // namespace trainprof::importers::json
