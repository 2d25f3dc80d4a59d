#include "base/children.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace trainprof {
namespace {

pid_t ForkExiting(int code, int delay_ms = 0) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (delay_ms > 0) usleep(static_cast<useconds_t>(delay_ms) * 1000);
    _exit(code);
  }
  return pid;
}

TEST(ChildrenTest, OwnedChildKeepsItsStatusWhenTheOrphanReaperTakesItFirst) {
  const pid_t pid = SpawnOwnedChild([] { return ForkExiting(7); });
  ASSERT_GT(pid, 0);
  usleep(50'000);
  ReapOrphans();  // takes the zombie
  int status = 0;
  ASSERT_EQ(WaitOwnedChild(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  // Forgotten once returned: a second wait is an ordinary ECHILD.
  EXPECT_EQ(WaitOwnedChild(pid, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(ChildrenTest, OrphansAreReapedAndOwnedChildrenWaitedNormally) {
  const pid_t orphan = ForkExiting(3);
  const pid_t owned = SpawnOwnedChild([] { return ForkExiting(5, 100); });
  int status = 0;
  EXPECT_EQ(WaitOwnedChild(owned, &status, WNOHANG), 0);  // still running
  usleep(50'000);
  ReapOrphans();
  EXPECT_EQ(waitpid(orphan, &status, WNOHANG), -1);  // reaped
  ASSERT_EQ(WaitOwnedChild(owned, &status, 0), owned);
  EXPECT_EQ(WEXITSTATUS(status), 5);
}

TEST(ChildrenTest, OwnerBlockedInWaitGetsTheStatusWhileAnotherThreadReaps) {
  std::atomic<bool> stop{false};
  std::thread reaper([&] {
    while (!stop.load()) {
      ReapOrphans();
      usleep(200);
    }
  });
  for (int i = 0; i < 20; ++i) {
    const pid_t pid = SpawnOwnedChild([i] { return ForkExiting(10 + i, i % 3); });
    int status = 0;
    if (i % 2 == 0) {  // polling, as the rule actions do
      pid_t got = 0;
      while ((got = WaitOwnedChild(pid, &status, WNOHANG)) == 0) usleep(100);
      ASSERT_EQ(got, pid) << "child " << i;
    } else {
      ASSERT_EQ(WaitOwnedChild(pid, &status, 0), pid) << "child " << i;
    }
    EXPECT_EQ(WEXITSTATUS(status), 10 + i);
  }
  stop = true;
  reaper.join();
}

}  // namespace
}  // namespace trainprof
