#include "importers/common/run_builder.h"

#include <filesystem>
#include <system_error>

#include "base/files.h"
#include "base/time.h"
#include "store/run_directory.h"
#include "trainprof/version.h"

namespace trainprof::importers {

StatusOr<std::unique_ptr<RunBuilder>> RunBuilder::Create(const std::string& dir,
                                                         const std::string& name,
                                                         const std::string& source,
                                                         std::vector<std::string> command,
                                                         bool scratch) {
  if (dir.empty()) return InvalidArgument("import needs --out RUN_DIR");
  if (store::IsRunDirectory(dir)) {
    return FailedPrecondition(dir + ": already holds a run; import into a new directory");
  }
  TP_RETURN_IF_ERROR(MakeDirs(dir));
  std::unique_ptr<RunBuilder> b(new RunBuilder());
  b->dir_ = dir;
  b->scratch_ = scratch;
  std::string base = name;
  if (base.empty()) {
    std::string d = dir;
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    size_t slash = d.rfind('/');
    base = slash == std::string::npos ? d : d.substr(slash + 1);
  }
  int64_t now = WallNowNs();
  b->meta_.name = base;
  b->meta_.run_id = model::NewRunId(base, now);
  b->meta_.source = source;
  b->meta_.command = std::move(command);
  b->meta_.trainprof_version = kVersion;
  b->meta_.start_ns = now;
  return b;
}

RunBuilder::~RunBuilder() {
  if (!finished_) {
    for (auto& [name, w] : writers_) (void)w->Close();
  }
}

StatusOr<store::NodeStoreWriter*> RunBuilder::Node(const model::NodeInfo& node) {
  // One writer per store file: names that differ only in characters a directory name cannot
  // hold ("a b", "a:b") share nodes/a_b/ and so its writer, instead of a second writer waiting
  // on the first one's lock.
  const std::string key = store::SanitizeNodeName(node.node);
  auto it = writers_.find(key);
  if (it != writers_.end()) return it->second.get();
  store::WriterOptions options;
  options.max_events_per_chunk = 65536;
  options.sync_every_flush = false;  // one sync at Close, not one per flush
  options.sync_at_close = !scratch_;
  if (scratch_) options.zstd_level = 1;
  TP_ASSIGN_OR_RETURN(auto w, store::OpenNodeWriter(dir_, node, options));
  store::NodeStoreWriter* raw = w.get();
  writers_.emplace(key, std::move(w));
  return raw;
}

std::vector<std::string> RunBuilder::node_names() const {
  std::vector<std::string> out;
  for (const auto& [name, w] : writers_) out.push_back(name);
  return out;
}

Status RunBuilder::Finish() {
  finished_ = true;
  Status first;
  for (auto& [name, w] : writers_) {
    Status s = w->Close();
    if (!s.ok() && first.ok()) first = s.WithContext("node " + name);
  }
  if (has_time()) {
    meta_.start_ns = min_ns_;
    meta_.end_ns = max_ns_;
  }
  meta_.instance_count = static_cast<int>(writers_.size());
  TP_RETURN_IF_ERROR(store::WriteRunMetadata(dir_, meta_, /*sync=*/!scratch_));
  return first;
}

Status RefuseFilesGivenTwice(const std::vector<std::string>& paths) {
  std::map<std::string, std::string> given;  // canonical path -> as given
  for (const std::string& path : paths) {
    std::error_code ec;
    std::string canonical = std::filesystem::weakly_canonical(path, ec).string();
    if (ec) canonical = path;
    auto [it, inserted] = given.emplace(canonical, path);
    if (!inserted) {
      return InvalidArgument(path + ": given twice (also as " + it->second +
                             "); each file is imported once");
    }
  }
  return OkStatus();
}

std::string UnusedName(const std::string& wanted, const std::set<std::string>& taken) {
  std::string name = wanted;
  for (int n = 2; taken.count(name); ++n) name = wanted + "-" + std::to_string(n);
  return name;
}

std::string FileStem(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string s = slash == std::string::npos ? path : path.substr(slash + 1);
  for (const char* ext : {".gz", ".json", ".trace", ".pt"}) {
    std::string e = ext;
    if (s.size() > e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0) {
      s.resize(s.size() - e.size());
    }
  }
  return s;
}

}  // namespace trainprof::importers
