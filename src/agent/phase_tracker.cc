#include "agent/phase_tracker.h"

#include <algorithm>
#include <cstdio>

#include "model/event.h"

namespace trainprof::agent {
namespace {

constexpr std::string_view kStartSuffix = "_start";
constexpr std::string_view kEndSuffix = "_end";

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Status ValidateMarkName(const std::string& name) {
  if (name.empty() || name.size() > 128) {
    return InvalidArgument("mark name must have 1 to 128 characters");
  }
  for (size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    bool ok = std::isalnum(c) || c == '_' || c == '.' || c == '-';
    if (ok) continue;
    // Name the character, echoing the name only when it is printable (it may come from a
    // hostile client and be shown on a terminal).
    bool printable =
        std::all_of(name.begin(), name.end(), [](char ch) { return ch >= 0x20 && ch <= 0x7e; });
    char code[8];
    std::snprintf(code, sizeof(code), "0x%02x", c);
    return InvalidArgument("mark name" + (printable ? " '" + name + "'" : std::string()) +
                           ": character " + std::to_string(i + 1) + " (" + code +
                           ") is not allowed; use letters, digits, '_', '.', '-'");
  }
  return OkStatus();
}

PhaseTracker::PhaseTracker(store::NodeStoreWriter* writer, int64_t run_start_ns, int64_t pid)
    : writer_(writer), run_start_ns_(run_start_ns), pid_(pid) {}

void PhaseTracker::EmitPhase(const std::string& name, int64_t start_ns, int64_t end_ns,
                             const std::string& args) {
  model::Event e;
  e.kind = model::EventKind::kSpan;
  e.start_ns = start_ns;
  e.duration_ns = std::max<int64_t>(0, end_ns - start_ns);
  e.name = name;
  e.category = model::kCategoryPhase;
  e.pid = pid_;
  e.args = args;
  writer_->AppendEvent(std::move(e));
}

void PhaseTracker::SetPid(int64_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  pid_ = pid;
}

void PhaseTracker::Mark(const std::string& name, int64_t ts_ns) {
  model::Event mark;
  mark.kind = model::EventKind::kInstant;
  mark.start_ns = ts_ns;
  mark.name = name;
  mark.category = model::kCategoryMark;
  std::lock_guard<std::mutex> lock(mu_);
  mark.pid = pid_;
  writer_->AppendEvent(std::move(mark));

  ++marks_;
  if (EndsWith(name, kStartSuffix)) {
    std::string phase = name.substr(0, name.size() - kStartSuffix.size());
    open_[phase] = ts_ns;  // a repeated _start restarts the phase
    if (phase == "training") training_start_ns_ = ts_ns;
  } else if (EndsWith(name, kEndSuffix)) {
    std::string phase = name.substr(0, name.size() - kEndSuffix.size());
    auto it = open_.find(phase);
    if (it == open_.end()) {
      writer_->AddCounter("unpaired_marks", 1);
      return;
    }
    EmitPhase(phase, it->second, ts_ns, "");
    open_.erase(it);
    if (phase == "training") training_end_ns_ = ts_ns;
  }
}

void PhaseTracker::NoteStep(int64_t start_ns, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_step_ns_ || start_ns < *first_step_ns_) first_step_ns_ = start_ns;
  if (!last_step_end_ns_ || end_ns > *last_step_end_ns_) last_step_end_ns_ = end_ns;
}

void PhaseTracker::Finish(int64_t run_end_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  bool marked_training = training_start_ns_.has_value();
  for (const auto& [phase, start] : open_) {
    EmitPhase(phase, start, run_end_ns, R"({"closed_by":"run_end"})");
    if (phase == "training") training_end_ns_ = run_end_ns;
  }
  open_.clear();

  std::optional<int64_t> train_start = training_start_ns_ ? training_start_ns_ : first_step_ns_;
  std::optional<int64_t> train_end = training_end_ns_ ? training_end_ns_ : last_step_end_ns_;
  // The job's phases stay inside the run whatever the steps said (steps also come from the
  // job's own stores, which nothing else validates): clamp their bounds to [start, end].
  auto inside = [&](int64_t ts) { return std::clamp(ts, run_start_ns_, run_end_ns); };
  if (run_end_ns >= run_start_ns_) {
    if (train_start) train_start = inside(*train_start);
    if (train_end) train_end = std::max(*train_start, inside(*train_end));
  }
  if (!train_start) {
    EmitPhase("initialization", run_start_ns_, run_end_ns,
              R"({"note":"no training steps seen: the whole run counts as initialization"})");
    return;
  }
  EmitPhase("initialization", run_start_ns_, *train_start, "");
  int64_t end = train_end.value_or(run_end_ns);
  if (!marked_training) EmitPhase("training", *train_start, end, R"({"from":"steps"})");
  EmitPhase("finalization", end, run_end_ns, "");
}

int64_t PhaseTracker::marks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return marks_;
}

}  // namespace trainprof::agent
