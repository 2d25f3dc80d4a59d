#include "base/time.h"

#include <time.h>

#include <cinttypes>
#include <cstdio>

namespace trainprof {
namespace {

int64_t ClockNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

tm UtcTm(int64_t ts_ns) {
  time_t secs = static_cast<time_t>(ts_ns / kNanosPerSecond);
  if (ts_ns < 0 && ts_ns % kNanosPerSecond != 0) --secs;
  tm out{};
  gmtime_r(&secs, &out);
  return out;
}

}  // namespace

int64_t WallNowNs() { return ClockNs(CLOCK_REALTIME); }
int64_t MonotonicNowNs() { return ClockNs(CLOCK_MONOTONIC); }
int64_t ThreadCpuNs() { return ClockNs(CLOCK_THREAD_CPUTIME_ID); }

std::string FormatIso8601(int64_t ts_ns) {
  tm t = UtcTm(ts_ns);
  int64_t ms = ((ts_ns % kNanosPerSecond) + kNanosPerSecond) % kNanosPerSecond / kNanosPerMilli;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03" PRId64 "Z", t.tm_year + 1900,
                t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, ms);
  return buf;
}

std::string FormatCompactUtc(int64_t ts_ns) {
  tm t = UtcTm(ts_ns);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d%02d%02dT%02d%02d%02dZ", t.tm_year + 1900, t.tm_mon + 1,
                t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec);
  return buf;
}

std::string FormatDuration(int64_t duration_ns) {
  char buf[64];
  if (duration_ns < 0) return "-" + FormatDuration(-duration_ns);
  if (duration_ns < kNanosPerMilli) {
    std::snprintf(buf, sizeof buf, "%.1f us", static_cast<double>(duration_ns) / kNanosPerMicro);
  } else if (duration_ns < kNanosPerSecond) {
    std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(duration_ns) / kNanosPerMilli);
  } else if (duration_ns < 60 * kNanosPerSecond) {
    std::snprintf(buf, sizeof buf, "%.2f s", static_cast<double>(duration_ns) / kNanosPerSecond);
  } else {
    int64_t s = duration_ns / kNanosPerSecond;
    std::snprintf(buf, sizeof buf, "%" PRId64 "h %02" PRId64 "m %02" PRId64 "s", s / 3600,
                  s / 60 % 60, s % 60);
  }
  return buf;
}

}  // namespace trainprof
