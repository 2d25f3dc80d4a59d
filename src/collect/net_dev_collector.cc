#include "collect/net_dev_collector.h"

#include "base/files.h"
#include "collect/metric_catalog.h"
#include "model/data_quality.h"

namespace trainprof::collect {

NetDevCollector::NetDevCollector(const std::string& proc_root)
    : file_(JoinPath(proc_root, "net/dev")) {}

NetDevCollector::Interface* NetDevCollector::Find(std::string_view name) {
  for (Interface& i : interfaces_) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

void NetDevCollector::Sample(const Tick& tick, SampleSink& sink) {
  std::string_view text;
  if (!file_.Read(&text)) {
    sink.Count(kReadErrorsCounter, 1);
    return;
  }
  TextCursor cursor(text);
  std::string_view line;
  // Two header lines ("Inter-|   Receive ..." and " face |bytes ...").
  for (int i = 0; i < 2 && cursor.NextLine(&line);) ++i;
  while (cursor.NextLine(&line)) {
    if (line.empty()) continue;
    std::string_view key, rest;
    unsigned long long v[16];
    if (!SplitKey(line, &key, &rest) || ParseU64s(rest, v, 16) < 12) {
      sink.Count(model::dq::kParseErrors, 1);
      continue;
    }
    std::string_view name = NextToken(&key);
    // Columns: rx bytes packets errs drop fifo frame compressed multicast, tx bytes packets
    // errs drop fifo colls carrier compressed.
    const unsigned long long rx_bytes = v[0], rx_packets = v[1], rx_errs = v[2], rx_drop = v[3];
    const unsigned long long tx_bytes = v[8], tx_packets = v[9], tx_errs = v[10], tx_drop = v[11];
    Interface* iface = Find(name);
    if (iface == nullptr) {
      interfaces_.push_back(Interface{.name = std::string(name)});
      iface = &interfaces_.back();
    } else if (tick.mono_ns > iface->mono_ns && rx_bytes >= iface->rx_bytes &&
               tx_bytes >= iface->tx_bytes && rx_packets >= iface->rx_packets &&
               tx_packets >= iface->tx_packets) {
      // Counters that went back mean the interface was recreated: skip that interval.
      const double per_s = 1e9 / static_cast<double>(tick.mono_ns - iface->mono_ns);
      const std::string_view dev = iface->name;
      sink.Add(metric::kNetRxBytes, dev, static_cast<double>(rx_bytes - iface->rx_bytes) * per_s);
      sink.Add(metric::kNetTxBytes, dev, static_cast<double>(tx_bytes - iface->tx_bytes) * per_s);
      sink.Add(metric::kNetRxPackets, dev,
               static_cast<double>(rx_packets - iface->rx_packets) * per_s);
      sink.Add(metric::kNetTxPackets, dev,
               static_cast<double>(tx_packets - iface->tx_packets) * per_s);
    }
    const std::string_view dev = iface->name;
    sink.Add(metric::kNetRxErrors, dev, static_cast<double>(rx_errs));
    sink.Add(metric::kNetTxErrors, dev, static_cast<double>(tx_errs));
    sink.Add(metric::kNetRxDrops, dev, static_cast<double>(rx_drop));
    sink.Add(metric::kNetTxDrops, dev, static_cast<double>(tx_drop));
    iface->rx_bytes = rx_bytes;
    iface->rx_packets = rx_packets;
    iface->tx_bytes = tx_bytes;
    iface->tx_packets = tx_packets;
    iface->mono_ns = tick.mono_ns;
  }
}

}  // namespace trainprof::collect
