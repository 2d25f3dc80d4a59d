#include "collect/net_dev_collector.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <thread>

#include "collect/collect_test_util.h"
#include "model/data_quality.h"

namespace trainprof::collect {
namespace {

using testing::RecordingSink;
using testing::TempDir;
using testing::TestData;
using testing::TickAt;

TEST(NetDevCollectorTest, RatesPerInterfaceAndCumulativeErrors) {
  TempDir dir;
  testing::CopyTree(TestData("procfs/two_cpus/t0"), dir.path());
  NetDevCollector collector(dir.path());
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  EXPECT_FALSE(sink.Has("network_receive_bytes_per_second", "eth0"));
  EXPECT_EQ(sink.Get("network_receive_drops_total", "eth0"), 3);
  testing::RewriteTree(TestData("procfs/two_cpus/t1"), dir.path());
  sink.Clear();
  collector.Sample(TickAt(2), sink);  // two seconds later
  EXPECT_DOUBLE_EQ(*sink.Get("network_receive_bytes_per_second", "eth0"), 1000000.0);
  EXPECT_DOUBLE_EQ(*sink.Get("network_transmit_bytes_per_second", "eth0"), 500000.0);
  EXPECT_DOUBLE_EQ(*sink.Get("network_receive_packets_per_second", "eth0"), 1000.0);
  EXPECT_DOUBLE_EQ(*sink.Get("network_transmit_packets_per_second", "eth0"), 250.0);
  EXPECT_DOUBLE_EQ(*sink.Get("network_receive_bytes_per_second", "lo"), 250000.0);
  EXPECT_EQ(sink.Get("network_receive_drops_total", "eth0"), 5);
  EXPECT_EQ(sink.Get("network_transmit_errors_total", "eth0"), 1);
  // A new interface: counters now, rates from its second reading.
  EXPECT_FALSE(sink.Has("network_receive_bytes_per_second", "docker0"));
  EXPECT_EQ(sink.Get("network_receive_errors_total", "docker0"), 0);
  EXPECT_TRUE(sink.unknown.empty());
}

TEST(NetDevCollectorTest, MalformedLineCounted) {
  NetDevCollector collector(TestData("procfs/malformed"));
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  EXPECT_EQ(sink.Counter(model::dq::kParseErrors), 1);
  EXPECT_TRUE(sink.Has("network_receive_errors_total", "lo"));
}

// A loopback transfer of a known size shows up in lo's rates.
TEST(NetDevCollectorTest, LoopbackTransferIsSeen) {
  int server = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len);
  listen(server, 1);
  NetDevCollector collector("/proc");
  RecordingSink sink;
  collector.Sample(TickAt(0), sink);
  constexpr size_t kBytes = 20 * 1024 * 1024;
  std::thread reader([&] {
    int c = accept(server, nullptr, nullptr);
    std::vector<char> buf(1 << 16);
    size_t got = 0;
    while (got < kBytes) {
      ssize_t n = read(c, buf.data(), buf.size());
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    close(c);
  });
  int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::vector<char> data(kBytes, 'x');
  size_t sent = 0;
  while (sent < kBytes) {
    ssize_t n = write(client, data.data() + sent, kBytes - sent);
    ASSERT_GT(n, 0);
    sent += static_cast<size_t>(n);
  }
  close(client);
  reader.join();
  close(server);
  collector.Sample(TickAt(1), sink);
  // One second of "interval": the rate equals the bytes moved (plus TCP headers and others).
  auto rx = sink.Get("network_receive_bytes_per_second", "lo");
  ASSERT_TRUE(rx.has_value());
  EXPECT_GE(*rx, kBytes);
  EXPECT_LT(*rx, kBytes * 3.0);  // other loopback users share lo
}

}  // namespace
}  // namespace trainprof::collect
