#include "cli/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace trainprof::cli {
namespace {

TEST(ProgressLineTest, AmountsPercentRateAndEta) {
  // 1.5 MiB of 3 MiB in 1 s: 1.5 MiB/s, 1 s to go.
  EXPECT_EQ(TerminalProgress::FormatLine("import kineto", "", 3 << 19, 3 << 20, 1.0, true, 200),
            "import kineto: 1.5 MiB / 3.0 MiB (50%)  1.5 MiB/s  ETA 0:01");
  // No total: no percent and no ETA, the elapsed time instead; rows are counts.
  EXPECT_EQ(TerminalProgress::FormatLine("export csv", "events.csv", 25000, 0, 125.0, false, 200),
            "export csv: events.csv 25.0k  200/s  2:05");
  // Stages only (nothing counted): the stage and the clock.
  EXPECT_EQ(TerminalProgress::FormatLine("report", "rules", 0, 0, 3661.0, false, 200),
            "report: rules  1:01:01");
  // Done past the announced total is shown as 100%, never more.
  EXPECT_NE(TerminalProgress::FormatLine("x", "", 11, 10, 1.0, false, 200).find("(100%)"),
            std::string::npos);
  // Never wider than the terminal less one column (no wrap, so \r returns to its start).
  EXPECT_EQ(TerminalProgress::FormatLine("import kineto", "", 1, 1 << 30, 1.0, true, 20).size(),
            19u);
}

std::string Drain(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(TerminalProgressTest, DrawsThenClearsTheLine) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ASSERT_EQ(::fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
  ASSERT_EQ(::fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
  {
    TerminalProgress progress(
        {.label = "import", .bytes = true, .fd = p[1], .show_after_ms = 0, .force = true});
    progress.AddTotal(4096);
    progress.Advance(1024);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    progress.Finish();
    EXPECT_GE(progress.draws(), 1);
    EXPECT_LE(progress.draws(), 4);  // at most 10 a second
  }
  const std::string out = Drain(p[0]);
  ::close(p[0]);
  ::close(p[1]);
  EXPECT_EQ(out.rfind("\rimport:", 0), 0u) << out;
  EXPECT_NE(out.find("\rimport: 1.0 KiB / 4.0 KiB (25%)"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 4), "\r\x1b[K");
}

TEST(TerminalProgressTest, SilentWhenNotATerminalQuietOrShort) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ASSERT_EQ(::fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
  ASSERT_EQ(::fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
  {
    TerminalProgress piped({.label = "import", .fd = p[1], .show_after_ms = 0});
    EXPECT_FALSE(piped.enabled());  // a pipe is not a terminal
    TerminalProgress short_work(
        {.label = "import", .fd = p[1], .show_after_ms = 60'000, .force = true});
    short_work.Advance(5);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    short_work.Finish();
    EXPECT_EQ(short_work.draws(), 0);
    SetQuiet(true);
    TerminalProgress quiet({.label = "import", .fd = p[1], .show_after_ms = 0, .force = true});
    SetQuiet(false);
    EXPECT_FALSE(quiet.enabled());
  }
  EXPECT_EQ(Drain(p[0]), "");  // nothing drawn, nothing to clear
  ::close(p[0]);
  ::close(p[1]);
}

}  // namespace
}  // namespace trainprof::cli
