#pragma once
// Child processes with an owner, in a process that also reaps orphans.
//
// `record` is a subreaper: orphaned descendants of the job become its children and it reaps
// them. A blanket waitpid(-1) would also take children that another part of the same process
// started and waits for (a rule action's command, the custom-rules runner, Chromium printing a
// PDF, the job itself), which then saw "waitpid: No child processes" and lost their status.
// Such children are owned: started through SpawnOwnedChild (or claimed), waited for with
// WaitOwnedChild; ReapOrphans takes the others and keeps an owned child's status for its owner.
//
// Threads: all functions may be called from any thread.

#include <sys/types.h>

#include <functional>

namespace trainprof {

// Runs `spawn` (starts one child, returns its pid, or <= 0 when it could not) and registers
// the child as owned, under the lock ReapOrphans takes: no reap falls in between.
pid_t SpawnOwnedChild(const std::function<pid_t()>& spawn);
// Registers a child already started (before anyone could reap it) as owned.
void ClaimChild(pid_t pid);
// waitpid(pid, status, options) for an owned child (EINTR retried): returns pid with its
// status even when ReapOrphans took it first; 0 while it runs with WNOHANG; -1 with errno.
// The child is forgotten once its status has been returned.
pid_t WaitOwnedChild(pid_t pid, int* status, int options);
// Reaps every child that has ended; the statuses of owned ones are kept for WaitOwnedChild.
void ReapOrphans();

}  // namespace trainprof
