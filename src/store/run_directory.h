#pragma once
// The run directory: one run, self-describing.
//
//   <run>/run.json                      run metadata (model::RunMetadata), replaced atomically
//   <run>/nodes/<node>/store.sqlite     the node's store (NodeStoreWriter / NodeStoreReader)
//   <run>/nodes/<node>/proc-<pid>.sqlite  stores of instrumented processes on that node, each
//                                       written by its own process (no shared writer needed)
//
// Several nodes may write into one run directory on shared storage, each into its own store.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/run_metadata.h"
#include "store/node_store_writer.h"

namespace trainprof::store {

inline constexpr const char* kRunJsonName = "run.json";
inline constexpr const char* kNodesDirName = "nodes";

std::string RunJsonPath(const std::string& run_dir);
std::string NodeStorePath(const std::string& run_dir, const std::string& node);
// The store an instrumented process writes by itself: nodes/<node>/proc-<pid>.sqlite.
std::string ProcessStorePath(const std::string& run_dir, const std::string& node, int64_t pid);
// Node names become directory names: anything but [A-Za-z0-9._-] turns into '_'.
std::string SanitizeNodeName(const std::string& node);

// Writes run.json atomically (creating the directory), for a new run or an update at its end.
// `sync` false: no fsync (a scratch run, removed after one command).
Status WriteRunMetadata(const std::string& run_dir, const model::RunMetadata& metadata,
                        bool sync = true);
StatusOr<model::RunMetadata> ReadRunMetadata(const std::string& run_dir);

// Opens a writer for `node`'s store in `run_dir`.
StatusOr<std::unique_ptr<NodeStoreWriter>> OpenNodeWriter(const std::string& run_dir,
                                                          const model::NodeInfo& node,
                                                          const WriterOptions& options = {});

// The node directories present in a run (store file names are not checked here).
StatusOr<std::vector<std::string>> ListNodeDirs(const std::string& run_dir);
// Every store file of a run: per node directory, store.sqlite first, then the process stores.
StatusOr<std::vector<std::string>> ListStoreFiles(const std::string& run_dir);

// Refuses a run directory that someone else could tamper with before trainprof writes into it:
// owned by another user, or writable by every user (sticky or not). The directory named by
// the caller may itself be reached through a symbolic link; nothing inside it may be.
Status CheckRunDirectoryForWriting(const std::string& run_dir);

// Whether `dir` looks like a run directory (has run.json or nodes/).
bool IsRunDirectory(const std::string& dir);

}  // namespace trainprof::store
