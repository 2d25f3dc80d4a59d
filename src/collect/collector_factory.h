#pragma once
// Builds the node's collector list from a CollectorContext: every system source, the cgroup
// when the host has cgroup v2, the process tree when there are root pids (or a cgroup to take
// members from), filesystems when paths are given, and NVML unless GPUs are off. Sources that
// are not available become one line in `notes` (for the agent to log once and show in the
// summary), never an error: the job is profiled with what there is.

#include <memory>
#include <string>
#include <vector>

#include "collect/collector.h"

namespace trainprof::collect {

struct CollectorSet {
  std::vector<std::unique_ptr<Collector>> collectors;
  std::vector<std::string> notes;  // "no cgroup v2 hierarchy at ...", "cannot load NVML ..."
};

CollectorSet BuildCollectors(const CollectorContext& ctx);

}  // namespace trainprof::collect
