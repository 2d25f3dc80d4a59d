#pragma once
// The operating-system services trainprof uses beyond POSIX, in one place.
//
// Two implementations, one linked per build (CMake's TRAINPROF_PLATFORM):
//   platform_linux.cc  Linux (/proc, prctl, gettid, getrandom, pipe2): the recording build.
//   platform_posix.cc  any POSIX system, macOS included: the portable build
//                      (TRAINPROF_COLLECTORS=OFF), which reads, imports, analyses and reports
//                      runs recorded elsewhere. The test command builds it on Linux too.
// Code outside this layer and the recording side (src/collect, src/agent, src/instrument) uses
// only POSIX and the C++ library; tests/portability_check.sh keeps it so.

#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace trainprof::platform {

// "linux" or "posix": which implementation this build links.
const char* Name();

// An id of the calling thread, stable for its life: the kernel's thread id on Linux (what
// /proc and perf show); elsewhere the system's (macOS) or a per-process counter.
int64_t CurrentThreadId();

// The absolute path of this process's executable; "" when the system does not say.
std::string SelfExecutablePath();

// Makes orphaned descendants children of this process (Linux PR_SET_CHILD_SUBREAPER), so that
// it can reap them. false where the system has no such thing.
bool BecomeChildSubreaper();

// The CPU's model name ("AMD EPYC 7R13 Processor"); "" when unknown.
std::string CpuModelName();

// The CPUs this process may run on (its affinity mask on Linux; elsewhere the hardware's
// count); at least 1.
int UsableCpuCount();

// How many threads this process has now; -1 where the system does not say (Linux:
// /proc/self/task).
int ProcessThreadCount();

// Runs `fn` with the calling thread (and the threads it starts meanwhile) allowed on one of
// its CPUs only, as on a one-core machine, then restores its CPUs; false (and `fn` not run)
// where the system cannot restrict a thread (Linux: sched_setaffinity).
bool RunOnOneCpu(const std::function<void()>& fn);

// Fills `buf` with `n` bytes from the system's random source; false when it cannot.
bool FillRandomBytes(void* buf, size_t n);

// pipe() with close-on-exec set on both ends, atomically where the system can (pipe2).
// 0, or -1 with errno.
int PipeCloseOnExec(int fds[2]);

// Whether `pid` has ended: gone, or a zombie not yet reaped by its parent.
bool ProcessHasExited(pid_t pid);

// A file's modification time (struct stat spells it differently per system).
timespec ModificationTime(const struct stat& st);

// For a process that reads large tables over and over (trainprof serve): the allocator keeps
// freed memory of up to 256 MiB for reuse and serves blocks of up to 32 MiB from its heap, so
// repeated reads do not map, fault in, zero and unmap fresh pages each time (glibc's mallopt;
// elsewhere nothing).
void KeepFreedMemoryForReuse();

}  // namespace trainprof::platform
