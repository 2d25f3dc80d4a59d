#pragma once
// What SageMaker's system-metric rules share (sagemaker_system_rules.cc registers them all):
// the share tests' options from a rule's parameters, when a node's samples start to count, a
// span's evidence; and the factories of the GPU rules in sagemaker_gpu_rules.cc (BatchSize,
// GPUMemoryIncrease, LoadBalancing).
// Threads: as Rule (rule.h).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "analyze/rules/rule_util.h"
#include "analyze/rules/share_bound.h"

namespace trainprof::analyze::rules::smsys {

using nlohmann::json;

// Options of the share tests (share_bound.h) from a rule's parameters.
inline ShareOptions ShareOptionsOf(const Params& p) {
  ShareOptions o;
  o.block_ns = std::max<int64_t>(1, p.Nanoseconds("block_s"));
  o.min_span_ns = p.Nanoseconds("min_window_s");
  if (p.json().contains("window_s")) {
    o.max_span_ns = std::max(o.min_span_ns, p.Nanoseconds("window_s"));
  } else {
    o.max_span_ns = INT64_MAX / 4;  // bounded by a count of values instead
  }
  o.min_samples = std::max<int64_t>(2, p.Integer("min_samples"));
  o.confidence = std::clamp(p.Number("confidence"), 0.5, 0.999999);
  return o;
}

// When a node's samples are judged: from `settle_s` after its first training step; a node
// without steps (no framework data) after `patience` samples, SageMaker's warm-up.
struct JudgeFrom {
  int64_t first_step_ns = 0;
  int64_t samples = 0;
  bool Ready(int64_t ts_ns, int64_t settle_ns, int64_t patience) {
    ++samples;
    if (first_step_ns != 0) return ts_ns - first_step_ns >= settle_ns;
    return samples > patience;
  }
};

// JudgeFrom for each node, from a rule's `patience` and `settle_s` parameters: a step sets its
// node's first step; Ready() is asked once per snapshot (it counts the node's samples).
class NodesJudgedFrom {
 public:
  explicit NodesJudgedFrom(const Params& p)
      : patience_(p.Integer("patience")), settle_ns_(p.Nanoseconds("settle_s")) {}
  void OnStep(const StepRow& s) {
    JudgeFrom& f = Grow(from_, static_cast<size_t>(s.node));
    if (f.first_step_ns == 0) f.first_step_ns = s.start_ns;
  }
  bool Ready(const Snapshot& snap) {
    return Grow(from_, static_cast<size_t>(snap.node)).Ready(snap.ts_ns, settle_ns_, patience_);
  }

 private:
  int64_t patience_, settle_ns_;
  std::vector<JudgeFrom> from_;
};

inline json SpanEvidence(const ShareSpan& s, int j, const ShareOptions& o) {
  return {{"span_start_ns", s.start_ns},
          {"span_end_ns", s.end_ns},
          {"span_samples", s.samples},
          {"span_blocks", s.blocks},
          {"confidence", o.confidence},
          {"effective_samples", Round(s.effective_samples[j], 1)},
          {"design_effect", Round(s.design_effect[j], 3)},
          {"block_s", static_cast<double>(o.block_ns) / 1e9}};
}

RuleFactory BatchSize();
RuleFactory GpuMemoryIncrease();
RuleFactory LoadBalancing();

}  // namespace trainprof::analyze::rules::smsys
