#include "importers/smdebug/python_stats_reader.h"

#include <gtest/gtest.h>

#include <cstring>

#include "base/files.h"
#include "importers/common/test_util.h"

namespace trainprof::importers::smdebug {
namespace {

using testing::SharedData;

const std::string kSmall =
    "smdebug/tests/profiler/resources/tfprofiler_timeline_traces/framework/tensorflow/cProfile/"
    "1596585376012363.8_1596585376017246.5_151-algo-1_3/python_stats";

std::string Error(std::string_view bytes) {
  auto r = DecodePythonStats(bytes);
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string() : r.status().message();
}

// The values below are what CPython's marshal.load gives for this file (python3 -c "import
// marshal; d = marshal.load(open(F, 'rb'))"): 230 functions; the first key and its tuple.
// tests/python/test_smdebug_differential.py compares every function with pstats.
TEST(PythonStatsReaderTest, DecodesSageMakersDump) {
  auto bytes = ReadFileToString(SharedData(kSmall));
  ASSERT_TRUE(bytes.ok());
  auto r = DecodePythonStats(*bytes);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 230u);
  const PythonFunctionStats& f = r->front();
  EXPECT_EQ(f.file, "~");
  EXPECT_EQ(f.line, 0);
  EXPECT_EQ(f.function, "<method 'append' of 'list' objects>");
  EXPECT_EQ(f.primitive_calls, 8);
  EXPECT_EQ(f.calls, 8);
  EXPECT_EQ(f.total_s, 8e-06);
  EXPECT_EQ(f.cumulative_s, 8e-06);
  EXPECT_EQ(f.callers, 3);
  // Its callers: {(file, line, function): (calls, primitive calls, own s, cumulative s)}, the
  // most cumulative time first, then calls, then file.
  const std::string site = "/usr/local/lib/python3.7/site-packages/";
  ASSERT_EQ(f.called_by.size(), 3u);
  EXPECT_EQ(f.called_by[0].function, "_packed_nest_with_indices");
  EXPECT_EQ(f.called_by[0].file, site + "tensorflow/python/util/nest.py");
  EXPECT_EQ(f.called_by[0].line, 444);
  EXPECT_EQ(f.called_by[0].calls, 4);
  EXPECT_EQ(f.called_by[0].cumulative_s, 4e-06);
  EXPECT_EQ(f.called_by[1].function, "_median");
  EXPECT_EQ(f.called_by[1].file, site + "numpy/lib/function_base.py");
  EXPECT_EQ(f.called_by[2].function, "_call_flat");
  EXPECT_EQ(f.called_by[2].total_s, 2e-06);
  // A recursive edge: (3, 2, ...) is 3 calls, 2 of them primitive (the function's own tuple
  // has them the other way round: (2, 3, ...)).
  const PythonFunctionStats* lambda = nullptr;
  for (const auto& g : *r) {
    if (g.function == "<lambda>" && g.line == 108) lambda = &g;
  }
  ASSERT_NE(lambda, nullptr);
  EXPECT_EQ(lambda->calls, 3);
  EXPECT_EQ(lambda->primitive_calls, 2);
  ASSERT_EQ(lambda->called_by.size(), 1u);
  EXPECT_EQ(lambda->called_by[0].function, "_make_input_signature_hashable");
  EXPECT_EQ(lambda->called_by[0].calls, 3);
  EXPECT_EQ(lambda->called_by[0].primitive_calls, 2);
  EXPECT_EQ(lambda->called_by[0].cumulative_s, 0.000122);
}

TEST(PythonStatsReaderTest, EveryTruncationIsAnErrorNeverACrash) {
  auto bytes = ReadFileToString(SharedData(kSmall));
  ASSERT_TRUE(bytes.ok());
  for (size_t n = 0; n < bytes->size(); n += 97) {
    auto r = DecodePythonStats(std::string_view(*bytes).substr(0, n));
    EXPECT_FALSE(r.ok()) << n;
  }
}

TEST(PythonStatsReaderTest, BadInputGetsAClearError) {
  EXPECT_NE(Error("").find("truncated"), std::string::npos);
  EXPECT_NE(Error("N").find("not a dict"), std::string::npos);
  EXPECT_NE(Error("{0N").find("after the statistics dict"), std::string::npos);
  // A code object (type 'c') is refused, never run.
  EXPECT_NE(Error(std::string("{c\0\0\0\0", 6)).find("marshal type 'c'"), std::string::npos);
  // A tuple claiming 2^31-1 elements in a 5-byte file.
  EXPECT_NE(Error(std::string("(\xff\xff\xff\x7f", 5)).find("beyond the file's end"),
            std::string::npos);
  // A string longer than the file.
  EXPECT_NE(Error(std::string("{u\x10\0\0\0ab", 8)).find("string length 16"), std::string::npos);
  // A reference to an object not read yet.
  EXPECT_NE(Error(std::string("{r\x05\0\0\0", 6)).find("reference 5"), std::string::npos);
  // Nesting: 40 one-element tuples.
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += ")\x01";
  deep += "N";
  EXPECT_NE(Error(deep).find("nesting deeper than 8"), std::string::npos);
  // A dict entry of the wrong shape names the entry.
  EXPECT_NE(Error("{NN0").find("entry 0: key is not (file, line, function)"), std::string::npos);
  // A caller of the wrong shape names the entry and the caller:
  // {("f", 1, "g"): (1, 1, 0, 0, {None: None})}.
  std::string bad_caller = "{)\x03" + std::string("u\x01\0\0\0f", 6) +
                           std::string("i\x01\0\0\0", 5) + std::string("u\x01\0\0\0g", 6) +
                           ")\x05" + std::string("i\x01\0\0\0i\x01\0\0\0i\0\0\0\0i\0\0\0\0", 20) +
                           "{NN00";
  EXPECT_NE(Error(bad_caller).find("entry 0: caller 0: key is not (file, line, function)"),
            std::string::npos)
      << Error(bad_caller);
}

TEST(PythonStatsReaderTest, SecondsBeyondInt64NanosecondsAreRefused) {
  // Found by fuzzing: a caller's cumulative time of 5.8e82 s was cast to int64 nanoseconds.
  // {("f", 1, "g"): (1, 1, 0.0, 0.0, {("f", 1, "g"): (1, 1, 0.0, SECONDS)})}
  auto binary_float = [](double v) {
    std::string out = "g";
    char raw[8];
    std::memcpy(raw, &v, 8);  // marshal's binary float: IEEE 754, little-endian (this host)
    return out + std::string(raw, 8);
  };
  const std::string key = ")\x03" + std::string("u\x01\0\0\0f", 6) + std::string("i\x01\0\0\0", 5) +
                          std::string("u\x01\0\0\0g", 6);
  const std::string one = std::string("i\x01\0\0\0", 5);
  auto dump = [&](double function_s, double caller_s) {
    return "{" + key + ")\x05" + one + one + binary_float(0) + binary_float(function_s) + "{" +
           key + ")\x04" + one + one + binary_float(0) + binary_float(caller_s) + "00";
  };
  auto ok = DecodePythonStats(dump(1.5, 1.25));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 1u);
  ASSERT_EQ((*ok)[0].called_by.size(), 1u);
  EXPECT_EQ((*ok)[0].called_by[0].cumulative_s, 1.25);
  EXPECT_NE(Error(dump(1.5, 5.82434e82)).find("caller 0: value is not"), std::string::npos);
  EXPECT_NE(Error(dump(1e300, 1.25)).find("entry 0: value is not"), std::string::npos);
  EXPECT_NE(Error(dump(-1e19, 1.25)).find("entry 0: value is not"), std::string::npos);
}

TEST(PythonStatsReaderTest, MarshalVariantsOfOneEntry) {
  // {("f.py", 3, "g"): (1, 2, 0.5, 1.5, {})} written with long ints, a text float and a
  // back-reference: the forms older Pythons (and marshal versions 0-4) use.
  std::string b = "{";
  b += std::string(")\x03", 2);
  b += "\xfa\x04"
       "f.py";                               // short ascii with FLAG_REF -> ref 0
  b += std::string("l\x01\0\0\0\x03\0", 7);  // long 3
  b += std::string("u\x01\0\0\0g", 6);
  b += std::string(")\x05", 2);
  b += std::string("i\x01\0\0\0", 5);
  b += std::string("l\x01\0\0\0\x02\0", 7);
  b += std::string(
      "f\x03"
      "0.5",
      5);
  b += std::string("g\0\0\0\0\0\0\xf8\x3f", 9);  // 1.5
  b += "{0";
  b += "0";
  auto r = DecodePythonStats(b);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].file, "f.py");
  EXPECT_EQ((*r)[0].line, 3);
  EXPECT_EQ((*r)[0].function, "g");
  EXPECT_EQ((*r)[0].primitive_calls, 1);
  EXPECT_EQ((*r)[0].calls, 2);
  EXPECT_EQ((*r)[0].total_s, 0.5);
  EXPECT_EQ((*r)[0].cumulative_s, 1.5);
  EXPECT_EQ((*r)[0].callers, 0);
  // The same file name again through a reference to object 0.
  std::string with_ref = b;
  with_ref.replace(with_ref.find("\xfa\x04"
                                 "f.py"),
                   6, std::string("r\0\0\0\0", 5));
  EXPECT_FALSE(DecodePythonStats(with_ref).ok());  // nothing was flagged for reference yet
}

}  // namespace
}  // namespace trainprof::importers::smdebug
