// libFuzzer target: the store's chunk decoders fed hostile chunks (issue 20): the count a chunk
// row claims and the compressed bytes are both attacker's. Byte 0 chooses the case, bytes 1-4
// the claimed count; the rest is either the stored blob itself or material for a genuine chunk
// (so that the fuzzer reaches the column decoders), one byte of which is then patched. Bit 3
// makes the metric chunk refer to a shared timestamp column (store format 2, metric_times),
// which the lookup decodes from the same material (hostile too).
// Invariants: no crash, no allocation beyond the limits (ASan's malloc limit catches those),
// and a decode that succeeds yields exactly the claimed number of rows.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/codec.h"

namespace {

using namespace trainprof;
using namespace trainprof::store;

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const uint8_t mode = data[0];
  uint32_t claimed = 0;
  std::memcpy(&claimed, data + 1, 4);
  std::string_view rest(reinterpret_cast<const char*>(data) + 5, size - 5);
  // Small claims most of the time (they reach the decoders), sometimes huge ones.
  const size_t count = (mode & 0x80) ? claimed : claimed % 4096;
  std::string metric_blob, event_blob, times_blob;
  if (mode & 1) {
    metric_blob = event_blob = times_blob = std::string(rest);
  } else {
    std::vector<int64_t> ts;
    std::vector<double> values;
    std::vector<EncodedEvent> events;
    int64_t t = 1'700'000'000'000'000'000;
    for (size_t i = 0; i + 2 <= rest.size() && ts.size() < 4096; i += 2) {
      t += static_cast<uint8_t>(rest[i]) * 1000;
      ts.push_back(t);
      values.push_back((mode & 2) ? static_cast<uint8_t>(rest[i + 1]) / 10.0
                                  : static_cast<double>(static_cast<int8_t>(rest[i + 1])) * 1e-7);
      EncodedEvent e;
      e.start_ns = t;
      e.duration_ns = static_cast<uint8_t>(rest[i + 1]);
      e.name_id = static_cast<uint8_t>(rest[i]);
      e.args = std::string(rest.substr(i, 2));
      events.push_back(e);
    }
    metric_blob = EncodeMetricChunk(ts, values, 1, (mode & 8) ? 1 : 0);
    event_blob = EncodeEventChunk(events, 1);
    times_blob = EncodeMetricTimes(ts, 1);
    if ((mode & 4) && !rest.empty()) {
      const size_t at = static_cast<uint8_t>(rest[0]);
      metric_blob[at % metric_blob.size()] ^= static_cast<char>(rest.back() | 1);
      event_blob[at % event_blob.size()] ^= static_cast<char>(rest.back() | 1);
      if (mode & 16) times_blob[at % times_blob.size()] ^= static_cast<char>(rest.back() | 1);
    }
  }
  std::vector<int64_t> ts_out;
  std::vector<double> values_out;
  std::vector<int64_t> column;
  MetricTimesLookup lookup = [&](int64_t id, size_t n) -> StatusOr<std::span<const int64_t>> {
    if (id != 1) return DataLoss("no such row");
    TP_RETURN_IF_ERROR(DecodeMetricTimes(times_blob, n, &column));
    Check(column.size() == n && n <= kMaxMetricChunkValues);
    return std::span<const int64_t>(column);
  };
  if (DecodeMetricChunk(metric_blob, count, &ts_out, &values_out, &lookup).ok()) {
    Check(ts_out.size() == count && values_out.size() == count);
    Check(count <= kMaxMetricChunkValues);
  } else {
    Check(ts_out.empty() && values_out.empty());
  }
  if (DecodeMetricTimes(times_blob, count, &column).ok()) Check(column.size() == count);
  std::vector<EncodedEvent> events_out;
  if (DecodeEventChunk(event_blob, count, &events_out).ok()) {
    Check(events_out.size() == count && count <= kMaxEventChunkEvents);
  }
  return 0;
}
