#include "base/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "base/platform.h"

namespace trainprof {

std::string ErrnoMessage(int err) { return std::strerror(err); }

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  if (a.back() == '/') return a + b;
  return a + "/" + b;
}

StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFound(path + ": no such file");
    return Unavailable(path + ": " + ErrnoMessage(err));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return Unavailable(path + ": read failed: " + ErrnoMessage(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

Status WriteFileAtomically(const std::string& path, const std::string& contents, unsigned mode,
                           bool sync) {
  // A random suffix from the kernel: another user cannot guess the name, and O_EXCL refuses
  // one that exists (a planted symbolic link included) rather than following it.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    uint64_t r = 0;
    if (!platform::FillRandomBytes(&r, sizeof r)) {
      r = static_cast<uint64_t>(getpid()) * 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(attempt);
    }
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, ".tmp.%016llx", static_cast<unsigned long long>(r));
    tmp = path + suffix;
    fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return Unavailable(tmp + ": " + ErrnoMessage(errno));
  }
  if (fd < 0) return Unavailable(path + ": cannot create a temporary file beside it");
  auto fail = [&](const std::string& what) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return Unavailable(tmp + ": " + what + ": " + ErrnoMessage(err));
  };
  if (fchmod(fd, static_cast<mode_t>(mode & 07777)) != 0) return fail("chmod failed");
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write failed");
    }
    done += static_cast<size_t>(n);
  }
  if (sync && fsync(fd) != 0 && errno != EINVAL) return fail("fsync failed");
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return Unavailable(path + ": rename failed: " + ErrnoMessage(err));
  }
  return OkStatus();
}

Status MakeDirs(const std::string& path) {
  if (path.empty()) return OkStatus();
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return Unavailable(partial + ": cannot create directory: " + ErrnoMessage(errno));
    }
  }
  if (!IsDirectory(path)) return FailedPrecondition(path + ": exists and is not a directory");
  return OkStatus();
}

bool PathExists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    int err = errno;
    if (err == ENOENT) return NotFound(dir + ": no such directory");
    return Unavailable(dir + ": " + ErrnoMessage(err));
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    names.push_back(std::move(name));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace trainprof
