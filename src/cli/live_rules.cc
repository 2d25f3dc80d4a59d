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

LiveRules::~LiveRules() {
  if (actions_) actions_->Drain();
}

void LiveRules::Poll(const agent::RecordOptions::LiveContext& ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_) return;
  if (!eval_) {
    auto opened = analyze::rules::LiveEvaluator::Open(ctx.run_dir, config_);
    if (!opened.ok()) {
      failed_ = true;
      TP_LOG_WARNING("live rules off (evaluated when the job ends): " + opened.status().message());
      return;
    }
    eval_ = std::move(*opened);
    const pid_t child = ctx.child;
    analyze::rules::ActionRunner::StopFn stop;
    if (child > 0) {  // never kill(-1, ...): an agent watching others' jobs has no child
      stop = [child](const model::Finding&, int64_t grace_ns) {
        return analyze::rules::StopProcess(child, grace_ns);
      };
    }
    actions_ = std::make_unique<analyze::rules::ActionRunner>(config_, std::move(stop));
  }
  auto findings = eval_->Poll();
  if (!findings.ok()) {
    // A read that failed now (a store mid-checkpoint) is retried at the next poll.
    TP_LOG_WARNING("live rules: " + findings.status().message());
    return;
  }
  for (auto& f : *findings) {
    actions_->Submit(f);
    if (ctx.store_finding) ctx.store_finding(f);
    ++stored_live_;
  }
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
  actions_ = std::make_unique<analyze::rules::ActionRunner>(config_, nullptr);
  for (const auto& f : *last) actions_->Submit(f);
  actions_->Drain();
  const auto stats = eval_->stats();
  out << "trainprof: rules evaluated live (" << stats.polls << " polls, " << stored_live_
      << " finding" << (stored_live_ == 1 ? "" : "s") << " stored while the job ran; "
      << FormatCpu(stats) << ")\n";
  return &eval_->engine();
}

}  // namespace trainprof::cli
