#pragma once
// The catalog of every metric the collectors store: name, unit, kind, device label, source and
// meaning. It is data, not code: collectors name their metrics through the constants below,
// the Prometheus endpoint takes HELP/TYPE from it, and a test keeps docs/metrics.md in step
// with it (metric_catalog_test.cc). Names follow node_exporter conventions: base units in the
// name (bytes, seconds, hertz, celsius, joules, watts), ratios 0..1, `_total` for counters.

#include <span>
#include <string_view>

namespace trainprof::collect {

enum class MetricKind {
  kGauge,    // a value at the tick (rates computed by the collector are gauges too)
  kCounter,  // cumulative since some origin (boot, driver load); name ends in _total
};

std::string_view MetricKindName(MetricKind kind);  // "gauge" / "counter"

struct MetricSpec {
  std::string_view name;
  std::string_view unit;  // "ratio", "bytes", "bytes/s", "cores", "watts", ...
  MetricKind kind;
  std::string_view device;  // what the device label holds: "cpuN, total", "interface", "" ...
  std::string_view source;  // "/proc/stat", "NVML nvmlDeviceGetPowerUsage", ...
  std::string_view help;    // one line for people (Prometheus HELP)
};

// Every metric, in the order of docs/metrics.md.
std::span<const MetricSpec> MetricCatalog();
// nullptr when `name` is not in the catalog.
const MetricSpec* FindMetric(std::string_view name);

// Names used by the collectors. Contract names (DESIGN.md) first in each group.
namespace metric {
// /proc/stat, /proc/loadavg
inline constexpr std::string_view kCpuUtilization = "cpu_utilization_ratio";
inline constexpr std::string_view kCpuIowait = "cpu_iowait_ratio";
inline constexpr std::string_view kCpuUser = "cpu_user_ratio";
inline constexpr std::string_view kCpuSystem = "cpu_system_ratio";
inline constexpr std::string_view kCpuIdle = "cpu_idle_ratio";
inline constexpr std::string_view kCpuSteal = "cpu_steal_ratio";
inline constexpr std::string_view kContextSwitches = "context_switches_per_second";
inline constexpr std::string_view kProcsRunning = "processes_running";
inline constexpr std::string_view kProcsBlocked = "processes_blocked";
inline constexpr std::string_view kLoad1 = "load_average_1m";
inline constexpr std::string_view kLoad5 = "load_average_5m";
inline constexpr std::string_view kLoad15 = "load_average_15m";
// /proc/meminfo
inline constexpr std::string_view kMemoryUsed = "memory_used_bytes";
inline constexpr std::string_view kMemoryTotal = "memory_total_bytes";
inline constexpr std::string_view kMemoryAvailable = "memory_available_bytes";
inline constexpr std::string_view kMemoryFree = "memory_free_bytes";
inline constexpr std::string_view kMemoryCached = "memory_cached_bytes";
inline constexpr std::string_view kMemoryBuffers = "memory_buffers_bytes";
inline constexpr std::string_view kMemoryUtilization = "memory_utilization_ratio";
inline constexpr std::string_view kSwapTotal = "swap_total_bytes";
inline constexpr std::string_view kSwapUsed = "swap_used_bytes";
// cgroup v2
inline constexpr std::string_view kCgroupMemoryUsed = "cgroup_memory_used_bytes";
inline constexpr std::string_view kCgroupMemoryLimit = "cgroup_memory_limit_bytes";
inline constexpr std::string_view kCgroupMemoryUtilization = "cgroup_memory_utilization_ratio";
inline constexpr std::string_view kCgroupOomKills = "cgroup_memory_oom_kills_total";
inline constexpr std::string_view kCgroupCpuUsage = "cgroup_cpu_usage_cores";
inline constexpr std::string_view kCgroupCpuLimit = "cgroup_cpu_limit_cores";
inline constexpr std::string_view kCgroupCpuUtilization = "cgroup_cpu_utilization_ratio";
inline constexpr std::string_view kCgroupCpuThrottledRatio = "cgroup_cpu_throttled_periods_ratio";
inline constexpr std::string_view kCgroupCpuThrottledSeconds =
    "cgroup_cpu_throttled_seconds_per_second";
inline constexpr std::string_view kCgroupIoRead = "cgroup_io_read_bytes_per_second";
inline constexpr std::string_view kCgroupIoWrite = "cgroup_io_write_bytes_per_second";
inline constexpr std::string_view kCgroupIoReadOps = "cgroup_io_reads_per_second";
inline constexpr std::string_view kCgroupIoWriteOps = "cgroup_io_writes_per_second";
// /proc/net/dev
inline constexpr std::string_view kNetRxBytes = "network_receive_bytes_per_second";
inline constexpr std::string_view kNetTxBytes = "network_transmit_bytes_per_second";
inline constexpr std::string_view kNetRxPackets = "network_receive_packets_per_second";
inline constexpr std::string_view kNetTxPackets = "network_transmit_packets_per_second";
inline constexpr std::string_view kNetRxErrors = "network_receive_errors_total";
inline constexpr std::string_view kNetTxErrors = "network_transmit_errors_total";
inline constexpr std::string_view kNetRxDrops = "network_receive_drops_total";
inline constexpr std::string_view kNetTxDrops = "network_transmit_drops_total";
// /proc/diskstats
inline constexpr std::string_view kDiskReadBytes = "disk_read_bytes_per_second";
inline constexpr std::string_view kDiskWriteBytes = "disk_write_bytes_per_second";
inline constexpr std::string_view kDiskReads = "disk_reads_per_second";
inline constexpr std::string_view kDiskWrites = "disk_writes_per_second";
inline constexpr std::string_view kDiskBusy = "disk_busy_ratio";
inline constexpr std::string_view kDiskInProgress = "disk_io_in_progress";
inline constexpr std::string_view kDiskQueue = "disk_average_queue_length";
// statvfs
inline constexpr std::string_view kFsSize = "filesystem_size_bytes";
inline constexpr std::string_view kFsUsed = "filesystem_used_bytes";
inline constexpr std::string_view kFsAvailable = "filesystem_available_bytes";
inline constexpr std::string_view kFsUtilization = "filesystem_utilization_ratio";
// the training process tree (device "tree")
inline constexpr std::string_view kProcessCpu = "process_cpu_utilization_ratio";
inline constexpr std::string_view kProcessRss = "process_resident_memory_bytes";
inline constexpr std::string_view kProcessRead = "process_read_bytes_per_second";
inline constexpr std::string_view kProcessWrite = "process_write_bytes_per_second";
inline constexpr std::string_view kProcessThreads = "process_threads";
inline constexpr std::string_view kProcessCount = "process_count";
// one process of the tree (device "pid<P>"), or the tree's processes beyond the cap ("other")
inline constexpr std::string_view kPidCpu = "pid_cpu_utilization_ratio";
inline constexpr std::string_view kPidRss = "pid_resident_memory_bytes";
inline constexpr std::string_view kPidThreads = "pid_threads";
// NVML (device gpuN, or gpuN/migM, gpuN/pidP)
inline constexpr std::string_view kGpuUtilization = "gpu_utilization_ratio";
inline constexpr std::string_view kGpuMemoryUtilization = "gpu_memory_utilization_ratio";
inline constexpr std::string_view kGpuMemoryUsed = "gpu_memory_used_bytes";
inline constexpr std::string_view kGpuMemoryTotal = "gpu_memory_total_bytes";
inline constexpr std::string_view kGpuMemoryUsedRatio = "gpu_memory_used_ratio";
inline constexpr std::string_view kGpuPower = "gpu_power_watts";
inline constexpr std::string_view kGpuEnergy = "gpu_energy_joules_total";
inline constexpr std::string_view kGpuTemperature = "gpu_temperature_celsius";
inline constexpr std::string_view kGpuSmClock = "gpu_sm_clock_hertz";
inline constexpr std::string_view kGpuMemClock = "gpu_memory_clock_hertz";
inline constexpr std::string_view kGpuPcieRx = "gpu_pcie_receive_bytes_per_second";
inline constexpr std::string_view kGpuPcieTx = "gpu_pcie_transmit_bytes_per_second";
inline constexpr std::string_view kGpuNvlinkRx = "gpu_nvlink_receive_bytes_per_second";
inline constexpr std::string_view kGpuNvlinkTx = "gpu_nvlink_transmit_bytes_per_second";
inline constexpr std::string_view kGpuClockEventReasons = "gpu_clock_event_reasons";
inline constexpr std::string_view kGpuThrottlePower = "gpu_throttle_power";
inline constexpr std::string_view kGpuThrottleThermal = "gpu_throttle_thermal";
inline constexpr std::string_view kGpuEccCorrected = "gpu_ecc_corrected_errors_total";
inline constexpr std::string_view kGpuEccUncorrected = "gpu_ecc_uncorrected_errors_total";
inline constexpr std::string_view kGpuProcessMemory = "gpu_process_memory_used_bytes";
}  // namespace metric

}  // namespace trainprof::collect
