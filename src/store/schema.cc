#include "store/schema.h"

#include <string>

namespace trainprof::store {

Status CreateSchema(SqliteDb& db) {
  // auto_vacuum must be chosen before the first table exists; freed tail chunks are then
  // returned to the OS by the incremental vacuum at close.
  TP_RETURN_IF_ERROR(db.Exec("PRAGMA auto_vacuum = INCREMENTAL"));
  // One transaction for the whole schema: one commit (one sync in WAL mode) instead of one
  // per statement.
  TP_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  Status status = db.Exec(R"sql(
    CREATE TABLE IF NOT EXISTS meta(
      key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS strings(
      id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
    CREATE TABLE IF NOT EXISTS series(
      id INTEGER PRIMARY KEY, metric TEXT NOT NULL, device TEXT NOT NULL,
      UNIQUE(metric, device));
    CREATE TABLE IF NOT EXISTS metric_chunks(
      id INTEGER PRIMARY KEY, series_id INTEGER NOT NULL, first_ns INTEGER NOT NULL,
      last_ns INTEGER NOT NULL, count INTEGER NOT NULL, sealed INTEGER NOT NULL,
      data BLOB NOT NULL);
    CREATE INDEX IF NOT EXISTS metric_chunks_by_series_time
      ON metric_chunks(series_id, last_ns);
    CREATE TABLE IF NOT EXISTS metric_times(
      id INTEGER PRIMARY KEY, count INTEGER NOT NULL, data BLOB NOT NULL);
    CREATE TABLE IF NOT EXISTS event_chunks(
      id INTEGER PRIMARY KEY, first_start_ns INTEGER NOT NULL, last_start_ns INTEGER NOT NULL,
      max_end_ns INTEGER NOT NULL, count INTEGER NOT NULL, data BLOB NOT NULL);
    CREATE INDEX IF NOT EXISTS event_chunks_by_time ON event_chunks(first_start_ns);
    CREATE TABLE IF NOT EXISTS findings(
      id INTEGER PRIMARY KEY, rule TEXT NOT NULL, severity TEXT NOT NULL, node TEXT NOT NULL,
      device TEXT NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
      message TEXT NOT NULL, recommendation TEXT NOT NULL, evidence TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS counters(
      name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS annotations(
      id INTEGER PRIMARY KEY, ts_ns INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL);
  )sql");
  if (status.ok()) {
    status = db.Exec("INSERT OR IGNORE INTO meta(key, value) VALUES('format_version', '" +
                     std::to_string(kStoreFormatVersion) + "')");
  }
  if (!status.ok()) {
    (void)db.Exec("ROLLBACK");
    return status;
  }
  return db.Exec("COMMIT");
}

StatusOr<int> CheckFormatVersion(SqliteDb& db) {
  TP_ASSIGN_OR_RETURN(SqliteStmt stmt,
                      db.Prepare("SELECT value FROM meta WHERE key = 'format_version'"));
  Status status;
  if (!stmt.Step(&status)) {
    if (!status.ok()) return status;
    return DataLoss(db.path() + ": not a trainprof store (no format_version in meta)");
  }
  std::string text(stmt.Text(0));
  int version = 0;
  try {
    version = std::stoi(text);
  } catch (...) {
    return DataLoss(db.path() + ": format_version '" + text + "' is not a number");
  }
  if (version > kStoreFormatVersion) {
    return FailedPrecondition(db.path() + ": store format version " + std::to_string(version) +
                              " is newer than this trainprof reads (" +
                              std::to_string(kStoreFormatVersion) + "); upgrade trainprof");
  }
  return version;
}

}  // namespace trainprof::store
