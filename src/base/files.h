#pragma once
// Small file helpers on POSIX: whole-file reads, atomic replacement, directory listing.

#include <string>
#include <vector>

#include "base/status.h"

namespace trainprof {

StatusOr<std::string> ReadFileToString(const std::string& path);
// Writes a new temporary file beside `path`, fsyncs it, renames it over `path`: readers see
// the old or the new file. The temporary file has an unpredictable name and is created with
// O_CREAT|O_EXCL|O_NOFOLLOW, so nothing planted in the directory (a symbolic link at a guessed
// name) is ever written through; a symbolic link at `path` itself is replaced, not followed.
// `mode` is asked for exactly (the umask does not widen or narrow it): run files holding the
// command line use 0600. `sync` false skips the fsync: for a scratch file nobody keeps.
Status WriteFileAtomically(const std::string& path, const std::string& contents,
                           unsigned mode = 0644, bool sync = true);
Status MakeDirs(const std::string& path);
bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);
// Names (not paths) of the entries of `dir`, sorted; "." and ".." left out.
StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir);
std::string JoinPath(const std::string& a, const std::string& b);
// Errno as text: "No such file or directory".
std::string ErrnoMessage(int err);

}  // namespace trainprof
