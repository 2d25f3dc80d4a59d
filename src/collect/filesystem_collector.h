#pragma once
// Filesystem usage (statvfs) of the paths the job cares about: the run directory and the data
// paths the user names; device label = the path as given. statvfs on a dead network mount can
// block; the agent only passes local paths it was given, and a failing path is counted and
// retried each tick. Called from the agent's sampling thread.

#include <string>
#include <vector>

#include "collect/collector.h"

namespace trainprof::collect {

class FilesystemCollector : public Collector {
 public:
  explicit FilesystemCollector(std::vector<std::string> paths) : paths_(std::move(paths)) {}
  std::string_view name() const override { return "filesystem"; }
  void Sample(const Tick& tick, SampleSink& sink) override;

 private:
  std::vector<std::string> paths_;
};

}  // namespace trainprof::collect
