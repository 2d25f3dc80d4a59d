#include "collect/filesystem_collector.h"

#include <sys/statvfs.h>

#include "collect/metric_catalog.h"

namespace trainprof::collect {

void FilesystemCollector::Sample(const Tick& /*tick*/, SampleSink& sink) {
  for (const std::string& path : paths_) {
    struct statvfs st;
    if (::statvfs(path.c_str(), &st) != 0) {
      sink.Count(kReadErrorsCounter, 1);
      continue;
    }
    const double frsize = static_cast<double>(st.f_frsize);
    const double size = static_cast<double>(st.f_blocks) * frsize;
    const double used = static_cast<double>(st.f_blocks - st.f_bfree) * frsize;
    const double avail = static_cast<double>(st.f_bavail) * frsize;
    sink.Add(metric::kFsSize, path, size);
    sink.Add(metric::kFsUsed, path, used);
    sink.Add(metric::kFsAvailable, path, avail);
    // As df computes Use%: blocks reserved for root count neither as used nor available.
    if (used + avail > 0) sink.Add(metric::kFsUtilization, path, used / (used + avail));
  }
}

}  // namespace trainprof::collect
