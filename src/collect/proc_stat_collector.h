#pragma once
// CPU time per core and for the node (/proc/stat) turned into ratios of each interval, plus
// context switches, runnable/blocked tasks and the load averages (/proc/loadavg). Called from
// the agent's sampling thread.

#include <string>
#include <vector>

#include "collect/collector.h"
#include "collect/proc_file.h"

namespace trainprof::collect {

class ProcStatCollector : public Collector {
 public:
  explicit ProcStatCollector(const std::string& proc_root);
  std::string_view name() const override { return "proc_stat"; }
  void Sample(const Tick& tick, SampleSink& sink) override;

 private:
  // Cumulative jiffies of one "cpu" line: user nice system idle iowait irq softirq steal.
  struct CpuTimes {
    unsigned long long v[8] = {};
    bool valid = false;
  };
  void EmitCpu(size_t slot, const CpuTimes& now, SampleSink& sink);
  // Slot 0 is the node total, slot n+1 is cpuN.
  size_t SlotFor(std::string_view label, bool* ok);

  ProcFile stat_;
  ProcFile loadavg_;
  std::vector<CpuTimes> prev_;
  std::vector<std::string> devices_;  // "total", "cpu0", ... kept so Add gets stable views
  unsigned long long prev_ctxt_ = 0;
  int64_t prev_mono_ns_ = 0;
  bool have_prev_ctxt_ = false;
};

}  // namespace trainprof::collect
