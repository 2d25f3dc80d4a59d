#pragma once
// A thin RAII layer over the SQLite C API that turns result codes into Status values naming
// the database file. Not thread-safe: each thread that touches a store owns its own SqliteDb.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"

namespace trainprof::store {

class SqliteStmt {
 public:
  SqliteStmt() = default;
  SqliteStmt(sqlite3_stmt* stmt, const std::string* path) : stmt_(stmt), path_(path) {}
  SqliteStmt(SqliteStmt&& o) noexcept : stmt_(o.stmt_), path_(o.path_) { o.stmt_ = nullptr; }
  SqliteStmt& operator=(SqliteStmt&& o) noexcept;
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;
  ~SqliteStmt();

  SqliteStmt& Bind(int index, int64_t v);
  SqliteStmt& Bind(int index, double v);
  SqliteStmt& Bind(int index, std::string_view text);
  SqliteStmt& BindBlob(int index, std::string_view bytes);
  SqliteStmt& BindNull(int index);

  // Advances: true when a row is ready, false when done; errors go to *status.
  bool Step(Status* status);
  // Runs a statement that returns no rows, then resets it for reuse.
  Status Run();
  void Reset();

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string_view Text(int col) const;
  std::string_view Blob(int col) const;

 private:
  sqlite3_stmt* stmt_ = nullptr;
  const std::string* path_ = nullptr;
};

class SqliteDb {
 public:
  enum class Mode { kReadOnly, kReadWriteCreate };

  static StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path, Mode mode);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  Status Exec(const std::string& sql);
  StatusOr<SqliteStmt> Prepare(const std::string& sql);

  // A statement prepared once per connection and reused: a live reader runs the same few
  // queries every poll, and parsing them was a good part of the poll. The lease resets the
  // statement when dropped, so no query keeps a read transaction (and its snapshot) open.
  // Not re-entrant: one lease per SQL text at a time.
  class Lease {
   public:
    explicit Lease(SqliteStmt* stmt) : stmt_(stmt) {}
    Lease(Lease&& o) noexcept : stmt_(o.stmt_) { o.stmt_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (stmt_) stmt_->Reset();
    }
    SqliteStmt* operator->() const { return stmt_; }
    SqliteStmt& operator*() const { return *stmt_; }

   private:
    SqliteStmt* stmt_;
  };
  StatusOr<Lease> Cached(const std::string& sql);
  int64_t LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
  const std::string& path() const { return path_; }
  sqlite3* raw() { return db_; }

  // Status for the connection's last error: "<path>: <sqlite message>".
  Status Error(int rc, const std::string& what) const;

 private:
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
  std::unordered_map<std::string, SqliteStmt> cached_;
};

// Maps an SQLite result code to our status codes (corruption is kDataLoss, a full disk or a
// busy database kUnavailable).
StatusCode SqliteStatusCode(int rc);

}  // namespace trainprof::store
