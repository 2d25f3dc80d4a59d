#include "store/codec.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

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

TEST(CodecTest, ColumnEncoderWritesTheSameChunkFormat) {
  // The writer's columnar encoder, taking events in a permuted order, decodes to the events
  // the row encoder would have written in that order.
  EventColumns c;
  std::vector<EncodedEvent> rows;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 500; ++i) {
    EncodedEvent e;
    e.kind = i % 7 == 0 ? model::EventKind::kInstant : model::EventKind::kSpan;
    e.start_ns = 1'700'000'000'000'000'000 + static_cast<int64_t>(rng() % 1'000'000'000);
    e.duration_ns = e.kind == model::EventKind::kInstant ? 0 : static_cast<int64_t>(rng() % 5000);
    e.name_id = static_cast<uint32_t>(rng() % 300);
    e.category_id = static_cast<uint32_t>(i % 5);
    e.mode_id = static_cast<uint32_t>(i % 2);
    e.step = i % 3 == 0 ? model::kMissing : i / 3;
    e.pid = i % 11 == 0 ? model::kMissing : 4242;
    e.tid = -static_cast<int64_t>(i);
    e.rank = i % 2 == 0 ? model::kMissing : std::numeric_limits<int64_t>::max();
    e.args = i % 4 == 0 ? "" : "{\"i\":" + std::to_string(i) + "}";
    c.kind.push_back(static_cast<uint8_t>(e.kind));
    c.start_ns.push_back(e.start_ns);
    c.duration_ns.push_back(e.duration_ns);
    c.name_id.push_back(e.name_id);
    c.category_id.push_back(e.category_id);
    c.mode_id.push_back(e.mode_id);
    c.step.push_back(e.step);
    c.pid.push_back(e.pid);
    c.tid.push_back(e.tid);
    c.rank.push_back(e.rank);
    c.args += e.args;
    c.args_end.push_back(c.args.size());
    rows.push_back(e);
  }
  std::vector<uint32_t> order;
  StableSortByKey(c.start_ns, &order);
  std::vector<EncodedEvent> sorted;
  for (uint32_t i : order) sorted.push_back(rows[i]);
  ZstdCompressor zstd(3);
  EncodeScratch raw;
  std::string blob;
  EncodeEventColumns(c, order, zstd, &raw, &blob);
  std::vector<EncodedEvent> a, b;
  ASSERT_TRUE(DecodeEventChunk(blob, order.size(), &a).ok());
  ASSERT_TRUE(DecodeEventChunk(EncodeEventChunk(sorted, 3), sorted.size(), &b).ok());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].start_ns, b[i].start_ns);
    EXPECT_EQ(a[i].duration_ns, b[i].duration_ns);
    EXPECT_EQ(a[i].name_id, b[i].name_id);
    EXPECT_EQ(a[i].step, b[i].step);
    EXPECT_EQ(a[i].rank, b[i].rank);
    EXPECT_EQ(a[i].tid, b[i].tid);
    EXPECT_EQ(a[i].args, b[i].args);
  }
  // The scratch is reused: a second, smaller chunk from the same buffers is still right.
  std::span<const uint32_t> head(order.data(), 10);
  EncodeEventColumns(c, head, zstd, &raw, &blob);
  a.clear();
  ASSERT_TRUE(DecodeEventChunk(blob, 10, &a).ok());
  EXPECT_EQ(a.back().args, sorted[9].args);
}

TEST(CodecTest, StableSortByKeyOrdersTiesByArrival) {
  // Large enough for the radix path, with ties, negative keys and a range of 2^62.
  std::mt19937_64 rng(11);
  for (int64_t span : {int64_t{1000}, int64_t{1} << 40, int64_t{1} << 62}) {
    std::vector<int64_t> keys(20000);
    for (auto& k : keys) k = static_cast<int64_t>(rng() % static_cast<uint64_t>(span)) - span / 2;
    std::vector<uint32_t> order;
    StableSortByKey(keys, &order);
    ASSERT_EQ(order.size(), keys.size());
    std::vector<uint32_t> expected(keys.size());
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<uint32_t>(i);
    std::stable_sort(expected.begin(), expected.end(),
                     [&](uint32_t x, uint32_t y) { return keys[x] < keys[y]; });
    EXPECT_EQ(order, expected) << "range " << span;
  }
  std::vector<int64_t> sorted = {1, 2, 2, 3};
  std::vector<uint32_t> order;
  StableSortByKey(sorted, &order);
  EXPECT_EQ(order, (std::vector<uint32_t>{0, 1, 2, 3}));
  StableSortByKey({}, &order);
  EXPECT_TRUE(order.empty());
}

constexpr int64_t kT0 = 1'767'225'600'000'000'000;  // 2026-01-01

// Store format 2: the series of one tick refer to one timestamp column (metric_times). Jittered
// timestamps (SageMaker's, a real sampler's) cost bytes per value when every series keeps its
// own copy; a chunk that refers to the column keeps only its values, bit for bit.
TEST(CodecTest, SharedTimestampColumnRoundTripsAndIsRequired) {
  std::mt19937_64 rng(16);
  std::vector<int64_t> ts;
  std::vector<double> v;
  for (int i = 0; i < 4096; ++i) {
    ts.push_back(kT0 + i * 500'000'000LL + static_cast<int64_t>(rng() % 900) * 1000);
    v.push_back(static_cast<double>(rng() % 10001) / 10000.0);
  }
  const std::string times = EncodeMetricTimes(ts, 3);
  const std::string shared = EncodeMetricChunk(ts, v, 3, /*times_id=*/7);
  const std::string own = EncodeMetricChunk(ts, v, 3);
  // The jitter costs about 2 bytes per timestamp; the shared chunk holds none of them.
  EXPECT_LT(shared.size() + ts.size(), own.size());
  std::vector<int64_t> column;
  MetricTimesLookup lookup = [&](int64_t id, size_t count) -> StatusOr<std::span<const int64_t>> {
    if (id != 7) return DataLoss("no such row");
    TP_RETURN_IF_ERROR(DecodeMetricTimes(times, count, &column));
    return std::span<const int64_t>(column);
  };
  std::vector<int64_t> ts_out{1, 2};
  std::vector<double> v_out{3, 4};
  ASSERT_TRUE(DecodeMetricChunk(shared, ts.size(), &ts_out, &v_out, &lookup).ok());
  ASSERT_EQ(std::vector<int64_t>(ts_out.begin() + 2, ts_out.end()), ts);
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint64_t>(v_out[i + 2]), std::bit_cast<uint64_t>(v[i])) << i;
  }
  // Without the column, or with a column that is not there or of another length, the chunk is
  // refused and the caller's columns are left as they were.
  ts_out = {1, 2};
  v_out = {3, 4};
  Status none = DecodeMetricChunk(shared, ts.size(), &ts_out, &v_out);
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.message().find("timestamp column 7"), std::string::npos) << none.message();
  MetricTimesLookup missing = [](int64_t, size_t) -> StatusOr<std::span<const int64_t>> {
    return DataLoss("no such row in metric_times");
  };
  EXPECT_FALSE(DecodeMetricChunk(shared, ts.size(), &ts_out, &v_out, &missing).ok());
  std::vector<int64_t> short_column(ts.begin(), ts.end() - 1);
  MetricTimesLookup shorter = [&](int64_t, size_t) -> StatusOr<std::span<const int64_t>> {
    return std::span<const int64_t>(short_column);
  };
  EXPECT_FALSE(DecodeMetricChunk(shared, ts.size(), &ts_out, &v_out, &shorter).ok());
  EXPECT_EQ(ts_out, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(v_out, (std::vector<double>{3, 4}));
  // The column itself refuses a wrong count, a truncation and trailing bytes.
  EXPECT_FALSE(DecodeMetricTimes(times, ts.size() + 1, &column).ok());
  EXPECT_FALSE(DecodeMetricTimes(times.substr(0, times.size() / 2), ts.size(), &column).ok());
  EXPECT_FALSE(DecodeMetricTimes(times + "x", ts.size(), &column).ok());
  EXPECT_FALSE(DecodeMetricTimes(times, kMaxMetricChunkValues + 1, &column).ok());
}

// A chunk of a few values is stored raw (a zstd frame would add 9 bytes to ~10); a raw chunk
// starts with its version byte, never with zstd's magic.
TEST(CodecTest, TinyChunksAreStoredRaw) {
  const std::vector<int64_t> ts{kT0, kT0 + 60'000'176'200};
  const std::vector<double> v{0.0476, 0.053};
  const std::string blob = EncodeMetricChunk(ts, v, 3);
  ASSERT_FALSE(blob.empty());
  EXPECT_EQ(blob[0], 1);
  EXPECT_LT(blob.size(), ZstdCompress(blob, 3).size());
  ExpectRoundTrip(ts, v);
  const std::string times = EncodeMetricTimes(ts, 3);
  EXPECT_EQ(times[0], 1);
  std::vector<int64_t> column;
  ASSERT_TRUE(DecodeMetricTimes(times, 2, &column).ok());
  EXPECT_EQ(column, ts);
}

// Chunks written by format 1 (always zstd, timestamps inline) read as before: one built byte
// by byte from docs/store-format.md.
TEST(CodecTest, FormatOneChunksStillDecode) {
  std::string raw;
  raw.push_back(1);    // chunk version
  PutVarint(&raw, 3);  // n
  PutVarint(&raw, ZigZag(kT0));
  PutVarint(&raw, ZigZag(500'000'000));
  PutVarint(&raw, ZigZag(-1'000));  // delta-of-delta
  raw.push_back(0);                 // decimal
  raw.push_back(2);                 // e = 2
  raw.push_back(0);                 // delta layout
  for (int64_t d : {476, -100, 24}) PutVarint(&raw, ZigZag(d));
  std::vector<int64_t> ts;
  std::vector<double> v;
  ASSERT_TRUE(DecodeMetricChunk(ZstdCompress(raw, 3), 3, &ts, &v).ok());
  EXPECT_EQ(ts, (std::vector<int64_t>{kT0, kT0 + 500'000'000, kT0 + 999'999'000}));
  EXPECT_EQ(v, (std::vector<double>{4.76, 3.76, 4.0}));
}

}  // namespace
}  // namespace trainprof::store
