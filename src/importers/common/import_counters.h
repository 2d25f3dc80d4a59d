#pragma once
// Data-quality counters the importers add to a node's store (beside model/data_quality.h's
// parse_errors). Each names what was skipped or repaired, so nothing is dropped silently.

namespace trainprof::importers::dq {

inline constexpr const char* kEventsWithoutTimestamp = "import_events_without_timestamp";
inline constexpr const char* kEventsWithoutDuration = "import_events_without_duration";
inline constexpr const char* kAbsurdDurations = "import_absurd_durations";  // < 0 or > 30 days
inline constexpr const char* kInvalidEvents = "import_invalid_events";      // not an object...
inline constexpr const char* kUnknownPhases = "import_unknown_phases";      // ph not understood
inline constexpr const char* kUnmatchedBegins = "import_unmatched_begin_events";
inline constexpr const char* kUnmatchedEnds = "import_unmatched_end_events";
inline constexpr const char* kTruncatedFiles = "import_truncated_files";
inline constexpr const char* kRelativeTimestamps = "import_relative_timestamps";  // no base
// A timestamp (with its file's base) beyond +-2^62 ns, about the year 2116 either side of 1970.
inline constexpr const char* kAbsurdTimestamps = "import_absurd_timestamps";
inline constexpr const char* kOversizedArgs = "import_oversized_args";  // > 16 MiB: not kept
inline constexpr const char* kDeepArgs = "import_args_too_deep";  // nested > 64 levels: not kept
// Track names (process_name/process_labels/thread_name) beyond the per-file bound: not kept.
inline constexpr const char* kTrackNamesDropped = "import_track_names_dropped";

}  // namespace trainprof::importers::dq
