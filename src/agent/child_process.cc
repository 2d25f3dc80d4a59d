#include "agent/child_process.h"

#include <errno.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "base/children.h"
#include "base/platform.h"

extern char** environ;

namespace trainprof::agent {
namespace {

constexpr int kRelayed[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

bool IsRelayed(int sig) {
  for (int s : kRelayed) {
    if (s == sig) return true;
  }
  return false;
}

}  // namespace

SignalBlock::SignalBlock() {
  sigemptyset(&relayed_);
  for (int s : kRelayed) sigaddset(&relayed_, s);
  sigaddset(&relayed_, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &relayed_, &original_);
}

SignalBlock::~SignalBlock() {
  timespec zero{0, 0};
  while (sigtimedwait(&relayed_, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &original_, nullptr);
}

SpawnResult SpawnChild(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& extra_env,
                       const sigset_t& child_mask) {
  SpawnResult result;
  if (argv.empty()) {
    result.error = ENOENT;
    return result;
  }
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    if (extra_env.count(key) == 0) env_strings.push_back(std::move(entry));
  }
  for (const auto& [key, value] : extra_env) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& s : args) argp.push_back(s.data());
  argp.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : kRelayed) sigaddset(&defaults, s);
  sigaddset(&defaults, SIGCHLD);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &child_mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  // glibc's posix_spawnp reports exec failures (ENOENT, EACCES) as its return value.
  int rc = 0;
  SpawnOwnedChild([&] {
    rc = posix_spawnp(&pid, argp[0], nullptr, &attr, argp.data(), envp.data());
    return rc == 0 ? pid : -1;
  });
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    result.error = rc;
    return result;
  }
  result.pid = pid;
  return result;
}

int ExitCodeForSpawnError(int error) {
  return error == ENOENT ? kExitCommandNotFound : kExitCommandNotExecutable;
}

int ExitCodeFromWaitStatus(int wait_status) {
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  return 1;
}

int WaitForChild(pid_t pid, const SignalBlock& block, bool reap_orphans,
                 const std::function<void(int sig, bool forwarded)>& on_signal) {
  while (true) {
    // Reap first: the child may have ended before we started waiting.
    int status = 0;
    pid_t done = WaitOwnedChild(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno == ECHILD) return 1 << 8;  // not our child (should not happen)
    // Orphans only: the command and what other threads spawned (rule actions, the custom-rules
    // runner) are owned, and their statuses are kept for whoever waits for them.
    if (reap_orphans) ReapOrphans();
    siginfo_t info;
    timespec timeout{0, 200 * 1000 * 1000};  // also re-check periodically, in case SIGCHLD merged
    int sig = sigtimedwait(&block.relayed(), &info, &timeout);
    if (sig <= 0 || !IsRelayed(sig)) continue;
    // SI_KERNEL: the terminal signalled our whole process group; the child had it already
    // unless it moved to its own group.
    bool from_terminal = info.si_code == SI_KERNEL;
    bool same_group = ::getpgid(pid) == ::getpgrp();
    bool forward = !(from_terminal && same_group);
    if (forward) ::kill(pid, sig);
    if (on_signal) on_signal(sig, forward);
  }
}

void BecomeSubreaper() { platform::BecomeChildSubreaper(); }

}  // namespace trainprof::agent
