#pragma once
// How long work (an import, an export, a report) says how far it got, without knowing who
// listens: the CLI passes a ProgressSink down (cli/progress.h draws it on a terminal); library
// code calls it through the null-safe helpers below and never prints anything itself.
//
// Units are the work's own (bytes read for imports, bytes written for exports); a sink shows a
// percentage and an ETA only once a total was announced.
// Threads: the work calls from its own thread; a sink must make Advance cheap (an atomic add)
// since it may be called for every chunk read.

#include <sys/stat.h>

#include <cstdint>
#include <string>

namespace trainprof {

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // More units of known total work (called again as more work is discovered).
  virtual void AddTotal(int64_t units) = 0;
  // Units done since the previous call.
  virtual void Advance(int64_t units) = 0;
  // What is being done now ("rules", a file name); shown beside the numbers.
  virtual void SetStage(const std::string& stage) { (void)stage; }
};

inline void ProgressAddTotal(ProgressSink* sink, int64_t units) {
  if (sink != nullptr && units > 0) sink->AddTotal(units);
}
inline void ProgressAdvance(ProgressSink* sink, int64_t units) {
  if (sink != nullptr && units > 0) sink->Advance(units);
}
// Announces the size of `path` as work to come (a file that cannot be stat'ed adds nothing).
inline void ProgressAddFile(ProgressSink* sink, const std::string& path) {
  struct stat st {};
  if (sink != nullptr && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    ProgressAddTotal(sink, static_cast<int64_t>(st.st_size));
  }
}
// Advances `sink` by the size of `path` when it goes out of scope: progress by whole files, for
// work that reads a file at once.
class ProgressFileScope {
 public:
  ProgressFileScope(ProgressSink* sink, const std::string& path) : sink_(sink) {
    struct stat st {};
    if (sink_ != nullptr && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      bytes_ = static_cast<int64_t>(st.st_size);
    }
  }
  ~ProgressFileScope() { ProgressAdvance(sink_, bytes_); }
  ProgressFileScope(const ProgressFileScope&) = delete;
  ProgressFileScope& operator=(const ProgressFileScope&) = delete;

 private:
  ProgressSink* sink_;
  int64_t bytes_ = 0;
};

inline void ProgressStage(ProgressSink* sink, const std::string& stage) {
  if (sink != nullptr) sink->SetStage(stage);
}

}  // namespace trainprof
