#include "base/children.h"

#include <errno.h>
#include <sys/wait.h>

#include <map>
#include <mutex>

namespace trainprof {
namespace {

struct Owned {
  std::mutex mu;
  std::map<pid_t, int> status;  // owned children: wait status once reaped here, else -1
};

Owned& Registry() {
  static Owned* owned = new Owned();  // never destroyed: reaped from threads until exit
  return *owned;
}

constexpr int kRunning = -1;

}  // namespace

pid_t SpawnOwnedChild(const std::function<pid_t()>& spawn) {
  Owned& r = Registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const pid_t pid = spawn();
  if (pid > 0) r.status[pid] = kRunning;
  return pid;
}

void ClaimChild(pid_t pid) {
  Owned& r = Registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.status.emplace(pid, kRunning);
}

pid_t WaitOwnedChild(pid_t pid, int* status, int options) {
  Owned& r = Registry();
  while (true) {
    int st = 0;
    const pid_t got = ::waitpid(pid, &st, options);
    if (got == pid) {
      std::lock_guard<std::mutex> lock(r.mu);
      r.status.erase(pid);
      if (status != nullptr) *status = st;
      return pid;
    }
    if (got == 0) return 0;
    if (errno == EINTR) continue;
    const int err = errno;
    if (err == ECHILD) {
      // Taken by ReapOrphans, which stored its status while holding the lock.
      std::lock_guard<std::mutex> lock(r.mu);
      auto it = r.status.find(pid);
      if (it != r.status.end() && it->second != kRunning) {
        if (status != nullptr) *status = it->second;
        r.status.erase(it);
        return pid;
      }
    }
    errno = err;
    return -1;
  }
}

void ReapOrphans() {
  Owned& r = Registry();
  std::lock_guard<std::mutex> lock(r.mu);
  int st = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
    auto it = r.status.find(pid);
    if (it != r.status.end()) it->second = st;
  }
}

}  // namespace trainprof
