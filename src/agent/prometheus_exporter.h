#pragma once
// Serves the latest tick as Prometheus /metrics (text exposition format 0.0.4), so clusters
// can scrape every node into their own monitoring.
//
// Each stored metric M becomes the family trainprof_M with labels node and device (and, for
// GPUs, uuid and model from the node's metadata). Names ending in _total are counters, the
// rest gauges. Rates and shares are also accumulated into counters (X_per_second -> X_total,
// per-core CPU shares -> cpu_{busy,idle,iowait}_seconds_total: LatestSnapshot::integrated), so
// that rate() and increase() work. The job's steps (step_metrics.h) give trainprof_steps_total,
// the trainprof_step_duration_seconds histogram, trainprof_data_wait_seconds_total and
// throughput gauges. Data-quality counters are exported as
// trainprof_data_quality_total{counter=...}. PrometheusNaming renames the series whose meaning
// matches to dcgm-exporter's and node_exporter's names (docs/cli.md has the map and units).
// Values are the latest tick's; no timestamps are attached (Prometheus stamps the scrape).
//
// The server binds 127.0.0.1 unless told otherwise; a non-loopback address must be asked for
// explicitly (ParsePrometheusAddress with allow_remote).
// Slow or idle clients cannot stall scrapes (issue 20): one poll loop (connection_loop.h)
// serves every connection at once, at most kPrometheusMaxConnections open (the oldest dropped
// for a new one), a request head within kPrometheusRequestTimeoutMs and 8 KiB, one request
// per connection (HTTP/1.1 with "Connection: close").
// Threads: the loop's thread answers requests; it only reads LatestValues and NodeInfo.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "agent/latest_values.h"
#include "agent/step_metrics.h"
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

// Which other exporters' names to use where the meaning matches (--prometheus-names).
struct PrometheusNaming {
  bool dcgm = false;           // GPU series as dcgm-exporter's DCGM_FI_DEV_* (its units)
  bool node_exporter = false;  // host series as node_exporter's node_* (its units)
};
// "trainprof" (none), "dcgm", "node_exporter", "all", or a comma-separated list.
StatusOr<PrometheusNaming> ParsePrometheusNames(const std::string& text);

// Renders one snapshot; `node` supplies the node label and the GPUs' uuid/model; `steps`
// (optional) the job's step figures by mode.
std::string RenderPrometheusText(const LatestSnapshot& snapshot, const model::NodeInfo& node,
                                 const PrometheusNaming& naming = {},
                                 const std::map<std::string, StepModeStats>* steps = nullptr);

class PrometheusServer {
 public:
  ~PrometheusServer();
  // `steps` (optional) must outlive the server.
  static StatusOr<std::unique_ptr<PrometheusServer>> Start(const ListenAddress& address,
                                                           const LatestValues* latest,
                                                           model::NodeInfo node,
                                                           PrometheusNaming naming = {},
                                                           const StepMetrics* steps = nullptr);
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
  PrometheusNaming naming_;
  const StepMetrics* steps_ = nullptr;
  mutable std::mutex node_mu_;
  model::NodeInfo node_;
};

}  // namespace trainprof::agent
