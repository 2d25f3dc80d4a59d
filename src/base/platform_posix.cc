// The portable implementation of base/platform.h: POSIX, plus what macOS offers where POSIX
// says nothing (thread ids, the executable's path, the CPU's name). Linked by the portable build
// (TRAINPROF_PLATFORM=posix, the default off Linux); the test command builds and runs it on
// Linux too, so everything outside the __APPLE__ branches is exercised there.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <thread>

#include "base/platform.h"

#if defined(__APPLE__)
#include <mach-o/dyld.h>
#include <pthread.h>
#include <sys/sysctl.h>
#endif

namespace trainprof::platform {

const char* Name() { return "posix"; }

int64_t CurrentThreadId() {
#if defined(__APPLE__)
  uint64_t tid = 0;
  pthread_threadid_np(nullptr, &tid);
  return static_cast<int64_t>(tid);
#else
  // No portable thread id: number the threads of this process in the order they ask.
  static std::atomic<int64_t> next{1};
  thread_local const int64_t id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
#endif
}

std::string SelfExecutablePath() {
#if defined(__APPLE__)
  char raw[4096];
  uint32_t size = sizeof raw;
  if (_NSGetExecutablePath(raw, &size) != 0) return "";
  char resolved[PATH_MAX];
  if (realpath(raw, resolved) == nullptr) return raw;
  return resolved;
#else
  return "";
#endif
}

bool BecomeChildSubreaper() { return false; }

int UsableCpuCount() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

int ProcessThreadCount() { return -1; }

bool RunOnOneCpu(const std::function<void()>& fn) {
  (void)fn;
  return false;  // no portable way to restrict a thread to one CPU
}

std::string CpuModelName() {
#if defined(__APPLE__)
  char name[256] = {};
  size_t size = sizeof name - 1;
  if (sysctlbyname("machdep.cpu.brand_string", name, &size, nullptr, 0) != 0) return "";
  return name;
#else
  return "";
#endif
}

bool FillRandomBytes(void* buf, size_t n) {
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  auto* p = static_cast<char*>(buf);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  close(fd);
  return got == n;
}

int PipeCloseOnExec(int fds[2]) {
  // Not atomic: a fork() on another thread in between would inherit the ends (trainprof starts
  // its children with posix_spawn, which closes nothing by itself either way).
  if (pipe(fds) != 0) return -1;
  for (int i = 0; i < 2; ++i) {
    if (fcntl(fds[i], F_SETFD, FD_CLOEXEC) != 0) {
      const int err = errno;
      close(fds[0]);
      close(fds[1]);
      errno = err;
      return -1;
    }
  }
  return 0;
}

bool ProcessHasExited(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A zombie still answers kill(). Our own children's are seen without reaping them (WNOWAIT
  // leaves the status for whoever waits); another parent's zombie counts as running.
  siginfo_t info{};
  info.si_pid = 0;
  return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

timespec ModificationTime(const struct stat& st) {
#if defined(__APPLE__)
  return st.st_mtimespec;
#else
  return st.st_mtim;
#endif
}

void KeepFreedMemoryForReuse() {}

}  // namespace trainprof::platform
