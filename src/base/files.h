#pragma once
// Small file helpers on POSIX: whole-file reads, atomic replacement, directory listing.

#include <string>
#include <vector>

#include "base/status.h"

namespace trainprof {

StatusOr<std::string> ReadFileToString(const std::string& path);
// Writes to "<path>.tmp.<pid>", fsyncs, renames over `path`: readers see the old or the new file.
Status WriteFileAtomically(const std::string& path, const std::string& contents);
Status MakeDirs(const std::string& path);
bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);
// Names (not paths) of the entries of `dir`, sorted; "." and ".." left out.
StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir);
std::string JoinPath(const std::string& a, const std::string& b);
// Errno as text: "No such file or directory".
std::string ErrnoMessage(int err);

}  // namespace trainprof
