#pragma once
// The pieces of ComputeCost (cost_model.cc) that stand on their own: phase segments of a
// billed window, nearest-rank percentiles over samples, what one node's accelerators and CPU
// did over its window (MeasureUsage) and the cost per step / epoch / 1000 samples
// (FillStepCosts). Internal to trainprof_cost.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analyze/cost/cost_model.h"
#include "store/run_reader.h"

namespace trainprof::cost::cost_detail {

inline constexpr double kNs = 1e9;

struct Sample {
  int64_t ts_ns;
  double value;
};
using SeriesMap = std::map<std::pair<std::string, std::string>, std::vector<Sample>>;

struct Span {
  std::string name;
  int64_t start_ns, end_ns;
};

struct Segment {
  int64_t start_ns, end_ns;
  std::string phase;
};

// Phase order in tables; when phase spans overlap, the more specific one wins (Segments).
int PhaseOrder(const std::string& phase);

// Splits [start, end) into segments, each attributed to one phase.
std::vector<Segment> Segments(const std::vector<Span>& spans, int64_t start, int64_t end);

// The phase of the segment that holds `t` (kPhaseOther outside them).
const std::string& PhaseAt(const std::vector<Segment>& segs, int64_t t);

// Nearest rank (numpy's "inverted_cdf"); 0 for no values.
double Percentile(std::vector<double> v, double p);

// The median gap between consecutive samples (1 s for fewer than two).
double MedianInterval(const std::vector<Sample>& s);

// The value at the sample nearest `ts` within `tolerance`, if any.
std::optional<double> ValueNear(const std::vector<Sample>& s, int64_t ts, int64_t tolerance);

// What the node's CPU, host memory and accelerators did over its billed window, and what its
// idle accelerators cost (per phase too). `sm` holds the node's series sorted by time; a
// warning is added where the samples cover too little of the window or miss accelerators.
void MeasureUsage(const SeriesMap& sm, const std::vector<Segment>& segs, int64_t window_ns,
                  double price_per_s, const CostOptions& options, NodeCost* nc,
                  std::vector<std::string>* warnings);

// The cost per step (median and p90, at the cluster's rate), amortised per step, epoch and
// 1000 samples, and the data-wait share, over the selected steps.
void FillStepCosts(const store::StepTable& steps, const std::function<bool(size_t)>& selected,
                   const std::string& mode, double cluster_rate_usd_per_second,
                   double total_cost_usd,
                   const std::function<std::optional<double>(const char*)>& key_number,
                   const std::set<std::string>& epoch_marks, StepCosts* sc);

}  // namespace trainprof::cost::cost_detail
