#pragma once
// The rules evaluated live inside `record`: the record loop calls Poll() on its live thread
// every few seconds; each new finding is stored in the run at once and its configured actions
// run (log by default; stop the job, a command, a webhook). When the job has ended,
// FinishRecordedRun takes Finish() for the end-of-run summary instead of evaluating again.
// Custom Python rules (`--custom-rule`) run beside them in one runner process
// (LiveCustomRules) whose findings are stored and acted on the same way; FinishCustom() ends it.
// Threads: Poll on the live thread, then Finish on the main thread (a mutex orders them).
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include "agent/record.h"
#include "analyze/rules/actions.h"
#include "analyze/rules/config.h"
#include "analyze/rules/live.h"
#include "cli/custom_rules.h"
#include "cli/report_providers.h"

namespace trainprof::cli {

class LiveRules final : public LiveEvaluation {
 public:
  // `config` may name custom rules (their parameters and actions): they are taken out of it
  // for the runner when `custom` has files.
  LiveRules(analyze::rules::RuleConfig config, CustomRulesOptions custom = {});
  ~LiveRules() override;

  void Poll(const agent::RecordOptions::LiveContext& ctx);
  // Reads what the finished run added, finalises the rules and runs the last findings'
  // actions. nullptr when live evaluation never started or failed: evaluate offline then.
  const analyze::rules::RuleEngine* Finish(std::ostream& out) override;
  // The custom rules' results: the live runner's when it ran, else one evaluation of the
  // finished run; the findings not acted on live get their actions now. nullopt without
  // custom rules.
  std::optional<StatusOr<CustomRulesOutcome>> FinishCustom(const std::string& run_dir,
                                                           std::ostream& out) override;
  const analyze::rules::RuleConfig& config() const override { return config_; }

 private:
  void PollBuiltin(const agent::RecordOptions::LiveContext& ctx);
  void PollCustom(const agent::RecordOptions::LiveContext& ctx);
  void Act(const std::vector<model::Finding>& findings,
           const agent::RecordOptions::LiveContext* ctx);

  std::mutex mu_;
  analyze::rules::RuleConfig config_;         // the built-in rules
  analyze::rules::RuleConfig action_config_;  // actions of built-in and custom rules
  CustomRulesOptions custom_;
  std::unique_ptr<analyze::rules::LiveEvaluator> eval_;
  std::unique_ptr<LiveCustomRules> custom_live_;
  std::unique_ptr<analyze::rules::ActionRunner> actions_;
  bool failed_ = false;
  bool custom_failed_ = false;
  int64_t stored_live_ = 0;
  int64_t custom_stored_live_ = 0;
};

}  // namespace trainprof::cli
