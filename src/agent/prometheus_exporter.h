#pragma once
// Serves the latest tick as Prometheus /metrics (text exposition format 0.0.4), so clusters
// can scrape every node into their own monitoring.
//
// Each stored metric M becomes the family trainprof_M with labels node and device (and, for
// GPUs, uuid and model from the node's metadata). Names ending in _total are counters, the
// rest gauges. Data-quality counters are exported as trainprof_data_quality_total{counter=...}.
// Values are the latest tick's; no timestamps are attached (Prometheus stamps the scrape).
//
// The server binds 127.0.0.1 unless told otherwise; a non-loopback address must be asked for
// explicitly (ParsePrometheusAddress with allow_remote).
// Slow or idle clients cannot stall scrapes (issue 20): one poll loop (connection_loop.h)
// serves every connection at once, at most kPrometheusMaxConnections open (the oldest dropped
// for a new one), a request head within kPrometheusRequestTimeoutMs and 8 KiB, one request
// per connection (HTTP/1.1 with "Connection: close").
// Threads: the loop's thread answers requests; it only reads LatestValues and NodeInfo.

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "agent/latest_values.h"
#include "base/status.h"
#include "model/run_metadata.h"

namespace trainprof::agent {

class ConnectionLoop;
struct ConnectionStats;

inline constexpr int kPrometheusMaxConnections = 64;
inline constexpr int64_t kPrometheusRequestTimeoutMs = 2000;

struct ListenAddress {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
};

// "9400", ":9400", "127.0.0.1:9400", "localhost:9400", "[::1]:9400", "0.0.0.0:9400".
// Refuses addresses other than loopback unless `allow_remote`.
StatusOr<ListenAddress> ParsePrometheusAddress(const std::string& text, bool allow_remote);
bool IsLoopbackHost(const std::string& host);

// Renders one snapshot; `node` supplies the node label and the GPUs' uuid/model.
std::string RenderPrometheusText(const LatestSnapshot& snapshot, const model::NodeInfo& node);

class PrometheusServer {
 public:
  ~PrometheusServer();
  static StatusOr<std::unique_ptr<PrometheusServer>> Start(const ListenAddress& address,
                                                           const LatestValues* latest,
                                                           model::NodeInfo node);
  // The node's facts may grow after start (GPUs described by the collectors).
  void SetNode(model::NodeInfo node);
  void Stop();
  int port() const { return port_; }
  std::string url() const;
  const ConnectionStats& stats() const;

 private:
  PrometheusServer() = default;
  std::string Respond(std::string_view request);

  std::unique_ptr<ConnectionLoop> loop_;
  std::string host_;
  int port_ = 0;
  const LatestValues* latest_ = nullptr;
  mutable std::mutex node_mu_;
  model::NodeInfo node_;
};

}  // namespace trainprof::agent
