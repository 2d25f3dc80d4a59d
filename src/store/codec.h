#pragma once
// Byte-level encodings used inside the store's chunks (documented in docs/store-format.md):
// LEB128 varints, zigzag, the metric chunk (delta-of-delta timestamps + decimal-or-XOR values)
// and the event chunk (one column after another), each compressed with zstd.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/event.h"

namespace trainprof::store {

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

void PutVarint(std::string* out, uint64_t v);

// Reads LEB128 varints from a byte range; remembers the first error instead of failing each
// call, so decoders check ok() once per column.
class ByteReader {
 public:
  ByteReader(const uint8_t* begin, const uint8_t* end) : p_(begin), end_(end) {}
  explicit ByteReader(std::string_view s)
      : ByteReader(reinterpret_cast<const uint8_t*>(s.data()),
                   reinterpret_cast<const uint8_t*>(s.data()) + s.size()) {}

  uint64_t Varint() {
    if (p_ != end_ && *p_ < 0x80) return *p_++;  // most deltas fit one byte
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) {
        ok_ = false;
        return 0;
      }
      uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    ok_ = false;
    return 0;
  }
  uint8_t Byte() {
    if (p_ == end_) {
      ok_ = false;
      return 0;
    }
    return *p_++;
  }
  std::string_view Bytes(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) {
      ok_ = false;
      p_ = end_;
      return {};
    }
    std::string_view out(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return out;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return p_ == end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

std::string ZstdCompress(std::string_view raw, int level);
// Refuses frames that claim more than `max_bytes` decompressed (corrupt sizes).
StatusOr<std::string> ZstdDecompress(std::string_view compressed, size_t max_bytes);
// The same into `out`, reusing its capacity.
Status ZstdDecompressInto(std::string_view compressed, size_t max_bytes, std::string* out);

// How a metric chunk stores its values; chosen per chunk by the encoder.
enum class ValueEncoding : uint8_t {
  kDecimal = 0,  // value == m / 10^e exactly for integer m: delta-coded m's
  kXor = 1,      // XOR with the previous value's bits (for values that are not short decimals)
};

// Bounds that make every count read from a chunk trustworthy before anything is allocated
// (docs/store-format.md, "Limits"): the writer never exceeds them, the decoders refuse a chunk
// that claims more, or more than its decompressed bytes could encode (a value takes at least
// 2 bytes, an event at least 11).
inline constexpr size_t kMaxMetricChunkValues = size_t{1} << 20;
inline constexpr size_t kMaxEventChunkEvents = size_t{1} << 18;
// One event's args beyond this are not stored (the writer drops them and counts
// "dropped_event_args"), so a chunk's args stay within kMaxEventChunkArgsBytes plus this.
inline constexpr size_t kMaxEventArgsBytes = size_t{32} << 20;

// Encodes a series' samples (timestamps ascending) into one blob (zstd, or the raw bytes when
// zstd would not make them smaller). Lossless. With `times_id` > 0 (store format 2) the chunk
// holds only its values and refers to the timestamps stored once in metric_times row
// `times_id` (EncodeMetricTimes of the same `ts_ns`), shared by the series of one tick.
std::string EncodeMetricChunk(std::span<const int64_t> ts_ns, std::span<const double> values,
                              int zstd_level, int64_t times_id = 0);

// A shared timestamp column (a metric_times row): the timestamps of `count` values that
// metric_times row `id` must hold, or an error naming what is wrong. The span stays valid until
// the next call.
using MetricTimesLookup =
    std::function<StatusOr<std::span<const int64_t>>(int64_t id, size_t count)>;

// Appends the chunk's samples to `ts_ns` and `values`. DataLoss on any inconsistency; a chunk
// that refers to shared timestamps needs `times` (DataLoss without it).
Status DecodeMetricChunk(std::string_view blob, size_t expected_count, std::vector<int64_t>* ts_ns,
                         std::vector<double>* values, const MetricTimesLookup* times = nullptr);

// The timestamp column of metric_times (format 2): delta-of-delta coded like a chunk's own.
std::string EncodeMetricTimes(std::span<const int64_t> ts_ns, int zstd_level);
// Replaces `ts_ns` with the column's timestamps; DataLoss unless it holds `expected_count`.
Status DecodeMetricTimes(std::string_view blob, size_t expected_count, std::vector<int64_t>* ts_ns);

// Events as stored: strings replaced by ids into the node's `strings` table (0 means "").
struct EncodedEvent {
  model::EventKind kind = model::EventKind::kSpan;
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  uint32_t name_id = 0;
  uint32_t category_id = 0;
  uint32_t mode_id = 0;
  int64_t step = model::kMissing;
  int64_t pid = model::kMissing;
  int64_t tid = model::kMissing;
  int64_t rank = model::kMissing;
  std::string args;
};

// The writer closes an event chunk once this much args text is in it (so that a chunk stays
// within what the decoder accepts: 64 MiB of args plus 101 bytes per event).
inline constexpr size_t kMaxEventChunkArgsBytes = size_t{32} << 20;

// Events must be sorted by start_ns.
std::string EncodeEventChunk(std::span<const EncodedEvent> events, int zstd_level);

// Events as the writer buffers them before a flush: one column per field, strings as ids, the
// args of all events in one string. Appending costs no allocation once the columns have grown.
struct EventColumns {
  std::vector<uint8_t> kind;
  std::vector<int64_t> start_ns, duration_ns, step, pid, tid, rank;
  std::vector<uint32_t> name_id, category_id, mode_id;
  std::vector<uint64_t> args_end;  // event i's args are args[args_end[i-1], args_end[i])
  std::string args;

  size_t size() const { return kind.size(); }
  std::string_view Args(size_t i) const {
    const uint64_t begin = i == 0 ? 0 : args_end[i - 1];
    return std::string_view(args).substr(begin, args_end[i] - begin);
  }
  void Clear();
  // Room for this many events and bytes of args without growing (nothing is touched).
  void Reserve(size_t events, size_t args_bytes);
};

// A compression context kept across chunks (creating one per chunk costs more than a small
// chunk's compression). Threads: one user at a time.
class ZstdCompressor {
 public:
  explicit ZstdCompressor(int level);
  ~ZstdCompressor();
  ZstdCompressor(const ZstdCompressor&) = delete;
  ZstdCompressor& operator=(const ZstdCompressor&) = delete;
  void Compress(std::string_view raw, std::string* out);
  // Frees the context's tables and the output room; the next Compress makes them again.
  void Release();

 private:
  void* cctx_;
  int level_;
  // Output room reused between calls and never zeroed: only the pages the compressed bytes
  // reach are touched (resizing `out` to the bound would zero, and fault in, all of it).
  std::unique_ptr<char[]> room_;
  size_t room_bytes_ = 0;
};

// Room for EncodeEventColumns' uncompressed chunk, reused between calls and never zeroed: only
// the pages the chunk reaches are touched. Its bound counts 10 bytes for each varint, which
// mostly take 1 to 3: zero-filling it (a string's resize) faulted in three times the pages the
// chunk needs, a tenth of an import's page faults.
struct EncodeScratch {
  std::unique_ptr<char[]> data;
  size_t capacity = 0;
  char* Room(size_t bytes) {
    if (capacity < bytes) {
      data.reset(new char[bytes]);  // not value-initialized: no page is touched here
      capacity = bytes;
    }
    return data.get();
  }
};

// The same chunk format as EncodeEventChunk, from `columns` taken in `order` (indices whose
// start_ns ascend).
void EncodeEventColumns(const EventColumns& columns, std::span<const uint32_t> order,
                        ZstdCompressor& zstd, EncodeScratch* raw, std::string* out);

// Sorts `order` (indices into `keys`) by key, ties keeping their order: an LSD radix sort on
// the keys' offsets from their minimum, so a flush of 256 Ki events is linear, not n log n.
void StableSortByKey(std::span<const int64_t> keys, std::vector<uint32_t>* order);
Status DecodeEventChunk(std::string_view blob, size_t expected_count,
                        std::vector<EncodedEvent>* out);

// A decoded chunk's events as columns (the chunk's own layout), args viewing the caller's
// decompressed buffer. Columns, not one struct per event: each column is written in one
// sequential pass that stays in cache (a chunk of 42 k events as structs was 3.7 MB written
// eleven times with an 88-byte stride) and read back in one pass per event.
struct EventChunkColumns {
  std::vector<uint8_t> kind;  // model::EventKind
  std::vector<int64_t> start_ns, duration_ns, step, pid, tid, rank;
  std::vector<uint32_t> name_id, category_id, mode_id;
  std::vector<std::string_view> args;  // into `raw`: valid until it changes
  size_t size() const { return start_ns.size(); }
  void Clear();
};

// DecodeEventChunk without copying anything: `raw` (scratch reused between chunks) receives
// the decompressed chunk and `out` is replaced by its events. A reader that keeps a few of the
// events copies only their args (one std::string per event was a third of reading a store).
Status DecodeEventChunkColumns(std::string_view blob, size_t expected_count, std::string* raw,
                               EventChunkColumns* out);

}  // namespace trainprof::store
