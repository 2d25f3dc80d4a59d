#include "store/run_directory.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "base/files.h"
#include "store/schema.h"

namespace trainprof::store {

namespace {

// A directory trainprof may write into: a real directory (no symbolic link, unless
// `may_be_link`: the run directory named by the user), owned by this user, not writable by
// every user. Group-writable is accepted: a team folder's group is trusted by its owner.
Status CheckOwnDirectory(const std::string& dir, bool may_be_link) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return Unavailable(dir + ": " + ErrnoMessage(errno));
  if (S_ISLNK(st.st_mode)) {
    if (!may_be_link) {
      return FailedPrecondition(dir +
                                ": is a symbolic link; trainprof does not write through links "
                                "inside a run directory");
    }
    if (stat(dir.c_str(), &st) != 0) return Unavailable(dir + ": " + ErrnoMessage(errno));
  }
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition(dir + ": exists and is not a directory");
  if (st.st_uid != geteuid()) {
    return FailedPrecondition(dir + ": owned by uid " + std::to_string(st.st_uid) +
                              ", not by this user (uid " + std::to_string(geteuid()) +
                              "): refusing to write into a directory another user controls");
  }
  if (st.st_mode & S_IWOTH) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return FailedPrecondition(dir + ": writable by every user (mode " + mode +
                              "): refusing to write a run there (chmod o-w it)");
  }
  return OkStatus();
}

// Creates `dir` (one level) if needed, then checks it as above (never through a link).
Status MakeOwnDirectory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Unavailable(dir + ": cannot create directory: " + ErrnoMessage(errno));
  }
  return CheckOwnDirectory(dir, /*may_be_link=*/false);
}

}  // namespace

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

Status WriteRunMetadata(const std::string& run_dir, const model::RunMetadata& metadata, bool sync) {
  TP_RETURN_IF_ERROR(MakeDirs(run_dir));
  TP_RETURN_IF_ERROR(CheckRunDirectoryForWriting(run_dir));
  // 0600: run.json holds the command line (secrets redacted, but arguments still tell a lot).
  return WriteFileAtomically(RunJsonPath(run_dir), model::RunMetadataToJson(metadata), 0600, sync);
}

StatusOr<model::RunMetadata> ReadRunMetadata(const std::string& run_dir) {
  std::string path = RunJsonPath(run_dir);
  TP_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return model::RunMetadataFromJson(text, path);
}

StatusOr<std::unique_ptr<NodeStoreWriter>> OpenNodeWriter(const std::string& run_dir,
                                                          const model::NodeInfo& node,
                                                          const WriterOptions& options) {
  TP_RETURN_IF_ERROR(MakeDirs(run_dir));
  TP_RETURN_IF_ERROR(CheckRunDirectoryForWriting(run_dir));
  const std::string nodes = JoinPath(run_dir, kNodesDirName);
  TP_RETURN_IF_ERROR(MakeOwnDirectory(nodes));
  TP_RETURN_IF_ERROR(MakeOwnDirectory(JoinPath(nodes, SanitizeNodeName(node.node))));
  // The store file and its journals are checked by the writer (no links, ours).
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

Status CheckRunDirectoryForWriting(const std::string& run_dir) {
  return CheckOwnDirectory(run_dir.empty() ? "." : run_dir, /*may_be_link=*/true);
}

bool IsRunDirectory(const std::string& dir) {
  return PathExists(RunJsonPath(dir)) || IsDirectory(JoinPath(dir, kNodesDirName));
}

}  // namespace trainprof::store
