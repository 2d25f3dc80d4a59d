#include "store/codec.h"

#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>

namespace trainprof::store {
namespace {

// Sums in the decoders wrap instead of overflowing: a hostile chunk can hold any varints, and a
// signed overflow is undefined behaviour (found by fuzz_store_chunks). Honest chunks never wrap.
int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

constexpr uint8_t kMetricChunkVersion = 1;
constexpr uint8_t kEventChunkVersion = 1;
constexpr int kMaxDecimalExponent = 18;
constexpr uint8_t kDecimalDelta = 0;   // m_i - m_{i-1}, zigzag varints
constexpr uint8_t kDecimalOffset = 1;  // min(m), then m_i - min(m) varints

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

constexpr double kPow10[kMaxDecimalExponent + 1] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,
                                                    1e7,  1e8,  1e9,  1e10, 1e11, 1e12, 1e13,
                                                    1e14, 1e15, 1e16, 1e17, 1e18};

// Integers beyond 2^53 are not all representable as doubles; stay below.
constexpr double kMaxExactInteger = 9007199254740992.0;

bool SameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

// Whether v == m / 10^e exactly (bitwise) for the m this encoder would write.
bool DecimalExact(double v, int e, int64_t* m_out) {
  double scaled = v * kPow10[e];
  if (!(std::fabs(scaled) < kMaxExactInteger)) return false;
  int64_t m = std::llround(scaled);
  double back = e == 0 ? static_cast<double>(m) : static_cast<double>(m) / kPow10[e];
  if (!SameBits(back, v)) return false;
  *m_out = m;
  return true;
}

// The smallest exponent e that represents every value exactly, or -1.
int FindDecimalExponent(std::span<const double> values) {
  int e = 0;
  int64_t m = 0;
  for (double v : values) {
    if (!std::isfinite(v)) return -1;
    while (!DecimalExact(v, e, &m)) {
      if (++e > kMaxDecimalExponent) return -1;
    }
  }
  for (double v : values) {
    if (!DecimalExact(v, e, &m)) return -1;
  }
  return e;
}

void PutOptional(std::string* out, int64_t v) {
  PutVarint(out, v == model::kMissing ? 0 : ZigZag(v) + 1);
}

int64_t GetOptional(ByteReader& r) {
  uint64_t raw = r.Varint();
  return raw == 0 ? model::kMissing : UnZigZag(raw - 1);
}

// A XOR of two doubles' bits, Gorilla-style but byte-aligned: one header byte holding the
// number of zero bytes at the top (high nibble) and at the bottom (low nibble), then the bytes
// between them. Equal neighbours cost one byte; 0x80 marks a zero XOR.
constexpr uint8_t kXorZero = 0x80;

void PutXor(std::string* out, uint64_t x) {
  if (x == 0) {
    out->push_back(static_cast<char>(kXorZero));
    return;
  }
  int lead = std::countl_zero(x) / 8;
  int trail = std::countr_zero(x) / 8;
  out->push_back(static_cast<char>((lead << 4) | trail));
  for (int byte = 7 - lead; byte >= trail; --byte) {
    out->push_back(static_cast<char>((x >> (byte * 8)) & 0xff));
  }
}

uint64_t GetXor(ByteReader& r) {
  uint8_t h = r.Byte();
  if (h == kXorZero) return 0;
  int lead = h >> 4, trail = h & 0xf;
  if (lead + trail > 7) {
    r.Bytes(SIZE_MAX);  // marks the reader as failed
    return 0;
  }
  uint64_t x = 0;
  for (int byte = 7 - lead; byte >= trail; --byte) {
    x |= static_cast<uint64_t>(r.Byte()) << (byte * 8);
  }
  return x;
}

}  // namespace

void PutVarint(std::string* out, uint64_t v) {
  char buf[10];
  int n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, static_cast<size_t>(n));
}

std::string ZstdCompress(std::string_view raw, int level) {
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), level);
  TP_CHECK(!ZSTD_isError(n));  // only fails on a too-small buffer, which compressBound rules out
  out.resize(n);
  return out;
}

Status ZstdDecompressInto(std::string_view compressed, size_t max_bytes, std::string* out) {
  unsigned long long size = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    return DataLoss("not a zstd frame with a known size");
  }
  if (size > max_bytes) return DataLoss("zstd frame claims " + std::to_string(size) + " bytes");
  // One decompression context per thread: ZSTD_decompress would allocate and free one per chunk.
  thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(),
                                                                       ZSTD_freeDCtx);
  if (!dctx) return Internal("zstd: cannot create a decompression context");
  out->resize(static_cast<size_t>(size));
  size_t n = ZSTD_decompressDCtx(dctx.get(), out->data(), out->size(), compressed.data(),
                                 compressed.size());
  if (ZSTD_isError(n) || n != size) {
    out->clear();
    return DataLoss(std::string("zstd: ") + (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short"));
  }
  return OkStatus();
}

StatusOr<std::string> ZstdDecompress(std::string_view compressed, size_t max_bytes) {
  std::string out;
  TP_RETURN_IF_ERROR(ZstdDecompressInto(compressed, max_bytes, &out));
  return out;
}

namespace {

// Metric chunks and timestamp columns are stored as zstd frames, or as their raw bytes when
// zstd would not make them smaller (a series with a handful of values). A raw blob starts with
// its version byte (1 or 2), a zstd frame with its magic number's first byte.
constexpr uint8_t kZstdMagicFirstByte = 0x28;
constexpr uint8_t kMetricTimesVersion = 1;
constexpr uint8_t kMetricChunkSharedTimesVersion = 2;

std::string CompressedOrRaw(std::string raw, int level) {
  std::string z = ZstdCompress(raw, level);
  return z.size() < raw.size() ? z : raw;
}

Status OpenBlob(std::string_view blob, size_t max_bytes, std::string* raw) {
  if (!blob.empty() && static_cast<uint8_t>(blob[0]) != kZstdMagicFirstByte) {
    if (blob.size() > max_bytes) {
      return DataLoss("raw chunk of " + std::to_string(blob.size()) + " bytes is too large");
    }
    raw->assign(blob);
    return OkStatus();
  }
  return ZstdDecompressInto(blob, max_bytes, raw);
}

// First value, first delta, then delta-of-deltas (0 for a steady sampler).
void PutTimestamps(std::string* raw, std::span<const int64_t> ts_ns) {
  int64_t prev = 0, prev_delta = 0;
  for (size_t i = 0; i < ts_ns.size(); ++i) {
    if (i == 0) {
      PutVarint(raw, ZigZag(ts_ns[0]));
    } else {
      int64_t delta = ts_ns[i] - prev;
      PutVarint(raw, ZigZag(i == 1 ? delta : delta - prev_delta));
      prev_delta = delta;
    }
    prev = ts_ns[i];
  }
}

void GetTimestamps(ByteReader& r, uint64_t n, int64_t* t) {
  int64_t prev = 0, delta = 0;
  for (uint64_t i = 0; i < n; ++i) {
    int64_t x = UnZigZag(r.Varint());
    if (i == 0) {
      prev = x;
    } else if (i == 1) {
      delta = x;
      prev = WrapAdd(prev, delta);
    } else {
      delta = WrapAdd(delta, x);
      prev = WrapAdd(prev, delta);
    }
    t[i] = prev;
  }
}

}  // namespace

std::string EncodeMetricChunk(std::span<const int64_t> ts_ns, std::span<const double> values,
                              int zstd_level, int64_t times_id) {
  TP_CHECK(ts_ns.size() == values.size());
  const size_t n = ts_ns.size();
  std::string raw;
  raw.reserve(n * 4 + 16);
  if (times_id > 0) {
    raw.push_back(static_cast<char>(kMetricChunkSharedTimesVersion));
    PutVarint(&raw, n);
    PutVarint(&raw, static_cast<uint64_t>(times_id));
  } else {
    raw.push_back(static_cast<char>(kMetricChunkVersion));
    PutVarint(&raw, n);
    PutTimestamps(&raw, ts_ns);
  }
  int e = FindDecimalExponent(values);
  if (e >= 0) {
    raw.push_back(static_cast<char>(ValueEncoding::kDecimal));
    raw.push_back(static_cast<char>(e));
    std::vector<int64_t> m(n);
    for (size_t i = 0; i < n; ++i) DecimalExact(values[i], e, &m[i]);
    // Slowly moving series (memory, counters) favour deltas; noisy ones (utilisation) favour
    // offsets from the chunk's minimum. Pick whichever writes fewer varint bytes.
    int64_t min_m = n ? *std::min_element(m.begin(), m.end()) : 0;
    size_t delta_bytes = 0, offset_bytes = 0;
    for (size_t i = 0; i < n; ++i) {
      delta_bytes += VarintSize(ZigZag(m[i] - (i ? m[i - 1] : 0)));
      offset_bytes += VarintSize(static_cast<uint64_t>(m[i] - min_m));
    }
    if (delta_bytes <= offset_bytes) {
      raw.push_back(static_cast<char>(kDecimalDelta));
      for (size_t i = 0; i < n; ++i) PutVarint(&raw, ZigZag(m[i] - (i ? m[i - 1] : 0)));
    } else {
      raw.push_back(static_cast<char>(kDecimalOffset));
      PutVarint(&raw, ZigZag(min_m));
      for (size_t i = 0; i < n; ++i) PutVarint(&raw, static_cast<uint64_t>(m[i] - min_m));
    }
  } else {
    raw.push_back(static_cast<char>(ValueEncoding::kXor));
    uint64_t prev_bits = 0;
    for (double v : values) {
      uint64_t bits = std::bit_cast<uint64_t>(v);
      PutXor(&raw, bits ^ prev_bits);
      prev_bits = bits;
    }
  }
  return CompressedOrRaw(std::move(raw), zstd_level);
}

std::string EncodeMetricTimes(std::span<const int64_t> ts_ns, int zstd_level) {
  std::string raw;
  raw.reserve(ts_ns.size() * 3 + 16);
  raw.push_back(static_cast<char>(kMetricTimesVersion));
  PutVarint(&raw, ts_ns.size());
  PutTimestamps(&raw, ts_ns);
  return CompressedOrRaw(std::move(raw), zstd_level);
}

Status DecodeMetricTimes(std::string_view blob, size_t expected_count,
                         std::vector<int64_t>* ts_ns) {
  if (expected_count > kMaxMetricChunkValues) {
    return DataLoss("timestamp column claims " + std::to_string(expected_count) +
                    " values; a chunk holds at most " + std::to_string(kMaxMetricChunkValues));
  }
  thread_local std::string raw;
  // A varint timestamp takes at most 10 bytes, and at least 1: check before sizing.
  TP_RETURN_IF_ERROR(OpenBlob(blob, 32 + expected_count * 10, &raw));
  if (raw.size() < 2 + expected_count) {
    return DataLoss("timestamp column claims " + std::to_string(expected_count) + " values in " +
                    std::to_string(raw.size()) + " bytes");
  }
  ByteReader r(raw);
  uint8_t version = r.Byte();
  if (version != kMetricTimesVersion) {
    return DataLoss("timestamp column version " + std::to_string(version) + " is not supported");
  }
  uint64_t n = r.Varint();
  if (!r.ok() || n != expected_count) return DataLoss("timestamp column count mismatch");
  ts_ns->resize(n);
  GetTimestamps(r, n, ts_ns->data());
  if (!r.ok() || !r.at_end()) {
    ts_ns->clear();
    return DataLoss("timestamp column is truncated or has trailing bytes");
  }
  return OkStatus();
}

Status DecodeMetricChunk(std::string_view blob, size_t expected_count, std::vector<int64_t>* ts_ns,
                         std::vector<double>* values, const MetricTimesLookup* times) {
  // A varint timestamp and value take at most 20 bytes; anything larger is corrupt. The buffer
  // is kept per thread: a read decodes thousands of chunks of similar size.
  thread_local std::string raw;
  if (expected_count > kMaxMetricChunkValues) {
    return DataLoss("metric chunk claims " + std::to_string(expected_count) +
                    " values; a chunk holds at most " + std::to_string(kMaxMetricChunkValues));
  }
  TP_RETURN_IF_ERROR(OpenBlob(blob, 32 + expected_count * 20, &raw));
  // Each value takes at least 1 byte, and its own timestamp 1 more (version 1): check before
  // sizing.
  const uint8_t version = raw.empty() ? 0 : static_cast<uint8_t>(raw[0]);
  const size_t min_bytes_per_value = version == kMetricChunkSharedTimesVersion ? 1 : 2;
  if (raw.size() < 3 + min_bytes_per_value * expected_count) {
    return DataLoss("metric chunk claims " + std::to_string(expected_count) + " values in " +
                    std::to_string(raw.size()) + " bytes");
  }
  ByteReader r(raw);
  r.Byte();
  if (version != kMetricChunkVersion && version != kMetricChunkSharedTimesVersion) {
    return DataLoss("metric chunk version " + std::to_string(version) + " is not supported");
  }
  uint64_t n = r.Varint();
  if (!r.ok() || n != expected_count) return DataLoss("metric chunk count mismatch");
  std::span<const int64_t> shared;
  if (version == kMetricChunkSharedTimesVersion) {
    const uint64_t times_id = r.Varint();
    if (!r.ok() || times_id == 0 || times_id > static_cast<uint64_t>(INT64_MAX)) {
      return DataLoss("metric chunk refers to no timestamp column");
    }
    if (times == nullptr || !*times) {
      return DataLoss("metric chunk refers to timestamp column " + std::to_string(times_id) +
                      ", which this reader cannot look up");
    }
    auto found = (*times)(static_cast<int64_t>(times_id), static_cast<size_t>(n));
    if (!found.ok()) {
      return DataLoss("timestamp column " + std::to_string(times_id) + ": " +
                      found.status().message());
    }
    shared = *found;
    if (shared.size() != n)
      return DataLoss("metric chunk and its timestamp column differ in count");
  }
  size_t base = ts_ns->size();
  ts_ns->resize(base + n);
  values->resize(base + n);
  // Whatever refuses the chunk from here on leaves the caller's columns as they were (a reader
  // appends into its table: partial rows would become samples). Found by fuzz_store_chunks.
  struct Restore {
    std::vector<int64_t>* ts;
    std::vector<double>* v;
    size_t base;
    bool keep = false;
    ~Restore() {
      if (!keep) {
        ts->resize(base);
        v->resize(base);
      }
    }
  } restore{ts_ns, values, base};
  int64_t* t = ts_ns->data() + base;
  double* v = values->data() + base;
  if (version == kMetricChunkSharedTimesVersion) {
    if (n > 0) std::memcpy(t, shared.data(), n * sizeof(int64_t));
  } else {
    GetTimestamps(r, n, t);
  }
  auto encoding = static_cast<ValueEncoding>(r.Byte());
  if (encoding == ValueEncoding::kDecimal) {
    int e = r.Byte();
    if (e > kMaxDecimalExponent) return DataLoss("metric chunk decimal exponent out of range");
    uint8_t layout = r.Byte();
    const double scale = kPow10[e];
    auto put = [&](uint64_t i, int64_t m) {
      v[i] = e == 0 ? static_cast<double>(m) : static_cast<double>(m) / scale;
    };
    if (layout == kDecimalDelta) {
      int64_t m = 0;
      for (uint64_t i = 0; i < n; ++i) put(i, m = WrapAdd(m, UnZigZag(r.Varint())));
    } else if (layout == kDecimalOffset) {
      int64_t min_m = UnZigZag(r.Varint());
      for (uint64_t i = 0; i < n; ++i) put(i, WrapAdd(min_m, static_cast<int64_t>(r.Varint())));
    } else {
      return DataLoss("metric chunk has unknown decimal layout");
    }
  } else if (encoding == ValueEncoding::kXor) {
    uint64_t bits = 0;
    for (uint64_t i = 0; i < n; ++i) {
      bits ^= GetXor(r);
      v[i] = std::bit_cast<double>(bits);
    }
  } else {
    return DataLoss("metric chunk has unknown value encoding");
  }
  if (!r.ok() || !r.at_end()) return DataLoss("metric chunk is truncated or has trailing bytes");
  restore.keep = true;
  return OkStatus();
}

std::string EncodeEventChunk(std::span<const EncodedEvent> events, int zstd_level) {
  std::string raw;
  raw.reserve(events.size() * 24 + 16);
  raw.push_back(static_cast<char>(kEventChunkVersion));
  PutVarint(&raw, events.size());
  // One column after another: similar values sit together and compress well.
  for (const auto& e : events) raw.push_back(static_cast<char>(e.kind));
  int64_t prev = 0;
  for (const auto& e : events) {
    PutVarint(&raw, ZigZag(e.start_ns - prev));
    prev = e.start_ns;
  }
  for (const auto& e : events) PutVarint(&raw, ZigZag(e.duration_ns));
  for (const auto& e : events) PutVarint(&raw, e.name_id);
  for (const auto& e : events) PutVarint(&raw, e.category_id);
  for (const auto& e : events) PutVarint(&raw, e.mode_id);
  for (const auto& e : events) PutOptional(&raw, e.step);
  for (const auto& e : events) PutOptional(&raw, e.pid);
  for (const auto& e : events) PutOptional(&raw, e.tid);
  for (const auto& e : events) PutOptional(&raw, e.rank);
  for (const auto& e : events) {
    PutVarint(&raw, e.args.size());
    raw.append(e.args);
  }
  return ZstdCompress(raw, zstd_level);
}

void EventColumns::Clear() {
  kind.clear();
  start_ns.clear();
  duration_ns.clear();
  step.clear();
  pid.clear();
  tid.clear();
  rank.clear();
  name_id.clear();
  category_id.clear();
  mode_id.clear();
  args_end.clear();
  args.clear();
}

void EventColumns::Reserve(size_t events, size_t args_bytes) {
  kind.reserve(events);
  for (auto* v : {&start_ns, &duration_ns, &step, &pid, &tid, &rank}) v->reserve(events);
  for (auto* v : {&name_id, &category_id, &mode_id}) v->reserve(events);
  args_end.reserve(events);
  args.reserve(args_bytes);
}

ZstdCompressor::ZstdCompressor(int level) : cctx_(ZSTD_createCCtx()), level_(level) {
  TP_CHECK(cctx_ != nullptr);
}

ZstdCompressor::~ZstdCompressor() { ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_)); }

void ZstdCompressor::Release() {
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
  cctx_ = nullptr;
  room_.reset();
  room_bytes_ = 0;
}

void ZstdCompressor::Compress(std::string_view raw, std::string* out) {
  if (cctx_ == nullptr) {
    cctx_ = ZSTD_createCCtx();
    TP_CHECK(cctx_ != nullptr);
  }
  const size_t bound = ZSTD_compressBound(raw.size());
  if (bound > room_bytes_) {
    room_.reset(new char[bound]);
    room_bytes_ = bound;
  }
  size_t n = ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(cctx_), room_.get(), room_bytes_, raw.data(),
                               raw.size(), level_);
  TP_CHECK(!ZSTD_isError(n));  // only fails on a too-small buffer, which compressBound rules out
  out->assign(room_.get(), n);
}

namespace {

// Writes a varint at p (which has room for 10 bytes) and returns the byte after it.
inline char* PutVarintAt(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

inline uint64_t OptionalCode(int64_t v) { return v == model::kMissing ? 0 : ZigZag(v) + 1; }

}  // namespace

void EncodeEventColumns(const EventColumns& c, std::span<const uint32_t> order,
                        ZstdCompressor& zstd, EncodeScratch* raw, std::string* out) {
  const size_t n = order.size();
  size_t args_bytes = 0;
  for (uint32_t i : order) args_bytes += c.args_end[i] - (i == 0 ? 0 : c.args_end[i - 1]);
  // Room for the largest varints: 10 bytes each of 10 numbers per event, plus the args.
  char* const begin = raw->Room(16 + n * 101 + args_bytes);
  char* p = begin;
  *p++ = static_cast<char>(kEventChunkVersion);
  p = PutVarintAt(p, n);
  for (uint32_t i : order) *p++ = static_cast<char>(c.kind[i]);
  uint64_t prev = 0;
  for (uint32_t i : order) {
    const auto start = static_cast<uint64_t>(c.start_ns[i]);
    p = PutVarintAt(p, ZigZag(static_cast<int64_t>(start - prev)));  // wraps like the decoder
    prev = start;
  }
  for (uint32_t i : order) p = PutVarintAt(p, ZigZag(c.duration_ns[i]));
  for (uint32_t i : order) p = PutVarintAt(p, c.name_id[i]);
  for (uint32_t i : order) p = PutVarintAt(p, c.category_id[i]);
  for (uint32_t i : order) p = PutVarintAt(p, c.mode_id[i]);
  for (uint32_t i : order) p = PutVarintAt(p, OptionalCode(c.step[i]));
  for (uint32_t i : order) p = PutVarintAt(p, OptionalCode(c.pid[i]));
  for (uint32_t i : order) p = PutVarintAt(p, OptionalCode(c.tid[i]));
  for (uint32_t i : order) p = PutVarintAt(p, OptionalCode(c.rank[i]));
  for (uint32_t i : order) {
    std::string_view a = c.Args(i);
    p = PutVarintAt(p, a.size());
    std::memcpy(p, a.data(), a.size());
    p += a.size();
  }
  zstd.Compress(std::string_view(begin, static_cast<size_t>(p - begin)), out);
}

void StableSortByKey(std::span<const int64_t> keys, std::vector<uint32_t>* order) {
  const size_t n = keys.size();
  order->resize(n);
  for (size_t i = 0; i < n; ++i) (*order)[i] = static_cast<uint32_t>(i);
  if (n < 2) return;
  bool sorted = true;
  int64_t lo = keys[0], hi = keys[0];
  for (size_t i = 1; i < n; ++i) {
    sorted = sorted && keys[i - 1] <= keys[i];
    lo = std::min(lo, keys[i]);
    hi = std::max(hi, keys[i]);
  }
  if (sorted) return;
  if (n < 4096) {
    std::stable_sort(order->begin(), order->end(),
                     [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
    return;
  }
  // Offsets from the minimum fit in as many 11-bit digits as the time range needs (a flush
  // covering seconds: 3 passes), each a counting pass and a scatter.
  constexpr int kDigitBits = 11;
  constexpr size_t kBuckets = size_t{1} << kDigitBits;
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  const int bits = 64 - std::countl_zero(range);
  std::vector<uint64_t> key(n), key_tmp(n);
  std::vector<uint32_t> order_tmp(n);
  for (size_t i = 0; i < n; ++i)
    key[i] = static_cast<uint64_t>(keys[i]) - static_cast<uint64_t>(lo);
  std::vector<size_t> count(kBuckets);
  for (int shift = 0; shift < bits; shift += kDigitBits) {
    std::fill(count.begin(), count.end(), 0);
    for (size_t i = 0; i < n; ++i) ++count[(key[i] >> shift) & (kBuckets - 1)];
    size_t sum = 0;
    for (size_t& c : count) {
      size_t k = c;
      c = sum;
      sum += k;
    }
    for (size_t i = 0; i < n; ++i) {
      size_t at = count[(key[i] >> shift) & (kBuckets - 1)]++;
      key_tmp[at] = key[i];
      order_tmp[at] = (*order)[i];
    }
    key.swap(key_tmp);
    order->swap(order_tmp);
  }
}

Status DecodeEventChunk(std::string_view blob, size_t expected_count,
                        std::vector<EncodedEvent>* out) {
  std::string raw;
  EventChunkColumns c;
  TP_RETURN_IF_ERROR(DecodeEventChunkColumns(blob, expected_count, &raw, &c));
  const size_t base = out->size();
  out->resize(base + c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    EncodedEvent& e = (*out)[base + i];
    e.kind = static_cast<model::EventKind>(c.kind[i]);
    e.start_ns = c.start_ns[i];
    e.duration_ns = c.duration_ns[i];
    e.name_id = c.name_id[i];
    e.category_id = c.category_id[i];
    e.mode_id = c.mode_id[i];
    e.step = c.step[i];
    e.pid = c.pid[i];
    e.tid = c.tid[i];
    e.rank = c.rank[i];
    e.args = std::string(c.args[i]);
  }
  return OkStatus();
}

void EventChunkColumns::Clear() {
  for (auto* v : {&start_ns, &duration_ns, &step, &pid, &tid, &rank}) v->clear();
  for (auto* v : {&name_id, &category_id, &mode_id}) v->clear();
  kind.clear();
  args.clear();
}

Status DecodeEventChunkColumns(std::string_view blob, size_t expected_count, std::string* raw_out,
                               EventChunkColumns* out) {
  out->Clear();
  // The writer closes a chunk at kMaxEventChunkArgsBytes of args and never stores one event's
  // args beyond kMaxEventArgsBytes; the other columns take at most 101 bytes per event.
  if (expected_count > kMaxEventChunkEvents) {
    return DataLoss("event chunk claims " + std::to_string(expected_count) +
                    " events; a chunk holds at most " + std::to_string(kMaxEventChunkEvents));
  }
  TP_RETURN_IF_ERROR(ZstdDecompressInto(
      blob, 16 + expected_count * 101 + kMaxEventChunkArgsBytes + kMaxEventArgsBytes, raw_out));
  const std::string& raw = *raw_out;
  // Each event takes at least 11 bytes (its kind and ten varints): check before sizing.
  if (raw.size() < 2 + 11 * expected_count) {
    return DataLoss("event chunk claims " + std::to_string(expected_count) + " events in " +
                    std::to_string(raw.size()) + " bytes");
  }
  ByteReader r(raw);
  uint8_t version = r.Byte();
  if (version != kEventChunkVersion) {
    return DataLoss("event chunk version " + std::to_string(version) + " is not supported");
  }
  uint64_t n = r.Varint();
  if (!r.ok() || n != expected_count) return DataLoss("event chunk count mismatch");
  out->kind.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint8_t kind = r.Byte();
    if (kind > 1) {
      out->Clear();
      return DataLoss("event chunk has an unknown event kind");
    }
    out->kind[i] = kind;
  }
  auto column = [&](std::vector<int64_t>& v, auto decode) {
    v.resize(n);
    int64_t* p = v.data();
    for (uint64_t i = 0; i < n; ++i) p[i] = decode();
  };
  int64_t prev = 0;
  column(out->start_ns, [&] { return prev = WrapAdd(prev, UnZigZag(r.Varint())); });
  column(out->duration_ns, [&] { return UnZigZag(r.Varint()); });
  for (auto* ids : {&out->name_id, &out->category_id, &out->mode_id}) {
    ids->resize(n);
    uint32_t* p = ids->data();
    for (uint64_t i = 0; i < n; ++i) p[i] = static_cast<uint32_t>(r.Varint());
  }
  for (auto* v : {&out->step, &out->pid, &out->tid, &out->rank}) {
    column(*v, [&] { return GetOptional(r); });
  }
  out->args.resize(n);
  for (uint64_t i = 0; i < n; ++i) out->args[i] = r.Bytes(r.Varint());
  if (!r.ok() || !r.at_end()) {
    out->Clear();
    return DataLoss("event chunk is truncated or has trailing bytes");
  }
  return OkStatus();
}

}  // namespace trainprof::store
