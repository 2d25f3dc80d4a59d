#pragma once
// Per-block-device I/O from /proc/diskstats: bytes and operations per second, busy ratio,
// requests in flight and the average queue. Whole disks only: partitions, loop, ram and zram
// devices are skipped (a partition's I/O is already in its disk's line; loop/ram are not
// storage). Called from the agent's sampling thread.

#include <string>
#include <vector>

#include "collect/collector.h"
#include "collect/proc_file.h"

namespace trainprof::collect {

class DiskstatsCollector : public Collector {
 public:
  DiskstatsCollector(const std::string& proc_root, const std::string& sys_root);
  std::string_view name() const override { return "diskstats"; }
  void Sample(const Tick& tick, SampleSink& sink) override;

  // Whether `device` is reported: decided from /sys/class/block/<dev>/partition when sysfs
  // knows the device, else from the name (sda1, nvme0n1p2, mmcblk0p1 are partitions).
  bool IsReported(std::string_view device) const;

 private:
  struct Device {
    std::string name;
    bool reported = false;
    unsigned long long reads = 0, sectors_read = 0, writes = 0, sectors_written = 0;
    unsigned long long io_ms = 0, weighted_ms = 0;
    int64_t mono_ns = 0;
    bool have_prev = false;
  };
  Device* Find(std::string_view name);

  ProcFile file_;
  std::string sys_root_;
  std::vector<Device> devices_;
};

}  // namespace trainprof::collect
