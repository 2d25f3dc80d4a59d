#pragma once
// Names of data-quality counters. Bad input is not an error: it bumps one of these, they are
// stored with the run, and `trainprof show` and the report display them. Keep names stable.

namespace trainprof::model::dq {

inline constexpr const char* kDroppedEvents = "dropped_events";        // recorder buffers full
inline constexpr const char* kDroppedSamples = "dropped_samples";      // writer could not keep up
inline constexpr const char* kSamplingOverruns = "sampling_overruns";  // a tick took > interval
inline constexpr const char* kParseErrors = "parse_errors";            // unreadable input lines
inline constexpr const char* kCorruptChunks = "corrupt_chunks";        // reader skipped a chunk
inline constexpr const char* kWriteErrors = "write_errors";            // store writes that failed
inline constexpr const char* kClockSkewEvents = "clock_skew_events";   // timestamps out of range

}  // namespace trainprof::model::dq
