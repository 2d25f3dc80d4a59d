#pragma once
// The runs a dashboard serves: every run directory under the configured roots (a root may
// itself be a run), found by a bounded walk that follows no symlinks. Clients name a run by its
// id -- a hash of its path relative to its root -- never by a path, so no request can reach a
// file outside the roots: an unknown id is simply not found.
//
// Threads: all methods may be called from any thread (one mutex).

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace trainprof::serve {

struct IndexedRun {
  std::string id;    // 16 hex digits
  std::string dir;   // absolute path
  std::string path;  // relative to its root ("" when the root is the run)
  std::string root;
};

inline constexpr int kMaxWalkDepth = 4;
inline constexpr size_t kMaxRuns = 100000;

// The id of `relative` under root number `root_index`.
std::string RunId(size_t root_index, const std::string& relative);

class RunIndex {
 public:
  explicit RunIndex(std::vector<std::string> roots);
  // Walks the roots again (at most every `min_interval_ns`; 0: now).
  Status Rescan(int64_t min_interval_ns = 0);
  std::vector<IndexedRun> Runs();
  std::optional<IndexedRun> Find(const std::string& id);
  const std::vector<std::string>& roots() const { return roots_; }

 private:
  std::vector<std::string> roots_;
  std::mutex mu_;
  std::map<std::string, IndexedRun> runs_;  // by id
  int64_t scanned_ns_ = 0;
};

}  // namespace trainprof::serve
