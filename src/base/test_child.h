// A forked child at a low process limit, for the tests of what trainprof does where no thread
// can be started (a user at RLIMIT_NPROC, a container's pids limit). Test code only: never
// linked into the product.
//
// The child becomes an unprivileged uid of the test's own when this process is root (root is
// exempt from the limit; one uid per test, so that tests run side by side never share a
// process count), sets RLIMIT_NPROC, checks that the limit holds, and exits with what the
// test's body returns. Nothing it throws reaches gtest's handler, which would run on in the
// child as a second test runner.

#pragma once

#include <grp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace trainprof::test_child {

// The child's exit statuses that the helper gives; a test's body uses others (13-15).
inline constexpr int kCannotDropToUid = 10;
inline constexpr int kCannotSetLimit = 11;
inline constexpr int kLimitDoesNotHold = 12;
inline constexpr int kException = 16;

struct AtProcessLimit {
  uid_t uid = 0;       // the child's uid when this process is root
  rlim_t limit = 1;    // RLIMIT_NPROC: this process and its threads, and the uid's others
  int threads_ok = 0;  // checked first: this many threads start and one more does not; -1: no check
};

// Forks, runs `body` in the child as described above, and returns the child's exit status
// (-1 when it did not exit: a signal).
inline int RunAtProcessLimit(const AtProcessLimit& at, const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (geteuid() == 0 &&
        (setgroups(0, nullptr) != 0 || setgid(at.uid) != 0 || setuid(at.uid) != 0)) {
      _exit(kCannotDropToUid);
    }
    const rlimit limit = {at.limit, at.limit};
    if (setrlimit(RLIMIT_NPROC, &limit) != 0) _exit(kCannotSetLimit);
    if (at.threads_ok >= 0) {
      std::vector<std::thread> held;
      bool holds = true;
      try {
        for (int i = 0; i < at.threads_ok; ++i) {
          held.emplace_back([] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
        }
        try {
          std::thread([] {}).join();
          holds = false;  // one thread more than allowed started
        } catch (const std::system_error&) {
        }
      } catch (const std::system_error&) {
        holds = false;  // fewer than allowed
      }
      for (auto& t : held) t.join();
      if (!holds) _exit(kLimitDoesNotHold);
    }
    int code = kException;
    try {
      code = body();
    } catch (...) {
    }
    _exit(code);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// What the helper's exit statuses mean, for a failing assertion's message.
inline std::string Meaning(int code) {
  switch (code) {
    case 0:
      return "ok";
    case -1:
      return "the child did not exit (a signal)";
    case kCannotDropToUid:
      return "the child could not become the test's uid";
    case kCannotSetLimit:
      return "the child could not set RLIMIT_NPROC";
    case kLimitDoesNotHold:
      return "the limit does not hold: not exactly the allowed threads started";
    case kException:
      return "an exception left the code under test";
    default:
      return "the test's own check " + std::to_string(code) + " failed";
  }
}

}  // namespace trainprof::test_child
