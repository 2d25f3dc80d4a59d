#include "serve/run_index.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "base/files.h"
#include "base/time.h"
#include "store/run_directory.h"

namespace trainprof::serve {
namespace {

uint64_t Fnv1a(const std::string& text, uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

bool IsRealDirectory(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void Walk(size_t root_index, const std::string& root, const std::string& relative, int depth,
          std::map<std::string, IndexedRun>* out) {
  if (out->size() >= kMaxRuns) return;
  const std::string dir = relative.empty() ? root : JoinPath(root, relative);
  if (store::IsRunDirectory(dir)) {
    IndexedRun r;
    r.id = RunId(root_index, relative);
    r.dir = dir;
    r.path = relative;
    r.root = root;
    (*out)[r.id] = r;
    return;  // runs do not nest
  }
  if (depth >= kMaxWalkDepth) return;
  auto names = ListDirectory(dir);
  if (!names.ok()) return;
  for (const std::string& name : *names) {
    if (name.empty() || name[0] == '.') continue;
    const std::string child = relative.empty() ? name : relative + "/" + name;
    if (!IsRealDirectory(JoinPath(root, child))) continue;  // no symlinks, no files
    Walk(root_index, root, child, depth + 1, out);
  }
}

}  // namespace

std::string RunId(size_t root_index, const std::string& relative) {
  char buf[17];
  std::snprintf(
      buf, sizeof buf, "%016llx",
      static_cast<unsigned long long>(Fnv1a(std::to_string(root_index) + ":" + relative)));
  return buf;
}

RunIndex::RunIndex(std::vector<std::string> roots) : roots_(std::move(roots)) {}

Status RunIndex::Rescan(int64_t min_interval_ns) {
  const int64_t now = MonotonicNowNs();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (min_interval_ns > 0 && scanned_ns_ != 0 && now - scanned_ns_ < min_interval_ns) {
      return OkStatus();
    }
  }
  std::map<std::string, IndexedRun> found;
  for (size_t i = 0; i < roots_.size(); ++i) Walk(i, roots_[i], "", 0, &found);
  std::lock_guard<std::mutex> lock(mu_);
  runs_ = std::move(found);
  scanned_ns_ = now;
  return OkStatus();
}

std::vector<IndexedRun> RunIndex::Runs() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<IndexedRun> out;
  for (const auto& [id, r] : runs_) out.push_back(r);
  return out;
}

std::optional<IndexedRun> RunIndex::Find(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_.find(id);
  if (it == runs_.end()) return std::nullopt;
  return it->second;
}

}  // namespace trainprof::serve
