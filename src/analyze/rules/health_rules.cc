// Training-health rules: LossNaN, LossNotDecreasing, ExplodingGradient, VanishingGradient.
// They read the framework metrics the PyTorch instrumentation samples every N training steps
// (python/trainprof/_auto.py): the loss passed to backward (`train_loss`) and the total gradient
// norm before the optimizer step (`grad_norm`), stored as instants of category "metric" with
// args {"value"} and the sampled step; values logged with trainprof.log_metric under those
// names count alike. One stream per (node, rank, pid). Each finding carries its evidence: the
// samples it judged ([ts_ns, step, value]), the fit or baseline, the thresholds, the step where
// it started.

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "analyze/rules/rule_util.h"
#include "analyze/stats/trend.h"

namespace trainprof::analyze::rules {
namespace {

using model::Severity;
using nlohmann::json;

constexpr size_t kEvidencePoints = 60;  // samples listed in a finding's evidence at most

struct Sample {
  int64_t ts_ns = 0;
  int64_t step = 0;
  double value = 0;
};

// The value of a "metric" instant named `metric`: a number, or "nan" / "inf" / "-inf".
std::optional<double> MetricValue(const SpanEvent& e, const std::string& metric) {
  if (e.category != "metric" || e.name != metric) return std::nullopt;
  const json args = json::parse(e.args, nullptr, /*allow_exceptions=*/false);
  if (!args.is_object()) return std::nullopt;
  auto it = args.find("value");
  if (it == args.end()) return std::nullopt;
  if (it->is_number()) return it->get<double>();
  if (it->is_string()) {
    const std::string& text = it->get_ref<const std::string&>();
    if (text == "nan" || text == "NaN") return std::nan("");
    if (text == "inf" || text == "Infinity") return HUGE_VAL;
    if (text == "-inf" || text == "-Infinity") return -HUGE_VAL;
  }
  return std::nullopt;
}

json ValueJson(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}
std::string ValueText(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+inf" : "-inf";
  char buf[48];
  snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}
std::string StepText(int64_t step) {
  return Recorded(step) ? std::to_string(step) : std::string("?");
}

template <typename Seq>
json PointsJson(const Seq& samples, size_t max_points) {
  json out = json::array();
  const size_t n = samples.size();
  if (n == 0) return out;
  const size_t keep = std::min(n, std::max<size_t>(2, max_points));
  for (size_t j = 0; j < keep; ++j) {
    const size_t i = keep == 1 ? 0 : (j * (n - 1)) / (keep - 1);  // first and last kept
    const Sample& s = samples[i];
    out.push_back({s.ts_ns, Recorded(s.step) ? json(s.step) : json(nullptr), ValueJson(s.value)});
  }
  return out;
}

using StreamKey = std::tuple<std::string, int64_t, int64_t>;  // node, rank, pid

// Shared shape: per stream the recent samples of one metric, fed in canonical order.
class MetricStreamRule : public Rule {
 public:
  MetricStreamRule(const RuleSpec& spec, Params params)
      : Rule(spec, std::move(params)), metric_(this->params().Text("metric")) {}

  void OnSpan(const SpanEvent& e) override {
    const std::optional<double> v = MetricValue(e, metric_);
    if (!v) return;
    ++result().datapoints;
    Stream& st = streams_[{ctx().NodeName(e.node), e.rank, e.pid}];
    st.node = e.node;
    st.rank = e.rank;
    st.pid = e.pid;
    ++st.count;
    // The sampling interval in steps, from consecutive sampled steps (evidence only).
    if (Recorded(e.step) && Recorded(st.last_step) && e.step > st.last_step) {
      st.every_steps = e.step - st.last_step;
    }
    if (Recorded(e.step)) st.last_step = e.step;
    OnSample(st, Sample{e.start_ns, e.step, *v});
  }

 protected:
  struct Stream {
    int32_t node = 0;
    int64_t rank = 0, pid = 0;
    int64_t count = 0;
    int64_t last_step = model::kMissing;
    int64_t every_steps = 0;
    std::deque<Sample> recent;  // finite samples, newest last, bounded by the rule
    std::vector<Sample> baseline;
    bool fired = false;
    int64_t low_run = 0;  // VanishingGradient: low samples in a row, from low_start
    Sample low_start;
  };
  virtual void OnSample(Stream& st, const Sample& s) = 0;

  json Sampling(const Stream& st) const {
    return st.every_steps > 0 ? json(st.every_steps) : json(nullptr);
  }
  static void Keep(std::deque<Sample>& d, const Sample& s, size_t cap) {
    d.push_back(s);
    while (d.size() > cap) d.pop_front();
  }
  // Median of the first `n` finite samples of the stream: the gradient rules' reference.
  static std::optional<double> Baseline(const Stream& st, size_t n) {
    if (st.baseline.size() < std::max<size_t>(1, n)) return std::nullopt;
    std::vector<double> v;
    for (const Sample& s : st.baseline) v.push_back(s.value);
    return stats::QuantileInPlace(v, 0.5);
  }
  json BaselineJson(const Stream& st, double median) const {
    return {{"median", median},
            {"samples", st.baseline.size()},
            {"first_step", st.baseline.front().step},
            {"last_step", st.baseline.back().step},
            {"start_ns", st.baseline.front().ts_ns},
            {"end_ns", st.baseline.back().ts_ns}};
  }

  std::string metric_;
  std::map<StreamKey, Stream> streams_;
};

// ---------------------------------------------------------------------------------------------
// LossNaN: the first sampled loss that is NaN or infinite, at once (one finding per stream).
class LossNaNRule : public MetricStreamRule {
 public:
  using MetricStreamRule::MetricStreamRule;

 protected:
  void OnSample(Stream& st, const Sample& s) override {
    if (std::isfinite(s.value)) {
      Keep(st.recent, s, kEvidencePoints - 1);
      return;
    }
    ++result().violations;
    if (st.fired) return;
    st.fired = true;
    std::deque<Sample> points = st.recent;
    points.push_back(s);
    json last_finite = nullptr, last_step = nullptr, last_ns = nullptr;
    std::string before = "no finite value sampled before it";
    if (!st.recent.empty()) {
      const Sample& f = st.recent.back();
      last_finite = f.value;
      last_step = Recorded(f.step) ? json(f.step) : json(nullptr);
      last_ns = f.ts_ns;
      before = "last finite value " + ValueText(f.value) + " at step " + StepText(f.step);
    }
    const std::string& node = ctx().NodeName(st.node);
    Emit(MakeFinding(
        Severity::kCritical, node, WhoDevice(st.rank, st.pid), s.ts_ns, s.ts_ns,
        "Training loss (" + metric_ + ") of " + Who(st.rank, st.pid) + " on " + node + " is " +
            ValueText(s.value) + " at step " + StepText(s.step) + " (" + before +
            (st.every_steps > 0 ? "; sampled every " + std::to_string(st.every_steps) + " steps"
                                : std::string()) +
            "): training has diverged and every later step is wasted",
        "Stop the job and resume from the last good checkpoint (a `stop` or `command` action on "
        "this rule does it as soon as it fires). Then: lower the learning rate or add warm-up; "
        "clip gradients (torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)); with float16 "
        "use torch.amp.GradScaler or bfloat16; look for inputs or labels holding NaN/inf and for "
        "log/sqrt/division of values that can reach 0 (add an epsilon).",
        {{"metric", metric_},
         {"step", Recorded(s.step) ? json(s.step) : json(nullptr)},
         {"value", ValueJson(s.value)},
         {"ts_ns", s.ts_ns},
         {"last_finite_value", last_finite},
         {"last_finite_step", last_step},
         {"last_finite_ns", last_ns},
         {"sample_every_steps", Sampling(st)},
         {"samples", st.count},
         {"points", PointsJson(points, kEvidencePoints)}}));
  }
};

// ---------------------------------------------------------------------------------------------
// LossNotDecreasing: over the last `window_samples` finite losses (once `min_samples` exist),
// the Mann-Kendall test finds no decrease at `p_value` and the Theil-Sen line over the window
// falls by less than `min_decrease_ratio` of the window's median, while the loss has not
// converged (fallen below `converged_ratio` of its first 10 samples' median). Judged at every
// sample (each flat window is a violation); one finding per stream, when the first window is
// flat (a sliding window near the threshold would otherwise flap).
class LossNotDecreasingRule : public MetricStreamRule {
 public:
  LossNotDecreasingRule(const RuleSpec& spec, Params params)
      : MetricStreamRule(spec, std::move(params)),
        window_(static_cast<size_t>(
            std::clamp<int64_t>(this->params().Integer("window_samples"), 3, 1000))),
        min_samples_(static_cast<size_t>(std::clamp<int64_t>(this->params().Integer("min_samples"),
                                                             3, static_cast<int64_t>(window_)))),
        p_value_(this->params().Number("p_value")),
        min_decrease_(this->params().Number("min_decrease_ratio")),
        converged_(this->params().Number("converged_ratio")) {}

 protected:
  void OnSample(Stream& st, const Sample& s) override {
    if (!std::isfinite(s.value)) return;  // LossNaN's
    if (st.baseline.size() < kEarlySamples) st.baseline.push_back(s);
    Keep(st.recent, s, window_);
    if (st.recent.size() < min_samples_) return;
    std::vector<double> x, y;
    for (size_t i = 0; i < st.recent.size(); ++i) {
      const Sample& r = st.recent[i];
      x.push_back(Recorded(r.step) ? static_cast<double>(r.step) : static_cast<double>(i));
      y.push_back(r.value);
    }
    const stats::MannKendall mk = stats::MannKendallTest(y);
    const stats::TheilSenFit fit = stats::TheilSen(x, y);
    const double span = x.back() - x.front();
    std::vector<double> sorted = y;
    const double median = stats::QuantileInPlace(sorted, 0.5);
    const double change = fit.slope * span;  // the fitted line's change over the window
    const double relative = median != 0 ? change / std::fabs(median) : 0.0;
    // A loss that fell to under `converged_ratio` of its first samples' median learned
    // something: its plateau is convergence, not judged (unless converged_ratio >= 1).
    const std::optional<double> early = Baseline(st, std::min(kEarlySamples, st.recent.size()));
    const bool converged =
        early && *early > 0 && median >= 0 && converged_ < 1 && median < converged_ * *early;
    const bool flat = !converged && mk.p_decrease >= p_value_ && relative > -min_decrease_;
    if (!flat) return;
    ++result().violations;
    if (st.fired) return;
    st.fired = true;
    const Sample& first = st.recent.front();
    const Sample& last = st.recent.back();
    const std::string& node = ctx().NodeName(st.node);
    Emit(MakeFinding(
        Severity::kWarning, node, WhoDevice(st.rank, st.pid), first.ts_ns, last.ts_ns,
        "Training loss (" + metric_ + ") of " + Who(st.rank, st.pid) + " on " + node +
            " has not decreased over steps " + StepText(first.step) + "-" + StepText(last.step) +
            " (" + std::to_string(y.size()) + " samples, median " + ValueText(median) +
            "): Theil-Sen slope " + ValueText(fit.slope) + " per step (" +
            (relative >= 0 ? "+" : "") + Fixed(relative * 100, 2) +
            " % over the window), Mann-Kendall p = " + Fixed(mk.p_decrease, 3) +
            " for a decrease (a decrease needs p < " + ValueText(p_value_) + " and a fall of " +
            Pct(min_decrease_) + " or more)",
        "The model is not learning. Check the learning rate (0, far too small, or a scheduler "
        "that decayed it to nothing); that the optimizer was given this model's parameters "
        "(created before the model was replaced, or parameters frozen with requires_grad=False); "
        "that nothing detaches the output from the graph or zeroes the gradients between "
        "backward and the optimizer step; that inputs and labels still match (shuffled or "
        "augmented separately). A loss that converged and stopped improving: stop early or "
        "lower the learning rate.",
        {{"metric", metric_},
         {"first_step", Recorded(first.step) ? json(first.step) : json(nullptr)},
         {"last_step", Recorded(last.step) ? json(last.step) : json(nullptr)},
         {"start_ns", first.ts_ns},
         {"end_ns", last.ts_ns},
         {"samples", y.size()},
         {"sample_every_steps", Sampling(st)},
         {"median", median},
         {"theil_sen", {{"slope_per_step", fit.slope}, {"intercept", fit.intercept}}},
         {"fitted_first", fit.intercept + fit.slope * x.front()},
         {"fitted_last", fit.intercept + fit.slope * x.back()},
         {"relative_change", Round(relative, 6)},
         {"mann_kendall",
          {{"s", mk.s},
           {"variance", mk.variance},
           {"z", Round(mk.z, 6)},
           {"tau", Round(mk.tau, 6)},
           {"p_decrease", mk.p_decrease}}},
         {"p_value", p_value_},
         {"min_decrease_ratio", min_decrease_},
         {"early_median", early ? json(*early) : json(nullptr)},
         {"converged_ratio", converged_},
         {"window_samples", window_},
         {"points", PointsJson(st.recent, kEvidencePoints)}}));
  }

 private:
  static constexpr size_t kEarlySamples = 10;  // the first finite losses: the reference
  size_t window_, min_samples_;
  double p_value_, min_decrease_, converged_;
};

// ---------------------------------------------------------------------------------------------
// The gradient-norm rules: a baseline (median of the first `baseline_samples` finite norms)
// and the recent norms; the fit of log10(norm) over them says how fast it moves.
class GradNormRule : public MetricStreamRule {
 public:
  GradNormRule(const RuleSpec& spec, Params params)
      : MetricStreamRule(spec, std::move(params)),
        baseline_n_(static_cast<size_t>(
            std::clamp<int64_t>(this->params().Integer("baseline_samples"), 1, 1000))) {}

 protected:
  void Note(Stream& st, const Sample& s) {
    if (std::isfinite(s.value) && st.baseline.size() < baseline_n_) st.baseline.push_back(s);
  }
  // Theil-Sen slope of log10(norm) per 1000 steps over the recent positive norms.
  static json Log10SlopePer1000(const std::deque<Sample>& recent) {
    std::vector<double> x, y;
    for (const Sample& s : recent) {
      if (s.value > 0 && std::isfinite(s.value) && Recorded(s.step)) {
        x.push_back(static_cast<double>(s.step));
        y.push_back(std::log10(s.value));
      }
    }
    const stats::TheilSenFit fit = stats::TheilSen(x, y);
    return fit.pairs > 0 ? json(Round(fit.slope * 1000, 4)) : json(nullptr);
  }
  size_t baseline_n_;
};

class ExplodingGradientRule : public GradNormRule {
 public:
  ExplodingGradientRule(const RuleSpec& spec, Params params)
      : GradNormRule(spec, std::move(params)),
        growth_(this->params().Number("growth_factor")),
        max_norm_(this->params().Number("max_norm")) {}

 protected:
  void OnSample(Stream& st, const Sample& s) override {
    Note(st, s);
    Keep(st.recent, s, kEvidencePoints);
    const std::optional<double> base = Baseline(st, baseline_n_);
    const bool nonfinite = !std::isfinite(s.value);
    const bool above_max = max_norm_ > 0 && s.value > max_norm_;
    const bool grown = base && *base > 0 && growth_ > 0 && s.value >= growth_ * *base;
    if (!nonfinite && !above_max && !grown) return;
    ++result().violations;
    if (st.fired) return;
    st.fired = true;
    std::string why;
    if (nonfinite) {
      why = "is " + ValueText(s.value);
    } else if (grown) {
      why = "is " + ValueText(s.value) + ", " + Fixed(s.value / *base, 0) + " x its early median " +
            ValueText(*base) + " (threshold " + Fixed(growth_, 0) + " x)";
    } else {
      why = "is " + ValueText(s.value) + ", above max_norm " + ValueText(max_norm_);
    }
    const std::string& node = ctx().NodeName(st.node);
    Emit(MakeFinding(
        nonfinite ? Severity::kCritical : Severity::kWarning, node, WhoDevice(st.rank, st.pid),
        s.ts_ns, s.ts_ns,
        "Gradient norm (" + metric_ + ") of " + Who(st.rank, st.pid) + " on " + node + " " + why +
            " at step " + StepText(s.step) + ": exploding gradients",
        "Clip gradients before the optimizer step "
        "(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)); lower the learning "
        "rate or lengthen its warm-up; with float16 use torch.amp.GradScaler or bfloat16; check "
        "for outlier batches and for missing normalisation (LayerNorm/BatchNorm) or a bad "
        "initialisation in deep or recurrent models.",
        {{"metric", metric_},
         {"step", Recorded(s.step) ? json(s.step) : json(nullptr)},
         {"value", ValueJson(s.value)},
         {"ts_ns", s.ts_ns},
         {"baseline", base ? BaselineJson(st, *base) : json(nullptr)},
         {"ratio_to_baseline",
          base && *base > 0 && std::isfinite(s.value) ? json(s.value / *base) : json(nullptr)},
         {"growth_factor", growth_},
         {"max_norm", max_norm_},
         {"log10_slope_per_1000_steps", Log10SlopePer1000(st.recent)},
         {"sample_every_steps", Sampling(st)},
         {"points", PointsJson(st.recent, kEvidencePoints)}}));
  }

 private:
  double growth_, max_norm_;
};

class VanishingGradientRule : public GradNormRule {
 public:
  VanishingGradientRule(const RuleSpec& spec, Params params)
      : GradNormRule(spec, std::move(params)),
        shrink_(this->params().Number("shrink_factor")),
        min_norm_(this->params().Number("min_norm")),
        consecutive_(std::max<int64_t>(1, this->params().Integer("consecutive_samples"))) {}

 protected:
  void OnSample(Stream& st, const Sample& s) override {
    Note(st, s);
    Keep(st.recent, s, kEvidencePoints);
    if (!std::isfinite(s.value)) {
      st.low_run = 0;
      return;
    }
    const std::optional<double> base = Baseline(st, baseline_n_);
    const bool low = s.value < min_norm_ || (base && *base > 0 && s.value <= shrink_ * *base);
    if (!low) {
      st.low_run = 0;
      return;
    }
    if (st.low_run == 0) st.low_start = s;
    ++st.low_run;
    if (st.low_run < consecutive_) return;
    ++result().violations;
    if (st.fired) return;
    st.fired = true;
    const std::string& node = ctx().NodeName(st.node);
    std::string why = "below min_norm " + ValueText(min_norm_);
    if (s.value >= min_norm_ && base) {
      why = Fixed(*base / std::max(s.value, 1e-300), 0) + " x below its early median " +
            ValueText(*base) + " (threshold " + ValueText(shrink_) + " x)";
    }
    Emit(MakeFinding(
        Severity::kWarning, node, WhoDevice(st.rank, st.pid), st.low_start.ts_ns, s.ts_ns,
        "Gradient norm (" + metric_ + ") of " + Who(st.rank, st.pid) + " on " + node + " is " +
            ValueText(s.value) + " at step " + StepText(s.step) + ", " + why + " for " +
            std::to_string(st.low_run) + " samples since step " + StepText(st.low_start.step) +
            ": vanishing gradients, the parameters barely change",
        "Check that the parameters still take part in the loss (nothing detached, not frozen "
        "with requires_grad=False by mistake); prefer ReLU/GELU to saturating sigmoid/tanh in "
        "deep stacks, use residual connections and normalisation layers and a fitting "
        "initialisation (kaiming/xavier); with float16, torch.amp.GradScaler keeps small "
        "gradients from underflowing. A model that has converged has small gradients too: "
        "then stop early.",
        {{"metric", metric_},
         {"step", Recorded(s.step) ? json(s.step) : json(nullptr)},
         {"value", s.value},
         {"ts_ns", s.ts_ns},
         {"since_step", Recorded(st.low_start.step) ? json(st.low_start.step) : json(nullptr)},
         {"since_ns", st.low_start.ts_ns},
         {"consecutive_samples", st.low_run},
         {"baseline", base ? BaselineJson(st, *base) : json(nullptr)},
         {"ratio_to_baseline", base && *base > 0 ? json(s.value / *base) : json(nullptr)},
         {"shrink_factor", shrink_},
         {"min_norm", min_norm_},
         {"log10_slope_per_1000_steps", Log10SlopePer1000(st.recent)},
         {"sample_every_steps", Sampling(st)},
         {"points", PointsJson(st.recent, kEvidencePoints)}}));
  }

 private:
  double shrink_, min_norm_;
  int64_t consecutive_;
};

ParamSpec P(const char* name, json value, const char* description) {
  return {name, std::move(value), description};
}

}  // namespace

void AddHealthRules(std::vector<BuiltinRule>* out) {
  out->push_back(
      {{"LossNaN",
        "Per training process: the first sampled training loss that is NaN or infinite, at once.",
        false,
        {P("metric", "train_loss", "the framework metric holding the loss")}},
       FactoryOf<LossNaNRule>()});
  out->push_back(
      {{"LossNotDecreasing",
        "Per training process: over the last `window_samples` sampled losses, no decrease by "
        "the Mann-Kendall test at `p_value` and a Theil-Sen line falling by less than "
        "`min_decrease_ratio` of the median.",
        false,
        {P("metric", "train_loss", "the framework metric holding the loss"),
         P("window_samples", 50, "most recent sampled losses judged"),
         P("min_samples", 50, "sampled losses needed before judging"),
         P("p_value", 0.05, "a decrease is significant below this one-sided p-value"),
         P("min_decrease_ratio", 0.01,
           "least fall of the fitted line over the window, as a share of the median loss"),
         P("converged_ratio", 0.5,
           "a window whose median is below this share of the first 10 losses' median has "
           "converged and is not judged (1: judge every plateau, e.g. to stop a converged "
           "job)")}},
       FactoryOf<LossNotDecreasingRule>()});
  out->push_back(
      {{"ExplodingGradient",
        "Per training process: a sampled gradient norm that is NaN/inf, above `max_norm`, or "
        "`growth_factor` times the median of the first `baseline_samples`.",
        false,
        {P("metric", "grad_norm", "the framework metric holding the gradient norm"),
         P("baseline_samples", 10, "first finite norms whose median is the reference"),
         P("growth_factor", 100, "norm / reference that counts as exploding"),
         P("max_norm", 0, "an absolute bound on the norm (0: none)")}},
       FactoryOf<ExplodingGradientRule>()});
  out->push_back(
      {{"VanishingGradient",
        "Per training process: `consecutive_samples` sampled gradient norms in a row below "
        "`min_norm` or at most `shrink_factor` times the median of the first "
        "`baseline_samples`.",
        false,
        {P("metric", "grad_norm", "the framework metric holding the gradient norm"),
         P("baseline_samples", 10, "first finite norms whose median is the reference"),
         P("shrink_factor", 1e-4, "norm / reference that counts as vanished"),
         P("min_norm", 1e-8, "an absolute floor: norms below it count as vanished"),
         P("consecutive_samples", 5, "samples in a row before it fires")}},
       FactoryOf<VanishingGradientRule>()});
}

}  // namespace trainprof::analyze::rules
