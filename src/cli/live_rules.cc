#include "cli/live_rules.h"

#include <cstdio>
#include <string>

#include "base/logging.h"
#include "base/time.h"

namespace trainprof::cli {
namespace {

// "CPU 12.3 ms in polls = 0.004 % of one core over 5m 02s, 4.1 ms at the end"
std::string FormatCpu(const analyze::rules::LiveStats& s) {
  char buf[160];
  const double poll_ms = static_cast<double>(s.poll_cpu_ns) / 1e6;
  const double finish_ms = static_cast<double>(s.finish_cpu_ns) / 1e6;
  const int64_t span_ns = s.finish_mono_ns - s.first_poll_mono_ns;
  if (s.first_poll_mono_ns > 0 && span_ns > 0) {
    std::snprintf(buf, sizeof buf,
                  "CPU %.1f ms in polls = %.3f %% of one core over %s, %.1f ms at the end", poll_ms,
                  static_cast<double>(s.poll_cpu_ns) / static_cast<double>(span_ns) * 100,
                  FormatDuration(span_ns).c_str(), finish_ms);
  } else {
    std::snprintf(buf, sizeof buf, "CPU %.1f ms in polls, %.1f ms at the end", poll_ms, finish_ms);
  }
  return buf;
}

}  // namespace

LiveRules::LiveRules(analyze::rules::RuleConfig config, CustomRulesOptions custom)
    : config_(std::move(config)), custom_(std::move(custom)) {
  if (!custom_.files.empty()) {
    analyze::rules::CustomRuleEntries entries = analyze::rules::TakeCustomRules(&config_);
    custom_.overrides.insert(custom_.overrides.end(), entries.overrides.begin(),
                             entries.overrides.end());
    custom_.required = entries.names;
    action_config_.actions = std::move(entries.actions);
  }
  for (const auto& [rule, list] : config_.actions) action_config_.actions[rule] = list;
}

LiveRules::~LiveRules() {
  if (actions_) actions_->Drain();
}

void LiveRules::Poll(const agent::RecordOptions::LiveContext& ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!actions_) {
    const pid_t child = ctx.child;
    analyze::rules::ActionRunner::StopFn stop;
    if (child > 0) {  // never kill(-1, ...): an agent watching others' jobs has no child
      stop = [child](const model::Finding&, int64_t grace_ns) {
        return analyze::rules::StopProcess(child, grace_ns);
      };
    }
    actions_ = std::make_unique<analyze::rules::ActionRunner>(action_config_, std::move(stop));
  }
  PollBuiltin(ctx);
  PollCustom(ctx);
}

void LiveRules::Act(const std::vector<model::Finding>& findings,
                    const agent::RecordOptions::LiveContext* ctx) {
  for (const auto& f : findings) {
    actions_->Submit(f);
    if (ctx != nullptr && ctx->store_finding) ctx->store_finding(f);
  }
}

void LiveRules::PollBuiltin(const agent::RecordOptions::LiveContext& ctx) {
  if (failed_) return;
  if (!eval_) {
    auto opened = analyze::rules::LiveEvaluator::Open(ctx.run_dir, config_);
    if (!opened.ok()) {
      failed_ = true;
      TP_LOG_WARNING("live rules off (evaluated when the job ends): " + opened.status().message());
      return;
    }
    eval_ = std::move(*opened);
  }
  auto findings = eval_->Poll();
  if (!findings.ok()) {
    // A read that failed now (a store mid-checkpoint) is retried at the next poll.
    TP_LOG_WARNING("live rules: " + findings.status().message());
    return;
  }
  Act(*findings, &ctx);
  stored_live_ += static_cast<int64_t>(findings->size());
}

void LiveRules::PollCustom(const agent::RecordOptions::LiveContext& ctx) {
  if (custom_.files.empty() || custom_failed_) return;
  if (!custom_live_) {
    auto started = LiveCustomRules::Start(ctx.run_dir, custom_);
    if (!started.ok()) {
      custom_failed_ = true;
      TP_LOG_WARNING("live custom rules off (evaluated when the job ends): " +
                     started.status().message());
      return;
    }
    custom_live_ = std::move(*started);
  }
  const std::vector<model::Finding> found = custom_live_->Poll();
  Act(found, &ctx);
  custom_stored_live_ += static_cast<int64_t>(found.size());
}

std::optional<StatusOr<CustomRulesOutcome>> LiveRules::FinishCustom(const std::string& run_dir,
                                                                    std::ostream& out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (custom_.files.empty()) return std::nullopt;
  // The job has ended: a stop action has nothing left to stop.
  if (actions_) actions_->Drain();
  actions_ = std::make_unique<analyze::rules::ActionRunner>(action_config_, nullptr);
  StatusOr<CustomRulesOutcome> outcome = CustomRulesOutcome{};
  std::vector<model::Finding> unacted;
  if (custom_live_) {
    outcome = custom_live_->Finish(&unacted);
    custom_live_.reset();
    if (outcome.ok()) {
      out << "trainprof: custom rules evaluated live (" << custom_stored_live_ << " finding"
          << (custom_stored_live_ == 1 ? "" : "s") << " stored while the job ran)\n";
    }
  } else {
    outcome = RunCustomRules(run_dir, custom_);
    if (outcome.ok()) {
      for (const auto& r : outcome->results) {
        unacted.insert(unacted.end(), r.findings.begin(), r.findings.end());
      }
    }
  }
  Act(unacted, nullptr);
  actions_->Drain();
  return outcome;
}

const analyze::rules::RuleEngine* LiveRules::Finish(std::ostream& out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!eval_ || failed_) return nullptr;
  auto last = eval_->Finish();
  if (!last.ok()) {
    out << "trainprof: warning: live rules could not read the end of the run ("
        << last.status().message() << "); evaluating again\n";
    return nullptr;
  }
  // The job has ended: a stop action has nothing left to stop.
  actions_->Drain();
  actions_ = std::make_unique<analyze::rules::ActionRunner>(action_config_, nullptr);
  Act(*last, nullptr);
  actions_->Drain();
  const auto stats = eval_->stats();
  out << "trainprof: rules evaluated live (" << stats.polls << " polls, " << stored_live_
      << " finding" << (stored_live_ == 1 ? "" : "s") << " stored while the job ran; "
      << FormatCpu(stats) << ")\n";
  return &eval_->engine();
}

}  // namespace trainprof::cli
