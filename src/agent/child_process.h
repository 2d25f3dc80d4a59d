#pragma once
// Starting the command `record` watches and relaying signals to it, like a shell would.
//
// The recorder blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD in all its threads (call
// BlockRelayedSignals first, before any thread starts) and waits for them synchronously in
// WaitForChild. The child gets the original mask and default dispositions.
//
// Forwarding: a signal sent to the recorder (kill, a scheduler, `timeout`) is sent on to the
// child. A signal the terminal sent to the whole foreground process group (Ctrl-C) already
// reached the child, which shares our group, so it is not sent twice.
//
// Threads: the recorder's main thread.

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace trainprof::agent {

// Exit codes of a command that could not be started, as in POSIX shells.
inline constexpr int kExitCommandNotFound = 127;
inline constexpr int kExitCommandNotExecutable = 126;

class SignalBlock {
 public:
  // Blocks the relayed signals in the calling thread (inherited by threads started later).
  SignalBlock();
  // Restores the previous mask after discarding relayed signals still pending, so a late
  // SIGINT does not kill the recorder while it writes the summary.
  ~SignalBlock();
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

  const sigset_t& relayed() const { return relayed_; }
  const sigset_t& original() const { return original_; }

 private:
  sigset_t relayed_;
  sigset_t original_;
};

struct SpawnResult {
  pid_t pid = -1;
  int error = 0;  // errno when the command could not be started
};

// Starts argv[0] (searched in PATH) with the current environment plus `extra_env`, the
// signal mask `child_mask` and default signal dispositions.
SpawnResult SpawnChild(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& extra_env,
                       const sigset_t& child_mask);

// The shell's exit code for a command that could not be started with `error`.
int ExitCodeForSpawnError(int error);
// 128+signal for a killed child, its exit code otherwise.
int ExitCodeFromWaitStatus(int wait_status);

// Waits for `pid` to end, forwarding relayed signals to it. `on_signal` (may be empty) is told
// about each signal received and whether it was forwarded. With `reap_orphans` (a subreaper)
// also reaps any other child. Returns the wait status of `pid`.
int WaitForChild(pid_t pid, const SignalBlock& block, bool reap_orphans,
                 const std::function<void(int sig, bool forwarded)>& on_signal);

// Makes this process the reaper of its orphaned descendants, so that processes the command
// detaches (daemonized data loaders) stay in its process tree. Best effort.
void BecomeSubreaper();

}  // namespace trainprof::agent
