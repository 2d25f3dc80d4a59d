#include "collect/collector_factory.h"

#include "collect/cgroup_collector.h"
#include "collect/diskstats_collector.h"
#include "collect/filesystem_collector.h"
#include "collect/meminfo_collector.h"
#include "collect/net_dev_collector.h"
#include "collect/nvml/nvml_collector.h"
#include "collect/proc_stat_collector.h"
#include "collect/process_tree_collector.h"

namespace trainprof::collect {

CollectorSet BuildCollectors(const CollectorContext& ctx) {
  CollectorSet set;
  set.collectors.push_back(std::make_unique<ProcStatCollector>(ctx.proc_root));
  set.collectors.push_back(std::make_unique<MeminfoCollector>(ctx.proc_root));
  set.collectors.push_back(std::make_unique<NetDevCollector>(ctx.proc_root));
  set.collectors.push_back(std::make_unique<DiskstatsCollector>(ctx.proc_root, ctx.sys_root));
  if (!ctx.fs_paths.empty()) {
    set.collectors.push_back(std::make_unique<FilesystemCollector>(ctx.fs_paths));
  }

  StatusOr<std::unique_ptr<CgroupCollector>> cgroup = CgroupCollector::Create(ctx);
  std::string cgroup_dir;
  if (cgroup.ok()) {
    cgroup_dir = (*cgroup)->dir();
    set.collectors.push_back(std::move(*cgroup));
  } else {
    set.notes.push_back(cgroup.status().message());
  }

  std::unique_ptr<ProcessTreeCollector> tree;
  if (!ctx.root_pids.empty()) {
    tree = std::make_unique<ProcessTreeCollector>(ctx.proc_root, ctx.root_pids);
  } else if (!ctx.cgroup_path.empty() && !cgroup_dir.empty()) {
    // Attached to a cgroup without pids: the cgroup's processes are the job.
    tree = ProcessTreeCollector::ForCgroup(ctx.proc_root, cgroup_dir);
  }
  if (tree != nullptr) {
    tree->set_min_interval_ns(static_cast<int64_t>(ctx.process_min_interval_ms) * 1000000);
    set.collectors.push_back(std::move(tree));
  }

  if (ctx.gpus) {
    nvml::NvmlCollector::Options options;
    options.library = ctx.nvml_library;
    options.call_timeout = std::chrono::milliseconds(ctx.nvml_timeout_ms);
    StatusOr<std::unique_ptr<nvml::NvmlCollector>> gpus = nvml::NvmlCollector::Create(options);
    if (gpus.ok()) {
      set.collectors.push_back(std::move(*gpus));
    } else {
      set.notes.push_back(gpus.status().message() + "; no GPU metrics");
    }
  }
  return set;
}

}  // namespace trainprof::collect
