#pragma once
// Helpers shared by the store tests.

#include <stdlib.h>

#include <string>

#include "base/test_dir.h"
#include "model/run_metadata.h"
#include "store/sqlite_db.h"

namespace trainprof::store::testing {

// The creation time a node store file holds (meta created_ns), or "" when it cannot be read:
// two stores made alike differ by it alone.
inline std::string StoreCreatedNs(const std::string& store_path) {
  auto db = SqliteDb::Open(store_path, SqliteDb::Mode::kReadOnly);
  if (!db.ok()) return "";
  auto st = (*db)->Prepare("SELECT value FROM meta WHERE key = 'created_ns'");
  if (!st.ok()) return "";
  Status status;
  return st->Step(&status) ? std::string(st->Text(0)) : "";
}

inline std::string MakeTempDir(const std::string& prefix = "trainprof_test") {
  return MakeTestDir(prefix);
}

inline model::NodeInfo TestNode(const std::string& name = "node0") {
  model::NodeInfo n;
  n.node = name;
  n.hostname = name + ".local";
  n.cpu_model = "Test CPU";
  n.cpu_cores = 32;
  n.memory_total_bytes = 64LL << 30;
  return n;
}

}  // namespace trainprof::store::testing
