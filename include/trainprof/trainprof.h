#pragma once
// trainprof's C++ instrumentation API. Link trainprof_instrument.
//
//   trainprof::Start({.run_dir = "runs/my-run"});
//   for (...) {
//     trainprof::StepScope step("train");           // one training step (category "step")
//     { trainprof::Span s("data_wait", "data_wait"); batch = loader.Next(); }
//     { trainprof::Span s("forward", "forward"); ... }
//     trainprof::Mark("checkpoint_saved");
//   }
//   trainprof::Annotate("batch_size", "64");
//   trainprof::Stop();
//
// Every call is a no-op while the recorder is not started; none throws or blocks on I/O.
// Span names and categories are copied (short ones without allocating).

#include <cstdint>
#include <string>
#include <string_view>

#include "instrument/recorder.h"

namespace trainprof {

using instrument::RecorderOptions;

inline Status Start(const RecorderOptions& options) { return instrument::Start(options); }
inline Status Stop() { return instrument::Stop(); }

// The step and mode the calling thread is in (set by StepScope); spans inherit them.
struct ThreadStepState {
  int64_t step = model::kMissing;
  const char* mode = "";
  bool in_step = false;
};
ThreadStepState& CurrentStepState();

// RAII span: recorded when it goes out of scope, with the enclosing step's number and mode.
class Span {
 public:
  explicit Span(std::string_view name, std::string_view category = "user")
      : name_(name), category_(category), start_ns_(instrument::NowNs()) {}
  ~Span() { End(); }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  // Ends the span early; a second End is ignored.
  void End() {
    if (ended_) return;
    ended_ = true;
    const ThreadStepState& s = CurrentStepState();
    instrument::RecordSpan(name_, category_, s.mode, s.step, start_ns_,
                           instrument::NowNs() - start_ns_);
  }

 private:
  std::string_view name_;
  std::string_view category_;
  int64_t start_ns_;
  bool ended_ = false;
};

// RAII training step: a span with category "step" and a step number (auto-incremented per
// thread when not given). A step inside a step is misuse: it warns once and records nothing.
class StepScope {
 public:
  explicit StepScope(const char* mode = "train", int64_t step = model::kMissing);
  ~StepScope();
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  int64_t start_ns_ = 0;
  bool active_ = false;
};

// A user mark (instant, category "mark").
void Mark(std::string_view name, std::string_view args_json = {});
// A key/value fact about this process.
inline void Annotate(std::string_view key, std::string_view value) {
  instrument::Annotate(key, value);
}

}  // namespace trainprof
