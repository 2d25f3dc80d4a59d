#pragma once
// The contract between samplers and the agent loop. Each data source (/proc/stat, meminfo,
// net/dev, diskstats, cgroup v2, the process tree, NVML) is one Collector. The agent calls
// every collector once per tick from its sampling thread, in order, with one timestamp per tick.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/run_metadata.h"

namespace trainprof::collect {

// One sampling tick: the wall-clock timestamp stored with every value of the tick, and a
// monotonic reading for computing rates (never stored).
struct Tick {
  int64_t wall_ns = 0;
  int64_t mono_ns = 0;
};

// Where a collector puts its readings. Metrics a source does not have are simply not added:
// missing is not zero.
class SampleSink {
 public:
  virtual ~SampleSink() = default;
  virtual void Add(std::string_view metric, std::string_view device, double value) = 0;
  // Bumps a data-quality counter (model/data_quality.h names, or collector-specific ones).
  virtual void Count(std::string_view counter, int64_t delta) = 0;
  // A fact worth keeping with the run at this tick (stored as an annotation; e.g. who a
  // process is). Collectors keep these few and bounded. Default: dropped.
  virtual void Note(std::string_view /*key*/, std::string_view /*value*/) {}
};

// What to watch. Paths are roots so that tests can point them at canned trees.
struct CollectorContext {
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string cgroup_path;            // the job's cgroup v2 directory, "" to detect from pids
  std::vector<int> root_pids;         // the training process tree's roots
  std::vector<std::string> fs_paths;  // filesystems to report usage for (run dir, data paths)
  std::string nvml_library = "libnvidia-ml.so.1";  // overridable (replay library in tests)
  bool gpus = true;
  // The process tree costs ~8 us of CPU per process per sample, mostly the kernel formatting
  // /proc/<pid>/stat: it is sampled at most this often, whatever the tick (at --interval
  // 100ms, every other tick: a 20-process tree then stays within 0.2 % of a core). 0: every
  // tick.
  int process_min_interval_ms = 200;
  // How long one round of NVML calls may take before the tick goes on without GPU values.
  int nvml_timeout_ms = 1000;
};

// Data-quality counters the collectors bump (besides model::dq::kParseErrors for malformed
// lines). Stable names: they are stored with the run and shown by `trainprof show`.
inline constexpr std::string_view kReadErrorsCounter = "collector_read_errors";
inline constexpr std::string_view kNvmlTimeoutsCounter = "nvml_timeouts";
inline constexpr std::string_view kNvmlErrorsCounter = "nvml_errors";
inline constexpr std::string_view kGpuLostCounter = "gpu_lost";

class Collector {
 public:
  virtual ~Collector() = default;
  virtual std::string_view name() const = 0;
  // Reads the source once and adds this tick's values. Counters become rates against the
  // previous call, so the first call may add nothing for them. Never throws, never blocks for
  // long: a failing source counts the failure and adds nothing.
  virtual void Sample(const Tick& tick, SampleSink& sink) = 0;
  // Facts for the node's metadata (GPU models, ...); default: nothing.
  virtual void Describe(model::NodeInfo* /*node*/) const {}
};

}  // namespace trainprof::collect
