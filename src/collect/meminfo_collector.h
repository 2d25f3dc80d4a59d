#pragma once
// Node memory from /proc/meminfo: total, used (total - available), available, free, cached,
// buffers, swap. Called from the agent's sampling thread.

#include <string>

#include "collect/collector.h"
#include "collect/proc_file.h"

namespace trainprof::collect {

class MeminfoCollector : public Collector {
 public:
  explicit MeminfoCollector(const std::string& proc_root);
  std::string_view name() const override { return "meminfo"; }
  void Sample(const Tick& tick, SampleSink& sink) override;

 private:
  ProcFile meminfo_;
};

}  // namespace trainprof::collect
