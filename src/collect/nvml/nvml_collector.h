#pragma once
// GPUs through NVML, loaded at run time (nvml_api.h). One NvmlCollector covers every GPU of
// the node; device labels are gpuN, gpuN/migM for MIG instances and gpuN/pidP for per-process
// memory.
//
// Threads: Sample() is called from the agent's sampling thread, but every NVML call runs on
// this collector's own worker thread. NVML calls can block for seconds on a wedged driver or
// a GPU that is falling off the bus; Sample waits for the worker only until a deadline, then
// counts `nvml_timeouts` and returns without GPU values for that tick. While the worker is
// still stuck, later ticks return at once (counted again), so the agent's tick never stalls.
//
// Missing is not zero: a field NVML answers NOT_SUPPORTED (or NO_PERMISSION) for is
// remembered per GPU, never asked again and never stored. A GPU that returns GPU_IS_LOST is
// logged once, counted (`gpu_lost`) and not queried any more; the other GPUs go on.

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "collect/collector.h"

namespace trainprof::collect::nvml {

class NvmlCollector : public Collector {
 public:
  struct Options {
    std::string library = "libnvidia-ml.so.1";
    // How long Sample waits for one round of NVML calls; init gets 10x as long.
    std::chrono::milliseconds call_timeout{1000};
  };
  // Loads the library, initialises NVML and lists the GPUs (on the worker thread, time-boxed).
  // Unavailable when there is no usable NVML (library missing, driver not loaded, init hung).
  static StatusOr<std::unique_ptr<NvmlCollector>> Create(const Options& options);
  ~NvmlCollector() override;

  std::string_view name() const override { return "nvml"; }
  void Sample(const Tick& tick, SampleSink& sink) override;
  void Describe(model::NodeInfo* node) const override;

  size_t gpu_count() const;

  struct Shared;  // state shared with the worker thread (defined in the .cc)

 private:
  NvmlCollector(std::shared_ptr<Shared> shared, std::thread worker, Options options);
  std::shared_ptr<Shared> shared_;
  std::thread worker_;
  Options options_;
};

}  // namespace trainprof::collect::nvml
