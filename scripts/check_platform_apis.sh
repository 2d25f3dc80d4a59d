#!/usr/bin/env bash
# Fails when code of the portable build names a Linux-only interface. Linux-only code belongs
# in src/base/platform_linux.cc (base/platform.h has the portable interface) or on the recording
# side, which the portable build (TRAINPROF_COLLECTORS=OFF) leaves out: src/collect (but its
# metric catalog, data), src/agent, src/instrument and the Python extension (src/python).
# Run by ctest (platform_apis_check) and directly: bash scripts/check_platform_apis.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Headers, calls, flags and paths that exist on Linux only.
pattern='/proc/|"/sys/|<linux/|sys/(prctl|syscall|random|epoll|inotify|sysinfo|eventfd|signalfd|timerfd|sendfile|fanotify)\.h'
pattern+='|\b(prctl|gettid|getdents64|getrandom|pipe2|accept4|dup3|statx|memfd_create|pidfd_[a-z_]+|epoll_[a-z_]+|inotify_[a-z_]+|syscall|sched_getaffinity|sched_setaffinity|pthread_setaffinity_np|get_nprocs)\s*\('
pattern+='|\b(SYS_[a-z_0-9]+|SO_PEERCRED|O_PATH|O_TMPFILE|SOCK_CLOEXEC|SOCK_NONBLOCK|MSG_NOSIGNAL|CLOCK_BOOTTIME|SI_KERNEL|PR_SET_[A-Z_]+|st_mtim|st_atim|st_ctim)\b'
# The sources of the portable build, and the tests it runs (scripts/portable_check.sh); the
# metric catalog is data that names the Linux sources of each metric.
mapfile -t files < <(find src include -type f \( -name '*.cc' -o -name '*.h' \) \
  -not -path 'src/agent/*' -not -path 'src/instrument/*' -not -path 'src/python/*' \
  -not -path 'src/collect/*' -not -name 'platform_linux.cc' -not -name 'platform_posix.cc' \
  -not -name 'platform_test.cc' -not \( -name '*_test.cc' -path 'src/cli/*' \) \
  -not \( -name '*_test.cc' -path 'src/serve/*' \) | sort)
if hits=$(grep -nE "$pattern" "${files[@]}" | grep -vE '^[^:]+:[0-9]+:\s*//'); then
  echo "$hits"
  echo "Linux-only interfaces outside the platform layer and the recording side (above):" \
    "move them behind src/base/platform.h (platform_linux.cc + platform_posix.cc)." >&2
  exit 1
fi
echo "platform APIs ok (${#files[@]} files of the portable build checked)"
