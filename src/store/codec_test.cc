#include "store/codec.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

namespace trainprof::store {
namespace {

void ExpectRoundTrip(const std::vector<int64_t>& ts, const std::vector<double>& values) {
  std::string blob = EncodeMetricChunk(ts, values, 3);
  std::vector<int64_t> ts_out;
  std::vector<double> v_out;
  ASSERT_TRUE(DecodeMetricChunk(blob, ts.size(), &ts_out, &v_out).ok());
  ASSERT_EQ(ts_out, ts);
  ASSERT_EQ(v_out.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint64_t>(v_out[i]), std::bit_cast<uint64_t>(values[i])) << i;
  }
}

TEST(CodecTest, VarintAndZigZag) {
  std::string buf;
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 300ull, ~0ull}) PutVarint(&buf, v);
  ByteReader r(buf);
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 300ull, ~0ull}) EXPECT_EQ(r.Varint(), v);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.at_end());
  r.Varint();
  EXPECT_FALSE(r.ok());
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(UnZigZag(ZigZag(v)), v);
  }
}

TEST(CodecTest, DecimalValuesRoundTripExactly) {
  std::vector<int64_t> ts;
  std::vector<double> v;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 5000; ++i) {
    ts.push_back(1'700'000'000'000'000'000 + i * 100'000'000LL + (i % 7 == 0 ? 13 : 0));
    v.push_back(static_cast<double>(rng() % 10001) / 10000.0);  // ratios at 1e-4
  }
  ExpectRoundTrip(ts, v);
  // Steady samples at 1e-4 resolution must compress well below 2 bytes per value.
  std::string blob = EncodeMetricChunk(ts, v, 3);
  EXPECT_LT(blob.size(), v.size() * 2);
}

TEST(CodecTest, ArbitraryDoublesUseXorAndRoundTrip) {
  std::vector<int64_t> ts;
  std::vector<double> v;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> dist(-1e6, 1e6);
  for (int i = 0; i < 1000; ++i) {
    ts.push_back(i * 1000);
    v.push_back(dist(rng));
  }
  v[3] = std::numeric_limits<double>::quiet_NaN();
  v[4] = std::numeric_limits<double>::infinity();
  v[5] = -0.0;
  v[6] = std::numeric_limits<double>::denorm_min();
  v[7] = 1.0 / 3.0;
  ExpectRoundTrip(ts, v);
}

TEST(CodecTest, EdgeCases) {
  ExpectRoundTrip({}, {});
  ExpectRoundTrip({42}, {1e300});
  ExpectRoundTrip({-5, 10, 3}, {0.1, 0.2, 0.3});       // non-monotonic timestamps survive too
  ExpectRoundTrip({1, 2}, {9007199254740993.0, 1.0});  // beyond 2^53
}

TEST(CodecTest, CorruptBlobsAreRefused) {
  std::string blob =
      EncodeMetricChunk(std::vector<int64_t>{1, 2, 3}, std::vector<double>{1, 2, 3}, 3);
  std::vector<int64_t> ts;
  std::vector<double> v;
  EXPECT_FALSE(DecodeMetricChunk(blob, 4, &ts, &v).ok());  // wrong count
  EXPECT_FALSE(DecodeMetricChunk(blob.substr(0, blob.size() / 2), 3, &ts, &v).ok());
  EXPECT_FALSE(DecodeMetricChunk("garbage", 3, &ts, &v).ok());
  EXPECT_TRUE(ts.empty());
  std::string flipped = blob;
  flipped[flipped.size() - 2] ^= 0x5a;
  (void)DecodeMetricChunk(flipped, 3, &ts, &v);  // must not crash; result may be either
}

TEST(CodecTest, EventChunkRoundTrip) {
  std::vector<EncodedEvent> events(3);
  events[0] = {model::EventKind::kSpan, 100, 50, 1, 2, 3, 7, 1234, 5678, 0, "{\"a\":1}"};
  events[1] = {model::EventKind::kInstant,
               120,
               0,
               4,
               0,
               0,
               model::kMissing,
               model::kMissing,
               model::kMissing,
               model::kMissing,
               ""};
  events[2] = {model::EventKind::kSpan, 130, -1, 1, 2, 3, -3, 1, 2, 3, "x"};
  std::string blob = EncodeEventChunk(events, 3);
  std::vector<EncodedEvent> out;
  ASSERT_TRUE(DecodeEventChunk(blob, 3, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].args, "{\"a\":1}");
  EXPECT_EQ(out[0].step, 7);
  EXPECT_EQ(out[1].kind, model::EventKind::kInstant);
  EXPECT_EQ(out[1].step, model::kMissing);
  EXPECT_EQ(out[1].rank, model::kMissing);
  EXPECT_EQ(out[2].step, -3);
  EXPECT_EQ(out[2].duration_ns, -1);
  EXPECT_EQ(out[2].start_ns, 130);
  EXPECT_FALSE(DecodeEventChunk(blob.substr(1), 3, &out).ok());
}

}  // namespace
}  // namespace trainprof::store
