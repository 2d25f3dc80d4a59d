// SageMaker Debugger's framework-metric rules: StepOutlier, Dataloader, MaxInitializationTime,
// OverallFrameworkMetrics. Same names, parameters and defaults as smdebug; the deliberate
// differences (each outlier counted once; MaxInitializationTime judged on data time, so it
// also fires inside ProfilerReport) are listed in docs/rules.md.

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

constexpr int64_t kMinuteNs = 60'000'000'000;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// ---------------------------------------------------------------------------------------------
// StepOutlier: a step is an outlier when it takes longer than mean + stddev * std of the
// steps before it in its stream (node, rank, pid, mode). Each outlier is counted once; the
// rule fires for a stream once it has more than n_outliers of them and (our addition) the
// last n_outliers + 1 of them cost at least `min_time_share` of the stream's step time since
// the first of them (at least the last min_steps steps): 3 std are passed by chance (0.13 % of
// normal steps, more on a busy machine), so any long healthy job collects n_outliers; the share
// says whether they matter. min_time_share=0 is SageMaker's rule.
class StepOutlierRule : public Rule {
 public:
  StepOutlierRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        stddev_(this->params().Number("stddev")),
        mode_(Lower(this->params().Text("mode"))),
        n_outliers_(this->params().Integer("n_outliers")),
        min_steps_(this->params().Integer("min_steps")),
        min_share_(this->params().Number("min_time_share")) {}

  void OnStep(const StepRow& s) override {
    if (!mode_.empty() && Lower(s.mode) != mode_) return;
    Stream& st = streams_[{ctx().NodeName(s.node), s.rank, s.pid, s.mode}];
    ++result().datapoints;
    const double ms = static_cast<double>(s.duration_ns) / 1e6;
    const double time_before = st.total_ms;
    st.total_ms += ms;
    // Step time of the last min_steps steps (at most 1 000), this one included.
    st.last_ms.push_back(ms);
    st.last_sum_ms += ms;
    if (static_cast<int64_t>(st.last_ms.size()) > std::clamp<int64_t>(min_steps_, 1, 1000)) {
      st.last_sum_ms -= st.last_ms.front();
      st.last_ms.pop_front();
    }
    if (st.stats.count() >= min_steps_) {
      const double threshold = st.stats.mean() + stddev_ * st.stats.stddev();
      if (ms > threshold) {
        ++result().violations;
        ++st.outliers;
        // The last n_outliers + 1 outliers: step time before each and its excess over the mean.
        st.recent.push_back({time_before, ms - st.stats.mean()});
        st.recent_excess_ms += ms - st.stats.mean();
        if (static_cast<int64_t>(st.recent.size()) > n_outliers_ + 1) {
          st.recent_excess_ms -= st.recent.front().second;
          st.recent.pop_front();
        }
        // Over the steps since the first of them, and at least the last min_steps steps: a
        // burst of slightly late steps (other processes on a busy machine) is not a problem.
        const double since_ms = std::max(st.total_ms - st.recent.front().first, st.last_sum_ms);
        // Less the costliest of them: the share must not rest on one step (a single stall --
        // a page-in, the machine busy for a second -- is not a pattern of slow steps).
        double costliest = 0;
        for (const auto& o : st.recent) costliest = std::max(costliest, o.second);
        const double kept_ms = st.recent_excess_ms - costliest;
        const double share = since_ms > 0 ? kept_ms / since_ms : 0;
        if (st.examples.size() < 50) {
          st.examples.push_back({{"step", s.step},
                                 {"start_ns", s.start_ns},
                                 {"duration_ms", Round(ms, 3)},
                                 {"mean_ms", Round(st.stats.mean(), 3)},
                                 {"threshold_ms", Round(threshold, 3)}});
        }
        if (st.first_ns == 0) st.first_ns = s.start_ns;
        if (!st.fired && st.outliers > n_outliers_ && share >= min_share_) {
          st.fired = true;
          const std::string& node = ctx().NodeName(s.node);
          Emit(MakeFinding(
              Severity::kWarning, node, WhoDevice(s.rank, s.pid), st.first_ns, s.end_ns(),
              std::to_string(st.outliers) + " " + s.mode + " steps of " + Who(s.rank, s.pid) +
                  " on " + node + " took longer than mean + " + Fixed(stddev_, 1) + " std (" +
                  Fixed(threshold) + " ms; mean " + Fixed(st.stats.mean()) + " ms); the last " +
                  std::to_string(st.recent.size()) + " cost " + Pct(share) +
                  " of the step time since the first of them (the costliest one left out)",
              "Find what the slow steps share: periodic evaluation, checkpointing or logging "
              "every N steps, garbage collection, data shards that are slower to read, or "
              "other jobs on the node. Move periodic work off the training path or make it "
              "asynchronous.",
              {{"outliers", st.outliers},
               {"steps_seen", st.stats.count() + 1},
               {"mean_ms", Round(st.stats.mean(), 3)},
               {"stddev_ms", Round(st.stats.stddev(), 3)},
               {"threshold_ms", Round(threshold, 3)},
               {"outlier_steps", st.examples},
               {"n_outliers", n_outliers_},
               {"recent_outliers", st.recent.size()},
               {"recent_excess_ms", Round(st.recent_excess_ms, 3)},
               {"costliest_excess_ms", Round(costliest, 3)},
               {"recent_step_time_ms", Round(since_ms, 3)},
               {"outlier_time_share", Round(share)},
               {"min_time_share", min_share_},
               {"pid", s.pid}}));
        }
      }
    }
    st.stats.Add(ms);
  }

 private:
  struct Stream {
    stats::RunningStats stats;
    int64_t outliers = 0;
    int64_t first_ns = 0;
    bool fired = false;
    json examples = json::array();
    double total_ms = 0;                           // step time of the stream so far
    std::deque<std::pair<double, double>> recent;  // (total_ms before it, excess ms)
    double recent_excess_ms = 0;
    std::deque<double> last_ms;  // the last min_steps step times
    double last_sum_ms = 0;
  };
  double stddev_;
  std::string mode_;
  int64_t n_outliers_, min_steps_;
  double min_share_;
  std::map<std::tuple<std::string, int64_t, int64_t, std::string>, Stream> streams_;
};

// ---------------------------------------------------------------------------------------------
// Dataloader: how many data-loader worker processes run in parallel (distinct pids with
// "dataloader" spans per second, median over seconds) compared with the node's cores.
class DataloaderRule : public Rule {
 public:
  DataloaderRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        min_threshold_(this->params().Number("min_threshold")),
        max_threshold_(this->params().Number("max_threshold")),
        patience_(this->params().Integer("patience")) {}

  void OnSnapshot(const Snapshot& snap) override {
    gpus_.OnSnapshot(ctx(), snap);
    NodeState& n = Grow(nodes_, static_cast<size_t>(snap.node));
    for (const SampleValue& v : snap.values) {
      if (v.kind == MetricKind::kCpuCore) {
        n.cores_seen.insert(ctx().Series(v.series).device_index);
      }
    }
  }

  void OnSpan(const SpanEvent& e) override {
    NodeState& n = Grow(nodes_, static_cast<size_t>(e.node));
    if (e.name == "dataloader_init") {
      json args = json::parse(e.args, nullptr, false);
      if (args.is_object()) n.init_args = args;
      return;
    }
    if (e.category != "dataloader") return;
    ++result().datapoints;
    const int64_t second = e.end_ns() / 1'000'000'000;
    if (second != n.second && !n.pids.empty()) Close(e.node, n);
    n.second = second;
    n.pids.insert(e.pid);
    n.load_ms.push_back(static_cast<double>(e.duration_ns) / 1e6);
    if (n.first_ns == 0) n.first_ns = e.start_ns;
    n.last_ns = e.end_ns();
  }

  void Finalize(int64_t) override {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!nodes_[i].pids.empty()) Close(static_cast<int32_t>(i), nodes_[i]);
    }
  }

 private:
  struct NodeState {
    std::set<int> cores_seen;
    int64_t second = -1;
    std::set<int64_t> pids;
    std::vector<double> parallel;  // distinct worker pids per second
    std::vector<double> load_ms;
    json init_args = json::object();
    int64_t first_ns = 0, last_ns = 0;
    Episode too_few, too_many;
  };

  void Close(int32_t node_id, NodeState& n) {
    n.parallel.push_back(static_cast<double>(n.pids.size()));
    n.pids.clear();
    if (static_cast<int64_t>(n.parallel.size()) <= patience_) return;
    const model::NodeInfo* info = ctx().NodeInfo(node_id);
    int cores = static_cast<int>(n.cores_seen.size());
    if (info != nullptr && info->cpu_cores) cores = *info->cpu_cores;
    if (cores <= 0) return;
    const double median = std::floor(stats::Quantile(n.parallel, 0.5));
    const bool few = median < cores * min_threshold_ / 100;
    const bool many = median > cores * max_threshold_ / 100;
    const bool open_few = n.too_few.Update(few);
    const bool open_many = n.too_many.Update(many);
    if (few || many) ++result().violations;
    if (!open_few && !open_many) return;
    const std::string& node = ctx().NodeName(node_id);
    json evidence = {{"parallel_dataloaders_median", median},
                     {"cores", cores},
                     {"seconds_observed", n.parallel.size()},
                     {"dataloading_time_ms_p50", Round(stats::Quantile(n.load_ms, 0.5), 3)},
                     {"dataloading_time_ms_p95", Round(stats::Quantile(n.load_ms, 0.95), 3)},
                     {"min_threshold", min_threshold_},
                     {"max_threshold", max_threshold_},
                     {"dataloader_args", n.init_args}};
    if (few) {
      Emit(MakeFinding(Severity::kWarning, node, "", n.first_ns, n.last_ns,
                       "Only " + Fixed(median, 0) + " data-loader processes run in parallel on " +
                           node + " for " + std::to_string(cores) + " cores (fewer than " +
                           Fixed(min_threshold_, 0) + "% of the cores)",
                       gpus_.Has(ctx(), node_id)
                           ? "Raise DataLoader(num_workers=...) towards the number of cores per "
                             "GPU, with pin_memory=True and persistent_workers=True."
                           : "Raise DataLoader(num_workers=...) into the cores torch's operator "
                             "threads leave free, with persistent_workers=True.",
                       evidence));
    } else {
      Emit(MakeFinding(Severity::kWarning, node, "", n.first_ns, n.last_ns,
                       Fixed(median, 0) + " data-loader processes run in parallel on " + node +
                           " for " + std::to_string(cores) + " cores (more than " +
                           Fixed(max_threshold_, 0) + "% of the cores)",
                       "Lower DataLoader(num_workers=...): more workers than cores compete "
                       "with the training process for CPU time.",
                       evidence));
    }
  }

  double min_threshold_, max_threshold_;
  int64_t patience_;
  std::vector<NodeState> nodes_;
  GpuPresence gpus_;
};

// ---------------------------------------------------------------------------------------------
// MaxInitializationTime: time from the job's start to its first training step. Judged on the
// data's own time, so it fires while the job still waits for its first step, and the same way
// inside ProfilerReport as alone (smdebug's copy inside ProfilerReport never advanced its
// clock and never fired).
class MaxInitializationTimeRule : public Rule {
 public:
  MaxInitializationTimeRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)),
        threshold_ns_(static_cast<int64_t>(this->params().Number("threshold") * kMinuteNs)) {}

  void OnSnapshot(const Snapshot& s) override { Check(s.ts_ns, ctx().NodeName(s.node)); }
  void OnSpan(const SpanEvent& e) override {
    if (e.category == model::kCategoryPhase && e.name == "initialization") {
      init_phase_ = {{"start_ns", e.start_ns}, {"duration_ms", Ms(e.duration_ns)}};
    }
    // A span inside a step (the first of its parts, kStepBegunCategory, or a collective or a
    // load of that step) ends before the step does: a step had begun by its start, though no
    // step has ended yet (a long first step is not a slow start).
    if (e.step != model::kMissing && e.category != model::kCategoryStep &&
        (step_begun_ns_ == 0 || e.start_ns < step_begun_ns_)) {
      step_begun_ns_ = e.start_ns;
    }
    Check(e.end_ns(), ctx().NodeName(e.node));
  }
  // Steps arrive as they end: on several ranks (or processes) a step that started first may
  // end after another's. The first step is the earliest to start, known once every step has
  // ended: the finding about it is decided at the end.
  void OnStep(const StepRow& s) override {
    ++result().datapoints;
    if (first_step_ns_ != 0 && s.start_ns >= first_step_ns_) return;
    first_step_ns_ = s.start_ns;
    first_step_node_ = s.node;
    const int64_t start = ctx().RunStartNs();
    result().details = {{"job_start_ns", start},
                        {"first_step_ns", s.start_ns},
                        {"initialization_ms", Ms(s.start_ns - start)}};
  }
  void Finalize(int64_t end_ns) override {
    if (first_step_ns_ == 0) {
      if (end_ns > 0) Check(end_ns, "");
      return;
    }
    const int64_t start = ctx().RunStartNs();
    const int64_t init = first_step_ns_ - start;
    if (init > threshold_ns_ && !fired_) {
      Fire(ctx().NodeName(first_step_node_), start, first_step_ns_,
           "The first training step started " + DurationText(static_cast<double>(init) / 1e9) +
               " after the job started (threshold " +
               DurationText(static_cast<double>(threshold_ns_) / 1e9) + ")",
           true);
    }
  }

 private:
  void Check(int64_t now_ns, const std::string& node) {
    if (fired_ || first_step_ns_ != 0) return;
    const int64_t start = ctx().RunStartNs();
    if (now_ns - start <= threshold_ns_) return;
    if (step_begun_ns_ != 0 && step_begun_ns_ - start <= threshold_ns_) return;
    Fire(node, start, now_ns,
         "No training step after " + DurationText(static_cast<double>(now_ns - start) / 1e9) +
             " (threshold " + DurationText(static_cast<double>(threshold_ns_) / 1e9) +
             "): initialisation is taking too long",
         false);
  }
  void Fire(const std::string& node, int64_t start, int64_t end, std::string message,
            bool step_seen) {
    fired_ = true;
    ++result().violations;
    Emit(MakeFinding(Severity::kWarning, node, "", start, end, std::move(message),
                     "Shorten the start: download data while the container starts or stream it "
                     "(pipe / fast file mode), cache the dataset and compiled kernels, load the "
                     "model once from local disk, and check for a stuck rendezvous or barrier.",
                     {{"job_start_ns", start},
                      {"first_step_ns", step_seen ? json(end) : json(nullptr)},
                      {"waited_ms", Ms(end - start)},
                      {"threshold_minutes", static_cast<double>(threshold_ns_) / 6e10},
                      {"initialization_phase", init_phase_}}));
  }

  int64_t threshold_ns_;
  int64_t first_step_ns_ = 0;
  int32_t first_step_node_ = 0;
  int64_t step_begun_ns_ = 0;  // the earliest start of a span inside a step (0: none seen)
  bool fired_ = false;
  json init_phase_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// OverallFrameworkMetrics: where the training loop's time goes. Never fires.
class OverallFrameworkMetricsRule : public Rule {
 public:
  OverallFrameworkMetricsRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)) {}

  void OnStep(const StepRow& s) override {
    ++result().datapoints;
    Mode& m = modes_[s.mode.empty() ? "unknown" : s.mode];
    ++m.steps;
    m.step_ns += s.duration_ns;
    int64_t parts = 0;
    auto add = [&](int64_t v, int64_t* sum) {
      if (Recorded(v)) {
        *sum += v;
        parts += v;
      }
    };
    add(s.data_wait_ns, &m.data_wait_ns);
    add(s.forward_ns, &m.forward_ns);
    add(s.backward_ns, &m.backward_ns);
    add(s.optimizer_ns, &m.optimizer_ns);
    m.other_ns += std::max<int64_t>(0, s.duration_ns - parts);
    if (first_step_ns_ == 0 || s.start_ns < first_step_ns_) first_step_ns_ = s.start_ns;
    last_step_end_ns_ = std::max(last_step_end_ns_, s.end_ns());
  }
  void OnSpan(const SpanEvent& e) override {
    if (e.category == model::kCategoryPhase) phases_[e.name] += e.duration_ns;
    if (e.category == "collective") collectives_[e.name] += e.duration_ns;
  }
  void Finalize(int64_t end_ns) override {
    json modes = json::object();
    for (const auto& [name, m] : modes_) {
      const double total = static_cast<double>(std::max<int64_t>(1, m.step_ns));
      modes[name] = {
          {"steps", m.steps},
          {"step_time_ms", Ms(m.step_ns)},
          {"mean_step_ms", Ms(m.step_ns / std::max<int64_t>(1, m.steps))},
          {"data_wait_percent", Round(100.0 * static_cast<double>(m.data_wait_ns) / total, 2)},
          {"forward_percent", Round(100.0 * static_cast<double>(m.forward_ns) / total, 2)},
          {"backward_percent", Round(100.0 * static_cast<double>(m.backward_ns) / total, 2)},
          {"optimizer_percent", Round(100.0 * static_cast<double>(m.optimizer_ns) / total, 2)},
          {"other_percent", Round(100.0 * static_cast<double>(m.other_ns) / total, 2)}};
    }
    json phases = json::object();
    for (const auto& [name, ns] : phases_) phases[name] = {{"duration_ms", Ms(ns)}};
    json collectives = json::object();
    for (const auto& [name, ns] : collectives_) collectives[name] = {{"duration_ms", Ms(ns)}};
    const int64_t start = ctx().RunStartNs();
    result().details = {
        {"modes", modes},
        {"phases", phases},
        {"collectives", collectives},
        {"initialization_ms", first_step_ns_ ? json(Ms(first_step_ns_ - start)) : json(nullptr)},
        {"training_loop_ms",
         first_step_ns_ ? json(Ms(last_step_end_ns_ - first_step_ns_)) : json(nullptr)},
        {"finalization_ms", first_step_ns_
                                ? json(Ms(std::max<int64_t>(0, end_ns - last_step_end_ns_)))
                                : json(nullptr)}};
  }

 private:
  struct Mode {
    int64_t steps = 0, step_ns = 0, data_wait_ns = 0, forward_ns = 0, backward_ns = 0;
    int64_t optimizer_ns = 0, other_ns = 0;
  };
  std::map<std::string, Mode> modes_;
  std::map<std::string, int64_t> phases_, collectives_;
  int64_t first_step_ns_ = 0, last_step_end_ns_ = 0;
};

ParamSpec P(const char* name, json value, const char* description) {
  return {name, std::move(value), description};
}

}  // namespace

void AddSageMakerFrameworkRules(std::vector<BuiltinRule>* out) {
  out->push_back(
      {{"StepOutlier",
        "Per training process and mode: a step is an outlier when it is slower than mean + "
        "`stddev` standard deviations of the steps before it; fires after more than "
        "`n_outliers` outliers once the last n_outliers + 1 cost `min_time_share` of the step "
        "time since the first of them.",
        true,
        {P("stddev", 3, "standard deviations above the mean"),
         P("mode", nullptr, "only steps of this mode (train, eval...); null: all modes"),
         P("n_outliers", 10, "outliers tolerated before the rule fires"),
         P("min_steps", 100,
           "steps of a stream seen before outliers are judged (smdebug: 100, fixed)"),
         P("min_time_share", 0.1,
           "share of step time the recent outliers must cost (0: SageMaker's count alone)")}},
       FactoryOf<StepOutlierRule>()});
  out->push_back(
      {{"Dataloader",
        "Median number of data-loader worker processes running in parallel (per second) "
        "against the node's cores: fires below `min_threshold` % or above `max_threshold` %.",
        true,
        {P("min_threshold", 70, "percent of the cores that workers should at least use"),
         P("max_threshold", 200, "percent of the cores that workers should at most use"),
         P("patience", 10, "seconds with data-loader events before the first check")}},
       FactoryOf<DataloaderRule>()});
  out->push_back(
      {{"MaxInitializationTime",
        "Fires when the first training step starts more than `threshold` minutes after the "
        "job started (or has not started by then).",
        true,
        {P("threshold", 20, "minutes")}},
       FactoryOf<MaxInitializationTimeRule>()});
  out->push_back(
      {{"OverallFrameworkMetrics",
        "Where the training loop's time goes: per mode steps, data wait / forward / backward / "
        "optimizer / other shares, phases, collectives, initialisation and finalisation. "
        "Summarises; never fires.",
        true,
        {}},
       FactoryOf<OverallFrameworkMetricsRule>()});
}

}  // namespace trainprof::analyze::rules
