#include "agent/control_channel.h"

#include <gtest/gtest.h>

#include <vector>

#include "agent/agent_test_util.h"
#include "base/files.h"

namespace trainprof::agent {
namespace {

TEST(ControlChannelTest, RoundTripAndErrors) {
  std::string dir = testing::TempDir();
  std::vector<ControlRequest> seen;
  auto server = ControlServer::Start(dir + "/control.sock",
                                     [&](const ControlRequest& r) -> StatusOr<std::string> {
                                       seen.push_back(r);
                                       if (r.type == "ping") return std::string(R"({"node":"n0"})");
                                       if (r.type == "bad") return InvalidArgument("no such thing");
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
  bad.type = "bad";
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

TEST(ControlChannelTest, ParsesRequests) {
  auto r = ParseControlRequest(R"({"type":"step","start_ns":5,"end_ns":9})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->type, "step");
  EXPECT_EQ(r->start_ns, 5);
  EXPECT_EQ(r->end_ns, 9);
  EXPECT_FALSE(ParseControlRequest("not json").ok());
  EXPECT_FALSE(ParseControlRequest(R"({"name":"x"})").ok());
  EXPECT_FALSE(ParseControlRequest("[1,2]").ok());
}

}  // namespace
}  // namespace trainprof::agent
