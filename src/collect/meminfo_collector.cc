#include "collect/meminfo_collector.h"

#include <array>

#include "base/files.h"
#include "collect/metric_catalog.h"
#include "model/data_quality.h"

namespace trainprof::collect {
namespace {

enum Field { kTotal, kFree, kAvailable, kBuffers, kCached, kSwapTotal, kSwapFree, kNumFields };
constexpr std::array<std::string_view, kNumFields> kKeys = {
    "MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapTotal", "SwapFree"};

}  // namespace

MeminfoCollector::MeminfoCollector(const std::string& proc_root)
    : meminfo_(JoinPath(proc_root, "meminfo"), ProcFile::Kind::kSingleRecord) {}

void MeminfoCollector::Sample(const Tick& /*tick*/, SampleSink& sink) {
  std::string_view text;
  if (!meminfo_.Read(&text)) {
    sink.Count(kReadErrorsCounter, 1);
    return;
  }
  double bytes[kNumFields];
  bool have[kNumFields] = {};
  TextCursor cursor(text);
  std::string_view line;
  int found = 0;
  while (found < kNumFields && cursor.NextLine(&line)) {
    std::string_view key, rest;
    if (!SplitKey(line, &key, &rest)) {
      sink.Count(model::dq::kParseErrors, 1);
      continue;
    }
    for (int f = 0; f < kNumFields; ++f) {
      if (key != kKeys[f]) continue;
      unsigned long long value = 0;
      if (!ParseU64(NextToken(&rest), &value)) {
        sink.Count(model::dq::kParseErrors, 1);
        break;
      }
      // Values are in kB (KiB) unless a line has no unit (page counts, not used here).
      std::string_view unit = NextToken(&rest);
      bytes[f] = static_cast<double>(value) * (unit == "kB" ? 1024.0 : 1.0);
      have[f] = true;
      ++found;
      break;
    }
  }
  if (!have[kTotal]) return;  // nothing meaningful without the total
  const double total = bytes[kTotal];
  sink.Add(metric::kMemoryTotal, "", total);
  double used = -1;
  if (have[kAvailable]) {
    used = total - bytes[kAvailable];
    sink.Add(metric::kMemoryAvailable, "", bytes[kAvailable]);
  } else if (have[kFree] && have[kBuffers] && have[kCached]) {
    // Kernels before 3.14 have no MemAvailable: fall back to what `free` did then.
    used = total - bytes[kFree] - bytes[kBuffers] - bytes[kCached];
  }
  if (used >= 0) {
    sink.Add(metric::kMemoryUsed, "", used);
    if (total > 0) sink.Add(metric::kMemoryUtilization, "", used / total);
  }
  if (have[kFree]) sink.Add(metric::kMemoryFree, "", bytes[kFree]);
  if (have[kCached]) sink.Add(metric::kMemoryCached, "", bytes[kCached]);
  if (have[kBuffers]) sink.Add(metric::kMemoryBuffers, "", bytes[kBuffers]);
  if (have[kSwapTotal]) {
    sink.Add(metric::kSwapTotal, "", bytes[kSwapTotal]);
    if (have[kSwapFree]) sink.Add(metric::kSwapUsed, "", bytes[kSwapTotal] - bytes[kSwapFree]);
  }
}

}  // namespace trainprof::collect
