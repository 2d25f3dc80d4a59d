#include "store/run_directory.h"

#include "base/files.h"
#include "store/schema.h"

namespace trainprof::store {

std::string RunJsonPath(const std::string& run_dir) { return JoinPath(run_dir, kRunJsonName); }

std::string SanitizeNodeName(const std::string& node) {
  std::string out = node.empty() ? "node" : node;
  for (char& c : out) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out == "." || out == "..") out = "_" + out;
  return out;
}

std::string NodeStorePath(const std::string& run_dir, const std::string& node) {
  return JoinPath(JoinPath(JoinPath(run_dir, kNodesDirName), SanitizeNodeName(node)),
                  kStoreFileName);
}

std::string ProcessStorePath(const std::string& run_dir, const std::string& node, int64_t pid) {
  return JoinPath(JoinPath(JoinPath(run_dir, kNodesDirName), SanitizeNodeName(node)),
                  "proc-" + std::to_string(pid) + ".sqlite");
}

Status WriteRunMetadata(const std::string& run_dir, const model::RunMetadata& metadata) {
  TP_RETURN_IF_ERROR(MakeDirs(run_dir));
  return WriteFileAtomically(RunJsonPath(run_dir), model::RunMetadataToJson(metadata));
}

StatusOr<model::RunMetadata> ReadRunMetadata(const std::string& run_dir) {
  std::string path = RunJsonPath(run_dir);
  TP_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return model::RunMetadataFromJson(text, path);
}

StatusOr<std::unique_ptr<NodeStoreWriter>> OpenNodeWriter(const std::string& run_dir,
                                                          const model::NodeInfo& node,
                                                          const WriterOptions& options) {
  return NodeStoreWriter::Open(NodeStorePath(run_dir, node.node), node, options);
}

StatusOr<std::vector<std::string>> ListNodeDirs(const std::string& run_dir) {
  std::string nodes_dir = JoinPath(run_dir, kNodesDirName);
  if (!IsDirectory(nodes_dir)) return std::vector<std::string>{};
  TP_ASSIGN_OR_RETURN(auto names, ListDirectory(nodes_dir));
  std::vector<std::string> out;
  for (auto& name : names) {
    if (IsDirectory(JoinPath(nodes_dir, name))) out.push_back(std::move(name));
  }
  return out;
}

StatusOr<std::vector<std::string>> ListStoreFiles(const std::string& run_dir) {
  TP_ASSIGN_OR_RETURN(auto node_dirs, ListNodeDirs(run_dir));
  std::vector<std::string> out;
  for (const auto& name : node_dirs) {
    std::string dir = JoinPath(JoinPath(run_dir, kNodesDirName), name);
    TP_ASSIGN_OR_RETURN(auto files, ListDirectory(dir));
    std::string main_store = JoinPath(dir, kStoreFileName);
    bool has_main = false;
    std::vector<std::string> others;
    for (const auto& f : files) {
      if (f.size() < 7 || f.compare(f.size() - 7, 7, ".sqlite") != 0) continue;
      if (f == kStoreFileName) {
        has_main = true;
      } else {
        others.push_back(JoinPath(dir, f));
      }
    }
    // A node directory without any store is reported by the reader (missing store.sqlite).
    if (has_main || others.empty()) out.push_back(main_store);
    out.insert(out.end(), others.begin(), others.end());
  }
  return out;
}

bool IsRunDirectory(const std::string& dir) {
  return PathExists(RunJsonPath(dir)) || IsDirectory(JoinPath(dir, kNodesDirName));
}

}  // namespace trainprof::store
