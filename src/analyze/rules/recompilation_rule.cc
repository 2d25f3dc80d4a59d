// Recompilation: torch.compile recompiling again and again (issue 19). The PyTorch
// instrumentation marks each step in which dynamo compiled new graphs with a span of category
// "compile" over the step: "compile" for the first graphs, "recompile" after (a new shape, a
// guard that failed; python/trainprof/_auto.py). One or two recompiles are normal (the last,
// smaller batch; eval mode); a process that keeps recompiling pays the compile time again each
// time, and once dynamo's recompile limit (8 per code object) is reached it silently runs that
// code uncompiled.
//
// Evidence, per process (node, rank, pid): the recompiles within the last `window_s` of data,
// each one's step time against the median of the process's recent steps (its excess), and the
// share of the step time since the first of them that the excess cost. Fires as soon as there
// are `min_recompiles` recompiles in the window and they cost at least `min_time_share`.

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "analyze/rules/rule_util.h"

namespace trainprof::analyze::rules {
namespace {

using model::Severity;
using nlohmann::json;

class RecompilationRule : public Rule {
 public:
  RecompilationRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        min_recompiles_(std::max<int64_t>(1, this->params().Integer("min_recompiles"))),
        window_ns_(this->params().Nanoseconds("window_s")),
        min_share_(this->params().Number("min_time_share")) {}

  void OnStep(const StepRow& s) override {
    Stream& st = streams_[{ctx().NodeName(s.node), s.rank, s.pid}];
    const double ms = static_cast<double>(s.duration_ns) / 1e6;
    st.steps.push_back({s.end_ns(), ms});
    st.step_ms_sum += ms;
    while (st.steps.size() > kMaxSteps ||
           (!st.steps.empty() && st.steps.front().first < s.end_ns() - window_ns_)) {
      st.step_ms_sum -= st.steps.front().second;
      st.steps.pop_front();
    }
  }

  void OnSpan(const SpanEvent& e) override {
    if (e.category != "compile") return;
    ++result().datapoints;
    const std::string& node = ctx().NodeName(e.node);
    Stream& st = streams_[{node, e.rank, e.pid}];
    st.compiling_ends.insert(e.end_ns());
    if (st.compiling_ends.size() > kMaxSteps) st.compiling_ends.erase(st.compiling_ends.begin());
    if (e.name != "recompile") return;
    // The step's usual time: the median of the recent steps that compiled nothing.
    std::vector<double> usual;
    for (const auto& [end, ms] : st.steps) {
      if (!st.compiling_ends.count(end)) usual.push_back(ms);
    }
    const double typical = usual.empty() ? 0 : stats::Quantile(usual, 0.5);
    const double ms = static_cast<double>(e.duration_ns) / 1e6;
    const json args = json::parse(e.args, nullptr, false);
    st.recent.push_back({e.start_ns, e.end_ns(), ms, std::max(0.0, ms - typical),
                         args.is_object() ? args.value("new_graphs", json(nullptr)) : json(nullptr),
                         args.is_object() ? args.value("graphs", json(nullptr)) : json(nullptr)});
    ++st.total;
    while (!st.recent.empty() && st.recent.front().start_ns < e.end_ns() - window_ns_) {
      st.recent.pop_front();
    }
    if (st.fired || static_cast<int64_t>(st.recent.size()) < min_recompiles_) return;
    double excess = 0;
    for (const Recompile& r : st.recent) excess += r.excess_ms;
    // The wall time since the first recompile of the window (steps and gaps alike).
    const double since_ms = static_cast<double>(e.end_ns() - st.recent.front().start_ns) / 1e6;
    const double share = since_ms > 0 ? std::min(1.0, excess / since_ms) : 0;
    ++result().violations;
    if (share < min_share_) return;
    st.fired = true;
    json list = json::array();
    for (const Recompile& r : st.recent) {
      list.push_back({{"start_ns", r.start_ns},
                      {"step_ms", Round(r.ms, 3)},
                      {"excess_ms", Round(r.excess_ms, 3)},
                      {"new_graphs", r.new_graphs},
                      {"graphs", r.graphs}});
    }
    const int64_t rank = e.rank, pid = e.pid;
    Emit(MakeFinding(
        Severity::kWarning, node, WhoDevice(rank, pid), st.recent.front().start_ns, e.end_ns(),
        "torch.compile recompiled " + std::to_string(st.recent.size()) + " times in " +
            Fixed(since_ms / 1e3, 0) + " s on " + Who(rank, pid) + " of " + node +
            " (recompiling steps took " + Fixed(excess / static_cast<double>(st.recent.size())) +
            " ms more than the usual " + Fixed(typical) + " ms step): " + Pct(share) +
            " of the time since the first of them went to recompiling",
        "Find why dynamo recompiles: run with TORCH_LOGS=recompiles to see the failing guard. "
        "Common causes: a batch or sequence length that changes (pad to a few fixed sizes, or "
        "torch.compile(dynamic=True) / torch._dynamo.mark_dynamic), Python numbers or flags "
        "that change between calls (pass them as tensors), or model.train()/eval() switches. "
        "After the recompile limit (torch._dynamo.config.recompile_limit, 8) the code runs "
        "uncompiled.",
        {{"recompiles_in_window", st.recent.size()},
         {"recompiles_total", st.total},
         {"window_s", static_cast<double>(window_ns_) / 1e9},
         {"excess_ms", Round(excess, 3)},
         {"since_first_ms", Round(since_ms, 3)},
         {"time_share", Round(share)},
         {"typical_step_ms", Round(typical, 3)},
         {"min_recompiles", min_recompiles_},
         {"min_time_share", min_share_},
         {"recompiles", list},
         {"pid", pid}}));
  }

 private:
  static constexpr size_t kMaxSteps = 1000;  // recent steps kept per process
  struct Recompile {
    int64_t start_ns, end_ns;
    double ms, excess_ms;
    json new_graphs, graphs;
  };
  struct Stream {
    std::deque<std::pair<int64_t, double>> steps;  // (end_ns, ms) within the window
    double step_ms_sum = 0;
    std::set<int64_t> compiling_ends;  // end times of steps that compiled
    std::deque<Recompile> recent;
    int64_t total = 0;
    bool fired = false;
  };
  int64_t min_recompiles_, window_ns_;
  double min_share_;
  std::map<std::tuple<std::string, int64_t, int64_t>, Stream> streams_;
};

ParamSpec P(const char* name, json value, const char* description) {
  return {name, std::move(value), description};
}

}  // namespace

void AddRecompilationRule(std::vector<BuiltinRule>* out) {
  out->push_back(
      {{"Recompilation",
        "Per training process: torch.compile recompiles (compile events after the first "
        "graphs); fires at `min_recompiles` within `window_s` once they cost `min_time_share` "
        "of the time since the first of them.",
        false,
        {P("min_recompiles", 3, "recompiles within the window before the rule can fire"),
         P("window_s", 300, "seconds of data the recompiles are counted over"),
         P("min_time_share", 0.05,
           "share of the time since the first recompile that recompiling steps cost beyond "
           "the usual step")}},
       FactoryOf<RecompilationRule>()});
}

}  // namespace trainprof::analyze::rules
