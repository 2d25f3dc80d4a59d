#include "agent/control_channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "agent/agent_test_util.h"
#include "agent/mark.h"
#include "base/files.h"
#include "base/time.h"

namespace trainprof::agent {
namespace {

TEST(ControlChannelTest, RoundTripAndErrors) {
  std::string dir = testing::TempDir();
  std::vector<ControlRequest> seen;
  auto server = ControlServer::Start(dir + "/control.sock",
                                     [&](const ControlRequest& r) -> StatusOr<std::string> {
                                       seen.push_back(r);
                                       if (r.type == "ping") return std::string(R"({"node":"n0"})");
                                       if (r.name == "bad") return InvalidArgument("no such thing");
                                       return std::string();
                                     });
  ASSERT_TRUE(server.ok()) << server.status().message();
  ControlRequest mark;
  mark.type = "mark";
  mark.name = "download_start";
  mark.ts_ns = 123;
  auto answer = SendControlRequest(dir + "/control.sock", mark);
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_EQ(*answer, R"({"ok":true})");
  ControlRequest ping;
  ping.type = "ping";
  answer = SendControlRequest(dir + "/control.sock", ping);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(*answer, R"({"node":"n0","ok":true})");
  ControlRequest bad;
  bad.type = "mark";
  bad.name = "bad";
  answer = SendControlRequest(dir + "/control.sock", bad);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(*answer, R"({"error":"no such thing","ok":false})");
  (*server)->Stop();
  EXPECT_FALSE(PathExists(dir + "/control.sock"));
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].name, "download_start");
  EXPECT_EQ(seen[0].ts_ns, 123);
  // Nobody listening: a clear error, no hang.
  answer = SendControlRequest(dir + "/control.sock", ping);
  EXPECT_FALSE(answer.ok());
}

TEST(ControlChannelTest, PathsLongerThanSockaddrWork) {
  std::string dir = testing::TempDir() + "/" + std::string(60, 'a') + "/" + std::string(60, 'b');
  ASSERT_TRUE(MakeDirs(dir).ok());
  std::string path = dir + "/control.sock";
  ASSERT_GT(path.size(), 108u);
  auto server = ControlServer::Start(
      path, [](const ControlRequest&) -> StatusOr<std::string> { return std::string(); });
  ASSERT_TRUE(server.ok()) << server.status().message();
  EXPECT_TRUE(PathExists(path));
  ControlRequest ping;
  ping.type = "ping";
  auto answer = SendControlRequest(path, ping);
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_EQ(*answer, R"({"ok":true})");
}

// A connected client socket, or -1.
int Connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads what the server sends until it closes (or 3 s pass).
std::string ReadAll(int fd) {
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  char buf[1024];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

struct Counted {
  std::mutex mu;
  std::map<std::string, int64_t> counts;
  ControlServerOptions Options(std::optional<int64_t> run_start = std::nullopt) {
    ControlServerOptions o;
    o.run_start_ns = run_start;
    o.count = [this](const std::string& c, int64_t n) {
      std::lock_guard<std::mutex> lock(mu);
      counts[c] += n;
    };
    return o;
  }
  int64_t Get(const std::string& c) {
    std::lock_guard<std::mutex> lock(mu);
    return counts[c];
  }
};

ControlServer::Handler OkHandler() {
  return [](const ControlRequest&) -> StatusOr<std::string> { return std::string(); };
}

// Issue 20: the socket's mode came from the umask (0777 under umask 000).
TEST(ControlChannelTest, SocketIsPrivateWhateverTheUmask) {
  std::string dir = testing::TempDir();
  mode_t old = ::umask(0);
  auto server = ControlServer::Start(dir + "/control.sock", OkHandler());
  ::umask(old);
  ASSERT_TRUE(server.ok()) << server.status().message();
  struct stat st;
  ASSERT_EQ(::lstat((dir + "/control.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // Nothing else is left beside it (the private directory it was bound in is gone).
  auto listed = ListDirectory(dir);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, std::vector<std::string>{"control.sock"});
  // A stale socket file of an earlier recorder is replaced.
  (*server)->Stop();
  auto again = ControlServer::Start(dir + "/control.sock", OkHandler());
  ASSERT_TRUE(again.ok()) << again.status().message();
  ControlRequest ping;
  ping.type = "ping";
  EXPECT_TRUE(SendControlRequest(dir + "/control.sock", ping).ok());
}

// Issue 20: one idle client blocked the channel for 2 s per connection, so `trainprof mark`
// (3 s timeout) failed behind two of them.
TEST(ControlChannelTest, IdleAndSlowClientsDoNotBlockOthers) {
  std::string dir = testing::TempDir();
  std::string path = dir + "/control.sock";
  Counted counted;
  auto server = ControlServer::Start(path, OkHandler(), counted.Options());
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) {  // more than the connection cap
    int fd = Connect(path);
    ASSERT_GE(fd, 0) << i;
    if (i % 2 == 0) {
      ASSERT_EQ(::send(fd, "{\"type\":\"ma", 11, MSG_NOSIGNAL), 11);  // never finished
    }
    idle.push_back(fd);
  }
  ControlRequest mark;
  mark.type = "mark";
  mark.name = "checkpoint_start";
  for (int i = 0; i < 3; ++i) {
    int64_t t0 = MonotonicNowNs();
    auto answer = SendControlRequest(path, mark, /*timeout_ms=*/1000);
    ASSERT_TRUE(answer.ok()) << answer.status().message();
    EXPECT_EQ(*answer, R"({"ok":true})");
    EXPECT_LT(MonotonicNowNs() - t0, kNanosPerSecond);
  }
  EXPECT_LE((*server)->stats().max_open.load(), kControlMaxConnections);
  // The newest idle one is dropped after the request timeout, with the reason.
  std::string told = ReadAll(idle.back());
  EXPECT_NE(told.find("no complete request within"), std::string::npos) << told;
  for (int fd : idle) ::close(fd);
  (*server)->Stop();
  EXPECT_GE(counted.Get(kControlConnectionsDropped), 100 - kControlMaxConnections);
}

// Issue 20: any process that could connect was served. Even with the socket's mode widened by
// hand, a peer of another uid (not root) is refused and counted.
TEST(ControlChannelTest, PeersOfAnotherUidAreRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another uid";
  std::string dir = testing::TempDir();
  ASSERT_EQ(::chmod(dir.c_str(), 0711), 0);
  std::string path = dir + "/control.sock";
  Counted counted;
  int handled = 0;
  auto server = ControlServer::Start(
      path,
      [&](const ControlRequest&) -> StatusOr<std::string> {
        ++handled;
        return std::string();
      },
      counted.Options());
  ASSERT_TRUE(server.ok()) << server.status().message();
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    int fd = Connect(path);
    if (fd < 0) ::_exit(11);
    const char req[] = "{\"type\":\"step\",\"start_ns\":1,\"end_ns\":2}\n";
    (void)!::send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);  // refused: may find it closed
    // Only syscalls and a stack buffer in the forked child (no allocation after fork).
    char answer[512] = {};
    size_t got = 0;
    ssize_t n;
    while (got < sizeof(answer) - 1 &&
           (n = ::read(fd, answer + got, sizeof(answer) - 1 - got)) > 0) {
      got += static_cast<size_t>(n);
    }
    if (std::strstr(answer, "\"ok\":false") == nullptr) ::_exit(12);
    if (std::strstr(answer, "uid 65534") == nullptr) ::_exit(13);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setuid failed, 11: connect failed, 12: served, "
                                       "13: no reason given";
  // Root (the recorder's own uid here) is still served.
  ControlRequest ping;
  ping.type = "ping";
  auto answer = SendControlRequest(path, ping);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(*answer, R"({"ok":true})");
  (*server)->Stop();
  EXPECT_EQ(handled, 1);
  EXPECT_EQ(counted.Get(kControlPeersRefused), 1);
}

// Issue 20: a step from 1 ns to INT64_MAX was accepted and made a 2.5-million-hour phase.
TEST(ControlChannelTest, RequestsOutsideTheRunAreRefusedAndCounted) {
  std::string dir = testing::TempDir();
  std::string path = dir + "/control.sock";
  const int64_t start = WallNowNs();
  Counted counted;
  std::vector<ControlRequest> seen;
  std::mutex mu;
  auto server = ControlServer::Start(
      path,
      [&](const ControlRequest& r) -> StatusOr<std::string> {
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back(r);
        return std::string();
      },
      counted.Options(start));
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto send = [&](const std::string& line) {
    int fd = Connect(path);
    EXPECT_GE(fd, 0);
    (void)!::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
    std::string answer = ReadAll(fd);
    ::close(fd);
    return answer;
  };
  const std::string now = std::to_string(WallNowNs());
  const std::vector<std::string> bad = {
      R"({"type":"step","start_ns":1,"end_ns":9223372036854775807})",
      R"({"type":"step","start_ns":)" + now + R"(,"end_ns":9223372036854775807})",
      R"({"type":"mark","name":"x_start","ts_ns":1})",
      R"({"type":"mark","name":"x_end","ts_ns":-5})",
      R"({"type":"mark","name":"x","ts_ns":18446744073709551615})",
      R"({"type":"mark","name":"x","ts_ns":"soon"})",
      R"({"type":"mark","name":")" + std::string(200, 'a') + R"("})",
      R"({"type":"mark","name":"ab"})",
      R"({"type":"mark"})",
      R"({"type":"launch_missiles"})",
      "{\"type\":\"mark\",\"name\":\"" + std::string(5000, 'b') + "\"}\n",  // too long
  };
  for (const std::string& line : bad) {
    std::string answer = send(line + "\n");
    EXPECT_NE(answer.find(R"("ok":false)"), std::string::npos) << line.substr(0, 80);
    EXPECT_NE(answer.find(R"("error":")"), std::string::npos) << answer;
    EXPECT_EQ(answer.find('\x07'), std::string::npos) << answer;
  }
  // Good ones, with an unknown field ignored.
  EXPECT_EQ(send(R"({"type":"mark","name":"download_start","color":"blue"})"
                 "\n"),
            "{\"ok\":true}\n");
  const std::string t = std::to_string(WallNowNs());
  EXPECT_EQ(
      send(R"({"type":"step","start_ns":)" + std::to_string(start) + R"(,"end_ns":)" + t + "}\n"),
      "{\"ok\":true}\n");
  (*server)->Stop();
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_EQ(counted.Get(kControlRequestsRefused), static_cast<int64_t>(bad.size()));
}

TEST(ControlChannelTest, MarkSaysWhyTheRecorderRefused) {
  std::string dir = testing::TempDir();
  std::string path = dir + "/control.sock";
  auto server = ControlServer::Start(path, [](const ControlRequest&) -> StatusOr<std::string> {
    return InvalidArgument("the run is over");
  });
  ASSERT_TRUE(server.ok()) << server.status().message();
  MarkOptions options;
  options.name = "upload_start";
  options.socket = path;
  std::ostringstream out;
  Status status = RunMark(options, out);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "mark: the recorder at " + path + " refused: the run is over");
  EXPECT_EQ(out.str(), "");
}

TEST(ControlChannelTest, ValidatesTimestampsAgainstTheRun) {
  const int64_t start = 1'764'000'000'000'000'000;
  const int64_t now = start + 3600 * kNanosPerSecond;
  ControlRequest step;
  step.type = "step";
  step.start_ns = start + 5;
  step.end_ns = now;
  EXPECT_TRUE(ValidateControlRequest(step, start, now).ok());
  step.start_ns = start - kControlClockSlackNs;  // the slack is allowed
  step.end_ns = now + kControlClockSlackNs;
  EXPECT_TRUE(ValidateControlRequest(step, start, now).ok());
  step.start_ns = start - kControlClockSlackNs - 1;
  EXPECT_FALSE(ValidateControlRequest(step, start, now).ok());
  step.start_ns = start;
  step.end_ns = now + kControlClockSlackNs + 1;
  Status future = ValidateControlRequest(step, start, now);
  ASSERT_FALSE(future.ok());
  EXPECT_NE(future.message().find("future"), std::string::npos) << future.message();
  ControlRequest mark;
  mark.type = "mark";
  mark.name = "a";
  mark.ts_ns = INT64_MIN;
  EXPECT_FALSE(ValidateControlRequest(mark, start, now).ok());
  mark.ts_ns = std::nullopt;  // receive time
  EXPECT_TRUE(ValidateControlRequest(mark, start, now).ok());
}

TEST(ControlChannelTest, ParsesRequests) {
  auto r = ParseControlRequest(R"({"type":"step","start_ns":5,"end_ns":9})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->type, "step");
  EXPECT_EQ(r->start_ns, 5);
  EXPECT_EQ(r->end_ns, 9);
  EXPECT_FALSE(ParseControlRequest("not json").ok());
  EXPECT_FALSE(ParseControlRequest(R"({"name":"x"})").ok());
  EXPECT_FALSE(ParseControlRequest("[1,2]").ok());
  EXPECT_FALSE(ParseControlRequest(R"({"type":"step","start_ns":9,"end_ns":5})").ok());
  EXPECT_FALSE(ParseControlRequest(R"({"type":"step","start_ns":5})").ok());
  EXPECT_FALSE(ParseControlRequest(R"({"type":"step","start_ns":5.5,"end_ns":9})").ok());
  EXPECT_FALSE(ParseControlRequest(R"({"type":"mark","name":7})").ok());
  auto unknown = ParseControlRequest(R"({"type":")" + std::string(100, 'z') + "\x01\"}");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message().find('z'), std::string::npos);  // not echoed
  auto extra = ParseControlRequest(R"({"type":"ping","future_field":{"a":[1]}})");
  EXPECT_TRUE(extra.ok());
}

}  // namespace
}  // namespace trainprof::agent
