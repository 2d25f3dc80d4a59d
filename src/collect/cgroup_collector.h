#pragma once
// The job's cgroup v2: memory used against memory.max, CPU used against cpu.max (or the
// cpuset when there is no quota), throttling (cpu.stat), OOM kills and block I/O (io.stat).
// In a container these are the limits that matter, not the host's. Called from the agent's
// sampling thread.

#include <string>

#include "base/status.h"
#include "collect/collector.h"
#include "collect/proc_file.h"

namespace trainprof::collect {

class CgroupCollector : public Collector {
 public:
  // Finds the cgroup: ctx.cgroup_path (absolute, or relative to ctx.cgroup_root), else the
  // cgroup of the first root pid (or of this process) from /proc/<pid>/cgroup.
  // FailedPrecondition on a cgroup v1 (or hybrid) host, NotFound when the directory is missing.
  static StatusOr<std::unique_ptr<CgroupCollector>> Create(const CollectorContext& ctx);
  explicit CgroupCollector(const std::string& dir);

  std::string_view name() const override { return "cgroup"; }
  void Sample(const Tick& tick, SampleSink& sink) override;
  const std::string& dir() const { return dir_; }

 private:
  void SampleMemory(SampleSink& sink);
  void SampleCpu(const Tick& tick, SampleSink& sink);
  void SampleIo(const Tick& tick, SampleSink& sink);
  // Reads a one-value file: false if missing; *unlimited for "max".
  bool ReadValue(ProcFile& file, SampleSink& sink, double* value, bool* unlimited);

  std::string dir_;
  ProcFile memory_current_, memory_max_, memory_events_, cpu_stat_, cpu_max_, cpuset_, io_stat_;
  // Previous cumulative readings for rates.
  int64_t cpu_mono_ns_ = 0;
  unsigned long long usage_ = 0, nr_periods_ = 0, nr_throttled_ = 0, throttled_usec_ = 0;
  bool have_cpu_ = false;
  int64_t io_mono_ns_ = 0;
  unsigned long long rbytes_ = 0, wbytes_ = 0, rios_ = 0, wios_ = 0;
  bool have_io_ = false;
};

// Number of CPUs in a cpuset list such as "0-3,8,10-11"; -1 when malformed.
int CountCpuList(std::string_view list);

}  // namespace trainprof::collect
