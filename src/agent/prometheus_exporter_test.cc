#include "agent/prometheus_exporter.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "agent/agent_test_util.h"
#include "agent/connection_loop.h"
#include "base/files.h"
#include "base/time.h"

extern char** environ;

namespace trainprof::agent {
namespace {

LatestSnapshot Snapshot() {
  LatestSnapshot s;
  s.tick_wall_ns = 1'764'512'345'500'000'000;
  s.tick_mono_ns = 86'400'000'000'000;
  s.ticks = 7;
  s.values = {{"cpu_utilization_ratio", "cpu0", 0.5},
              {"cpu_utilization_ratio", "total", 0.25},
              {"gpu_utilization_ratio", "gpu0", 0.875},
              {"gpu_energy_joules_total", "gpu0", 1234.5},
              {"weird-name", "dev\"q\\", 1}};
  s.counters = {{"sampling_overruns", 2}};
  return s;
}

model::NodeInfo Node() {
  model::NodeInfo node;
  node.node = "algo-1";
  model::GpuInfo gpu;
  gpu.index = 0;
  gpu.name = "NVIDIA H200";
  gpu.uuid = "GPU-1234";
  node.gpus.push_back(gpu);
  return node;
}

TEST(PrometheusTextTest, RendersFamiliesLabelsAndTypes) {
  std::string text = RenderPrometheusText(Snapshot(), Node());
  EXPECT_NE(text.find("# HELP trainprof_cpu_utilization_ratio Share of CPU time not idle"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE trainprof_cpu_utilization_ratio gauge\n"
                      "trainprof_cpu_utilization_ratio{node=\"algo-1\",device=\"cpu0\"} 0.5\n"
                      "trainprof_cpu_utilization_ratio{node=\"algo-1\",device=\"total\"} 0.25\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("trainprof_gpu_utilization_ratio{node=\"algo-1\",device=\"gpu0\","
                      "uuid=\"GPU-1234\",model=\"NVIDIA H200\"} 0.875\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE trainprof_gpu_energy_joules_total counter"), std::string::npos);
  EXPECT_NE(text.find("trainprof_weird_name{node=\"algo-1\",device=\"dev\\\"q\\\\\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("trainprof_data_quality_total{node=\"algo-1\",counter=\"sampling_"
                      "overruns\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("trainprof_sampling_ticks_total{node=\"algo-1\"} 7\n"), std::string::npos);
  // One HELP and one TYPE per family.
  size_t helps = 0;
  for (size_t p = 0;
       (p = text.find("# HELP trainprof_cpu_utilization_ratio ", p)) != std::string::npos; ++p) {
    ++helps;
  }
  EXPECT_EQ(helps, 1u);
}

TEST(PrometheusAddressTest, LoopbackByDefaultRemoteOnlyWhenAsked) {
  auto a = ParsePrometheusAddress("9400", false);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9400);
  EXPECT_EQ(ParsePrometheusAddress(":0", false)->port, 0);
  EXPECT_EQ(ParsePrometheusAddress("localhost:1", false)->host, "localhost");
  EXPECT_EQ(ParsePrometheusAddress("[::1]:9400", false)->host, "::1");
  EXPECT_EQ(ParsePrometheusAddress("127.0.0.5:80", false)->host, "127.0.0.5");
  auto remote = ParsePrometheusAddress("0.0.0.0:9400", false);
  ASSERT_FALSE(remote.ok());
  EXPECT_NE(remote.status().message().find("--prometheus-allow-remote"), std::string::npos);
  EXPECT_FALSE(ParsePrometheusAddress("10.0.0.1:9400", false).ok());
  EXPECT_TRUE(ParsePrometheusAddress("0.0.0.0:9400", true).ok());
  EXPECT_FALSE(ParsePrometheusAddress("host:port", false).ok());
  EXPECT_FALSE(ParsePrometheusAddress("70000", false).ok());
}

TEST(LatestValuesTest, SeriesReadEveryOtherTickCarryOverForASecond) {
  constexpr int64_t kMs = 1'000'000;
  LatestValues latest;
  LatestSnapshot a;
  a.tick_wall_ns = 1000 * kMs;
  a.tick_mono_ns = a.tick_wall_ns;
  a.values = {{"cpu_utilization_ratio", "total", 0.5},
              {"process_resident_memory_bytes", "tree", 7}};
  latest.Publish(a);
  LatestSnapshot b;  // 100 ms later, the process tree not read this tick
  b.tick_wall_ns = 1100 * kMs;
  b.tick_mono_ns = b.tick_wall_ns;
  b.values = {{"cpu_utilization_ratio", "total", 0.6}};
  latest.Publish(b);
  LatestSnapshot got = latest.Get();
  ASSERT_EQ(got.values.size(), 2u);
  EXPECT_EQ(got.values[0].value, 0.6);
  EXPECT_EQ(got.values[1].metric, "process_resident_memory_bytes");
  EXPECT_EQ(got.values[1].value, 7);
  LatestSnapshot c;  // more than a second after the tree's last reading: it is gone
  c.tick_wall_ns = 2200 * kMs;
  c.tick_mono_ns = c.tick_wall_ns;
  c.values = {{"cpu_utilization_ratio", "total", 0.7}};
  latest.Publish(c);
  got = latest.Get();
  ASSERT_EQ(got.values.size(), 1u);
  EXPECT_EQ(got.values[0].value, 0.7);
}

TEST(PrometheusServerTest, ServesTheLatestTick) {
  LatestValues latest;
  latest.Publish(Snapshot());
  ListenAddress addr;  // 127.0.0.1, any port
  auto server = PrometheusServer::Start(addr, &latest, Node());
  ASSERT_TRUE(server.ok()) << server.status().message();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
  EXPECT_NE(res->body.find("device=\"total\"} 0.25"), std::string::npos);
  LatestSnapshot next = Snapshot();
  next.values[1].value = 0.75;
  latest.Publish(next);
  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("device=\"total\"} 0.75"), std::string::npos);
  (*server)->Stop();
}

// Issue 20: 200 slowloris clients (connected, sending a request head one byte at a time and
// never finishing it) must not stop a scrape: each scrape still answers within 1 s.
TEST(PrometheusServerTest, SlowlorisClientsDoNotStallScrapes) {
  LatestValues latest;
  latest.Publish(Snapshot());
  auto server = PrometheusServer::Start(ListenAddress{}, &latest, Node());
  ASSERT_TRUE(server.ok()) << server.status().message();
  const int port = (*server)->port();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << i;
    const std::string partial = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    ASSERT_EQ(::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(partial.size()));
    slow.push_back(fd);
  }
  // They keep dribbling a header byte every 50 ms (each byte resets a per-read timeout).
  std::atomic<bool> stop{false};
  std::thread dribble([&] {
    while (!stop) {
      for (int fd : slow) (void)!::send(fd, "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  for (int scrape = 0; scrape < 3; ++scrape) {
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(1, 0);
    client.set_read_timeout(1, 0);
    int64_t t0 = MonotonicNowNs();
    auto res = client.Get("/metrics");
    double seconds = static_cast<double>(MonotonicNowNs() - t0) / 1e9;
    ASSERT_TRUE(res) << "scrape " << scrape << " got no answer in " << seconds << " s";
    EXPECT_EQ(res->status, 200);
    EXPECT_NE(res->body.find("device=\"total\"} 0.25"), std::string::npos);
    EXPECT_LT(seconds, 1.0) << "scrape " << scrape;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  stop = true;
  dribble.join();
  // The server held a bounded number of them: the oldest were dropped to make room.
  EXPECT_LE((*server)->stats().max_open.load(), kPrometheusMaxConnections);
  EXPECT_GE((*server)->stats().evicted.load(), 200 - kPrometheusMaxConnections);
  for (int fd : slow) ::close(fd);
  (*server)->Stop();
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// A real Prometheus server (Debian's `prometheus` package) scrapes our endpoint on loopback;
// we then ask its HTTP API for one of our series.
TEST(PrometheusServerTest, ARealPrometheusScrapesIt) {
  const std::string binary = "/usr/bin/prometheus";
  if (!PathExists(binary)) {
    std::fprintf(stderr,
                 "\n*** SKIPPING: %s is not installed (apt-get install -y prometheus); the "
                 "Prometheus scrape test DID NOT RUN ***\n\n",
                 binary.c_str());
    GTEST_SKIP() << binary << " is not installed: the real-Prometheus test did not run";
  }
  LatestValues latest;
  latest.Publish(Snapshot());
  auto server = PrometheusServer::Start(ListenAddress{}, &latest, Node());
  ASSERT_TRUE(server.ok()) << server.status().message();

  std::string dir = testing::TempDir();
  int prom_port = FreePort();
  {
    std::ofstream config(dir + "/prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
           << "scrape_configs:\n  - job_name: trainprof\n    static_configs:\n"
           << "      - targets: ['127.0.0.1:" << (*server)->port() << "']\n";
  }
  std::vector<std::string> args = {
      binary, "--config.file=" + dir + "/prometheus.yml", "--storage.tsdb.path=" + dir + "/data",
      "--web.listen-address=127.0.0.1:" + std::to_string(prom_port), "--log.level=warn"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, binary.c_str(), nullptr, nullptr, argv.data(), environ), 0);

  httplib::Client prom("127.0.0.1", prom_port);
  prom.set_connection_timeout(1);
  nlohmann::json result;
  int64_t deadline = MonotonicNowNs() + 60 * kNanosPerSecond;
  while (MonotonicNowNs() < deadline) {
    auto res = prom.Get("/api/v1/query?query=trainprof_gpu_utilization_ratio");
    if (res && res->status == 200) {
      auto j = nlohmann::json::parse(res->body, nullptr, false);
      if (j.is_object() && j["data"]["result"].is_array() && !j["data"]["result"].empty()) {
        result = j["data"]["result"][0];
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  (*server)->Stop();

  ASSERT_TRUE(result.is_object()) << "Prometheus never returned trainprof_gpu_utilization_ratio";
  EXPECT_EQ(result["metric"]["node"], "algo-1");
  EXPECT_EQ(result["metric"]["device"], "gpu0");
  EXPECT_EQ(result["metric"]["uuid"], "GPU-1234");
  EXPECT_EQ(result["metric"]["model"], "NVIDIA H200");
  EXPECT_EQ(result["metric"]["job"], "trainprof");
  EXPECT_EQ(result["value"][1], "0.875");
}

}  // namespace
}  // namespace trainprof::agent
