#pragma once
// Per-interface network traffic from /proc/net/dev: bytes and packets per second, and the
// cumulative error and drop counters. Interfaces that come and go (veth of containers) are
// followed by name. Called from the agent's sampling thread.

#include <string>
#include <vector>

#include "collect/collector.h"
#include "collect/proc_file.h"

namespace trainprof::collect {

class NetDevCollector : public Collector {
 public:
  explicit NetDevCollector(const std::string& proc_root);
  std::string_view name() const override { return "net_dev"; }
  void Sample(const Tick& tick, SampleSink& sink) override;

 private:
  struct Interface {
    std::string name;
    unsigned long long rx_bytes = 0, rx_packets = 0, tx_bytes = 0, tx_packets = 0;
    int64_t mono_ns = 0;
  };
  Interface* Find(std::string_view name);

  ProcFile file_;
  std::vector<Interface> interfaces_;
};

}  // namespace trainprof::collect
