#include "collect/diskstats_collector.h"

#include <cctype>

#include "base/files.h"
#include "collect/metric_catalog.h"
#include "model/data_quality.h"

namespace trainprof::collect {
namespace {

bool EndsWithDigit(std::string_view s) { return !s.empty() && std::isdigit(s.back()); }

// Name rules when sysfs cannot tell: sdXN, vdXN, xvdXN, hdXN are partitions; nvme/mmcblk
// partitions carry a 'p' before the number.
bool LooksLikePartition(std::string_view name) {
  if (!EndsWithDigit(name)) return false;
  for (std::string_view prefix : {"sd", "vd", "hd", "xvd"}) {
    if (name.starts_with(prefix)) return true;
  }
  if (name.starts_with("nvme") || name.starts_with("mmcblk")) {
    size_t p = name.rfind('p');
    return p != std::string_view::npos && p + 1 < name.size() &&
           std::isdigit(static_cast<unsigned char>(name[p + 1])) && p > 4;
  }
  return false;
}

}  // namespace

DiskstatsCollector::DiskstatsCollector(const std::string& proc_root, const std::string& sys_root)
    : file_(JoinPath(proc_root, "diskstats")), sys_root_(sys_root) {}

bool DiskstatsCollector::IsReported(std::string_view device) const {
  for (std::string_view prefix : {"loop", "ram", "zram", "fd"}) {
    if (device.starts_with(prefix)) return false;
  }
  const std::string dir = JoinPath(JoinPath(sys_root_, "class/block"), std::string(device));
  if (IsDirectory(dir)) return !PathExists(JoinPath(dir, "partition"));
  return !LooksLikePartition(device);
}

DiskstatsCollector::Device* DiskstatsCollector::Find(std::string_view name) {
  for (Device& d : devices_) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

void DiskstatsCollector::Sample(const Tick& tick, SampleSink& sink) {
  std::string_view text;
  if (!file_.Read(&text)) {
    sink.Count(kReadErrorsCounter, 1);
    return;
  }
  TextCursor cursor(text);
  std::string_view line;
  while (cursor.NextLine(&line)) {
    if (line.empty()) continue;
    std::string_view rest = line;
    NextToken(&rest);  // major
    NextToken(&rest);  // minor
    std::string_view name = NextToken(&rest);
    // reads merged sectors ms | writes merged sectors ms | in_progress io_ms weighted_ms ...
    unsigned long long v[11];
    if (name.empty() || ParseU64s(rest, v, 11) < 11) {
      sink.Count(model::dq::kParseErrors, 1);
      continue;
    }
    Device* dev = Find(name);
    if (dev == nullptr) {
      // First sight of a device: decide once whether it is reported (sysfs lookups stay out
      // of later ticks).
      devices_.push_back(Device{.name = std::string(name), .reported = IsReported(name)});
      dev = &devices_.back();
    }
    if (!dev->reported) continue;
    const unsigned long long reads = v[0], sectors_read = v[2], writes = v[4],
                             sectors_written = v[6], in_progress = v[8], io_ms = v[9],
                             weighted_ms = v[10];
    const std::string_view label = dev->name;
    sink.Add(metric::kDiskInProgress, label, static_cast<double>(in_progress));
    if (dev->have_prev && tick.mono_ns > dev->mono_ns && reads >= dev->reads &&
        writes >= dev->writes && sectors_read >= dev->sectors_read &&
        sectors_written >= dev->sectors_written && io_ms >= dev->io_ms &&
        weighted_ms >= dev->weighted_ms) {
      const double dt_s = static_cast<double>(tick.mono_ns - dev->mono_ns) / 1e9;
      // Sectors in /proc/diskstats are always 512 bytes, whatever the device's block size.
      sink.Add(metric::kDiskReadBytes, label,
               static_cast<double>(sectors_read - dev->sectors_read) * 512.0 / dt_s);
      sink.Add(metric::kDiskWriteBytes, label,
               static_cast<double>(sectors_written - dev->sectors_written) * 512.0 / dt_s);
      sink.Add(metric::kDiskReads, label, static_cast<double>(reads - dev->reads) / dt_s);
      sink.Add(metric::kDiskWrites, label, static_cast<double>(writes - dev->writes) / dt_s);
      double busy = static_cast<double>(io_ms - dev->io_ms) / (dt_s * 1000.0);
      sink.Add(metric::kDiskBusy, label, busy > 1.0 ? 1.0 : busy);
      sink.Add(metric::kDiskQueue, label,
               static_cast<double>(weighted_ms - dev->weighted_ms) / (dt_s * 1000.0));
    }
    dev->reads = reads;
    dev->sectors_read = sectors_read;
    dev->writes = writes;
    dev->sectors_written = sectors_written;
    dev->io_ms = io_ms;
    dev->weighted_ms = weighted_ms;
    dev->mono_ns = tick.mono_ns;
    dev->have_prev = true;
  }
}

}  // namespace trainprof::collect
