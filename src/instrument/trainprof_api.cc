// The C++ API's out-of-line parts (include/trainprof/trainprof.h): per-thread step state.
#include <atomic>
#include <string>

#include "base/logging.h"
#include "trainprof/trainprof.h"

namespace trainprof {
namespace {
thread_local int64_t g_next_step = 0;
}  // namespace

ThreadStepState& CurrentStepState() {
  thread_local ThreadStepState state;
  return state;
}

StepScope::StepScope(const char* mode, int64_t step) {
  ThreadStepState& s = CurrentStepState();
  if (s.in_step) {
    TP_LOG_ONCE(LogLevel::kWarning,
                "a step was started inside another step; the inner one is ignored");
    return;
  }
  active_ = true;
  s.in_step = true;
  s.mode = mode;
  s.step = step == model::kMissing ? g_next_step : step;
  g_next_step = s.step + 1;
  start_ns_ = instrument::NowNs();
}

StepScope::~StepScope() {
  if (!active_) return;
  ThreadStepState& s = CurrentStepState();
  instrument::RecordSpan("step", model::kCategoryStep, s.mode, s.step, start_ns_,
                         instrument::NowNs() - start_ns_);
  s.in_step = false;
  s.step = model::kMissing;
  s.mode = "";
}

void Mark(std::string_view name, std::string_view args_json) {
  const ThreadStepState& s = CurrentStepState();
  instrument::RecordInstant(name, model::kCategoryMark, s.mode, s.step, instrument::NowNs(),
                            args_json);
}

}  // namespace trainprof
