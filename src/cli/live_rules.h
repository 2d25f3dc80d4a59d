#pragma once
// The rules evaluated live inside `record`: the record loop calls Poll() on its live thread
// every few seconds; each new finding is stored in the run at once and its configured actions
// run (log by default; stop the job, a command, a webhook). When the job has ended,
// FinishRecordedRun takes Finish() for the end-of-run summary instead of evaluating again.
// Threads: Poll on the live thread, then Finish on the main thread (a mutex orders them).
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include "agent/record.h"
#include "analyze/rules/actions.h"
#include "analyze/rules/config.h"
#include "analyze/rules/live.h"

namespace trainprof::cli {

class LiveRules {
 public:
  explicit LiveRules(analyze::rules::RuleConfig config) : config_(std::move(config)) {}
  ~LiveRules();

  void Poll(const agent::RecordOptions::LiveContext& ctx);
  // Reads what the finished run added, finalises the rules and runs the last findings'
  // actions. nullptr when live evaluation never started or failed: evaluate offline then.
  const analyze::rules::RuleEngine* Finish(std::ostream& out);
  const analyze::rules::RuleConfig& config() const { return config_; }

 private:
  std::mutex mu_;
  analyze::rules::RuleConfig config_;
  std::unique_ptr<analyze::rules::LiveEvaluator> eval_;
  std::unique_ptr<analyze::rules::ActionRunner> actions_;
  bool failed_ = false;
  int64_t stored_live_ = 0;
};

}  // namespace trainprof::cli
