#pragma once
// Progress of long CLI work (import, export, report) on a terminal: one line on stderr, redrawn
// at most 10 times a second, with what is done (bytes or items), the percentage and ETA once a
// total is known, the rate, and the stage; cleared when the work ends. Nothing is drawn when
// stderr is not a terminal (piped, redirected: logs stay clean), under --quiet, or when the work
// ends before the first second (TRAINPROF_PROGRESS_AFTER_MS changes that delay; tests set 0).
// Threads: the work calls the ProgressSink methods from its thread (atomic adds); a drawing
// thread of ours reads them. Finish() (or the destructor) stops it and clears the line.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "base/progress.h"

namespace CLI {
class App;
}

namespace trainprof::cli {

// --quiet: no progress and no informational lines (errors and warnings still go to stderr).
// Process-wide: set by the top-level flag or the subcommands' own --quiet.
bool Quiet();
void SetQuiet(bool quiet);
// Adds --quiet/-q to `app`, setting the process-wide flag.
void AddQuietFlag(CLI::App* app);

struct ProgressOptions {
  std::string label;           // "import", "export", "report"
  bool bytes = true;           // units are bytes (else items)
  int fd = 2;                  // drawn here when it is a terminal
  int64_t show_after_ms = -1;  // -1: $TRAINPROF_PROGRESS_AFTER_MS, else 1000
  bool force = false;          // draw even when fd is not a terminal (tests of the drawing)
};

class TerminalProgress : public ProgressSink {
 public:
  explicit TerminalProgress(ProgressOptions options);
  ~TerminalProgress() override;
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;

  void AddTotal(int64_t units) override;
  void Advance(int64_t units) override;
  void SetStage(const std::string& stage) override;
  // Stops drawing and clears the line if one was drawn. Idempotent.
  void Finish();
  // Whether it draws at all (a terminal, not quiet).
  bool enabled() const { return enabled_; }
  int64_t draws() const { return draws_.load(); }

  // The line for one state, at most `width` columns (no control characters).
  static std::string FormatLine(const std::string& label, const std::string& stage, int64_t done,
                                int64_t total, double elapsed_s, bool bytes, int width);

 private:
  void Loop();
  void Draw(double elapsed_s);

  ProgressOptions options_;
  bool enabled_ = false;
  std::atomic<int64_t> done_{0};
  std::atomic<int64_t> total_{0};
  std::atomic<int64_t> draws_{0};
  std::mutex mu_;  // stage_, stop_
  std::condition_variable cv_;
  std::string stage_;
  bool stop_ = false;
  bool drawn_ = false;  // drawing thread only (then Finish after join)
  int64_t start_mono_ns_ = 0;
  std::thread thread_;
};

}  // namespace trainprof::cli
