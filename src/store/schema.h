#pragma once
// The node store's SQLite schema (docs/store-format.md is the reference for outside readers).

#include "base/status.h"
#include "store/sqlite_db.h"

namespace trainprof::store {

// Bump on any incompatible change; readers refuse a newer version with a clear message.
// 2: metric chunks may share one timestamp column (metric_times); chunks may be stored raw.
// Version 1 stores are read as before, and a writer appending to one marks it 2.
inline constexpr int kStoreFormatVersion = 2;

// File name of a node's store inside <run>/nodes/<node>/.
inline constexpr const char* kStoreFileName = "store.sqlite";

// Creates the tables (idempotent) and records the format version.
Status CreateSchema(SqliteDb& db);
// Reads meta.format_version; FailedPrecondition if newer than kStoreFormatVersion.
StatusOr<int> CheckFormatVersion(SqliteDb& db);

}  // namespace trainprof::store
