// The Linux implementation of base/platform.h: the one place outside the recording side
// (src/collect, src/agent, src/instrument) that names Linux-only interfaces.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "base/files.h"
#include "base/platform.h"

namespace trainprof::platform {

const char* Name() { return "linux"; }

int64_t CurrentThreadId() { return static_cast<int64_t>(syscall(SYS_gettid)); }

std::string SelfExecutablePath() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  return std::string(exe, static_cast<size_t>(n));
}

bool BecomeChildSubreaper() { return ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0; }

int UsableCpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

int ProcessThreadCount() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

bool RunOnOneCpu(const std::function<void()>& fn) {
  cpu_set_t all;
  CPU_ZERO(&all);
  if (sched_getaffinity(0, sizeof all, &all) != 0) return false;
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  if (sched_setaffinity(0, sizeof one, &one) != 0) return false;
  fn();
  (void)sched_setaffinity(0, sizeof all, &all);
  return true;
}

std::string CpuModelName() {
  auto cpuinfo = ReadFileToString("/proc/cpuinfo");
  if (!cpuinfo.ok()) return "";
  const size_t pos = cpuinfo->find("model name");
  if (pos == std::string::npos) return "";
  const size_t colon = cpuinfo->find(':', pos);
  const size_t eol = cpuinfo->find('\n', pos);
  if (colon == std::string::npos || colon >= eol) return "";
  const std::string model = cpuinfo->substr(colon + 1, eol - colon - 1);
  const size_t b = model.find_first_not_of(" \t");
  return b == std::string::npos ? "" : model.substr(b);
}

bool FillRandomBytes(void* buf, size_t n) {
  return getrandom(buf, n, 0) == static_cast<ssize_t>(n);
}

int PipeCloseOnExec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

bool ProcessHasExited(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

timespec ModificationTime(const struct stat& st) { return st.st_mtim; }

void KeepFreedMemoryForReuse() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace trainprof::platform
