#include "store/sqlite_db.h"

#include <memory>

namespace trainprof::store {

StatusCode SqliteStatusCode(int rc) {
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_FORMAT:
      return StatusCode::kDataLoss;
    case SQLITE_CANTOPEN:
      return StatusCode::kNotFound;
    case SQLITE_FULL:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return StatusCode::kUnavailable;
    default:
      return StatusCode::kInternal;
  }
}

SqliteStmt& SqliteStmt::operator=(SqliteStmt&& o) noexcept {
  if (this != &o) {
    sqlite3_finalize(stmt_);
    stmt_ = o.stmt_;
    path_ = o.path_;
    o.stmt_ = nullptr;
  }
  return *this;
}

SqliteStmt::~SqliteStmt() { sqlite3_finalize(stmt_); }

SqliteStmt& SqliteStmt::Bind(int index, int64_t v) {
  sqlite3_bind_int64(stmt_, index, v);
  return *this;
}
SqliteStmt& SqliteStmt::Bind(int index, double v) {
  sqlite3_bind_double(stmt_, index, v);
  return *this;
}
SqliteStmt& SqliteStmt::Bind(int index, std::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}
SqliteStmt& SqliteStmt::BindBlob(int index, std::string_view bytes) {
  sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}
SqliteStmt& SqliteStmt::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

bool SqliteStmt::Step(Status* status) {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) {
    sqlite3* db = sqlite3_db_handle(stmt_);
    *status =
        Status(SqliteStatusCode(rc), (path_ ? *path_ + ": " : std::string()) + sqlite3_errmsg(db));
  }
  return false;
}

Status SqliteStmt::Run() {
  Status status;
  while (Step(&status)) {
  }
  Reset();
  return status;
}

void SqliteStmt::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string_view SqliteStmt::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(n))
           : std::string_view();
}

std::string_view SqliteStmt::Blob(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string_view(static_cast<const char*>(p), static_cast<size_t>(n))
           : std::string_view();
}

StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path, Mode mode) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
  flags |=
      mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Status(SqliteStatusCode(rc), path + ": cannot open: " + msg);
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<SqliteDb>(new SqliteDb(db, path));
}

SqliteDb::~SqliteDb() {
  cached_.clear();  // finalize before closing
  sqlite3_close_v2(db_);
}

Status SqliteDb::Error(int rc, const std::string& what) const {
  return Status(SqliteStatusCode(rc), path_ + ": " + what + ": " + sqlite3_errmsg(db_));
}

Status SqliteDb::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return Status(SqliteStatusCode(rc), path_ + ": " + msg);
  }
  return OkStatus();
}

StatusOr<SqliteStmt> SqliteDb::Prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing '" + sql.substr(0, 60) + "'");
  return SqliteStmt(stmt, &path_);
}

StatusOr<SqliteDb::Lease> SqliteDb::Cached(const std::string& sql) {
  auto it = cached_.find(sql);
  if (it == cached_.end()) {
    TP_ASSIGN_OR_RETURN(SqliteStmt stmt, Prepare(sql));
    it = cached_.emplace(sql, std::move(stmt)).first;
  }
  it->second.Reset();
  return Lease(&it->second);
}

}  // namespace trainprof::store
