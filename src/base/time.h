#pragma once
// Clocks and time formatting. Inside trainprof every timestamp is int64 nanoseconds since the
// Unix epoch (CLOCK_REALTIME), every duration int64 nanoseconds.

#include <cstdint>
#include <string>

namespace trainprof {

inline constexpr int64_t kNanosPerMicro = 1000;
inline constexpr int64_t kNanosPerMilli = 1000 * 1000;
inline constexpr int64_t kNanosPerSecond = 1000 * 1000 * 1000;

// Wall clock, ns since the Unix epoch.
int64_t WallNowNs();
// CLOCK_MONOTONIC in ns: for intervals and schedules, never stored.
int64_t MonotonicNowNs();
// CPU time of the calling thread in ns: what a piece of work cost, not how long it waited.
int64_t ThreadCpuNs();

// "2026-11-30T15:21:56.123Z" (UTC, millisecond precision).
std::string FormatIso8601(int64_t ts_ns);
// "20261130T152156Z", for directory names.
std::string FormatCompactUtc(int64_t ts_ns);
// "1h 02m 03s", "2.5 s", "120 ms" for people.
std::string FormatDuration(int64_t duration_ns);

}  // namespace trainprof
