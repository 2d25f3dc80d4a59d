#pragma once
// Helpers the built-in rules share: findings with JSON evidence, episodes (a run of violating
// windows reported once, when it opens), fixed-size windows of recent values, data-time scan
// boundaries. Internal to the rules library.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analyze/rules/rule.h"
#include "analyze/stats/stats.h"
#include "base/json_dump.h"
#include "model/event.h"

namespace trainprof::analyze::rules {

inline model::Finding MakeFinding(model::Severity severity, const std::string& node,
                                  const std::string& device, int64_t start_ns, int64_t end_ns,
                                  std::string message, std::string recommendation,
                                  const nlohmann::json& evidence) {
  model::Finding f;
  f.severity = severity;
  f.node = node;
  f.device = device;
  f.start_ns = start_ns;
  f.end_ns = std::max(start_ns, end_ns);
  f.message = std::move(message);
  f.recommendation = std::move(recommendation);
  f.evidence_json = DumpJson(evidence);
  return f;
}

// "12.3" for 0.1234 as a percentage with one decimal.
inline std::string Pct(double ratio) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f%%", ratio * 100);
  return buf;
}
inline std::string Fixed(double v, int decimals = 1) {
  char buf[48];
  snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}
inline double Round(double v, int decimals = 4) {
  const double f = std::pow(10.0, decimals);
  return std::round(v * f) / f;
}
inline double Ms(int64_t ns) { return Round(static_cast<double>(ns) / 1e6, 3); }
// "131 MB", "2.1 GB", "950 kB" (decimal units, as `free -h --si` and the issue texts).
inline std::string BytesText(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int u = 0;
  double v = bytes;
  while (std::fabs(v) >= 1000 && u < 5) {
    v /= 1000;
    ++u;
  }
  return Fixed(v, std::fabs(v) < 10 && u > 0 ? 1 : 0) + " " + units[u];
}
// "40 s", "12.5 min", "3.2 h", "2.1 days".
inline std::string DurationText(double seconds) {
  if (seconds < 120) return Fixed(seconds, 0) + " s";
  if (seconds < 7200) return Fixed(seconds / 60, 1) + " min";
  if (seconds < 172800) return Fixed(seconds / 3600, 1) + " h";
  return Fixed(seconds / 86400, 1) + " days";
}

// A run of consecutive violating windows: counted as a violation per window, reported as one
// finding when it opens. Returns true when `violating` opens a new episode.
struct Episode {
  bool open = false;
  bool Update(bool violating) {
    const bool opened = violating && !open;
    open = violating;
    return opened;
  }
};

// The last `capacity` values with their timestamps, oldest first on Copy().
class RecentValues {
 public:
  explicit RecentValues(size_t capacity = 1) : capacity_(std::max<size_t>(1, capacity)) {}
  void Add(int64_t ts_ns, double v) {
    if (values_.size() < capacity_) {
      values_.push_back(v);
      ts_.push_back(ts_ns);
    } else {
      values_[next_] = v;
      ts_[next_] = ts_ns;
    }
    next_ = (next_ + 1) % capacity_;
    ++count_;
  }
  int64_t count() const { return count_; }
  size_t size() const { return values_.size(); }
  // Values in arrival order into `out`; returns the first and last timestamps.
  std::pair<int64_t, int64_t> Copy(std::vector<double>* out) const {
    out->clear();
    if (values_.empty()) return {0, 0};
    const size_t start = values_.size() < capacity_ ? 0 : next_;
    for (size_t i = 0; i < values_.size(); ++i) {
      out->push_back(values_[(start + i) % values_.size()]);
    }
    const size_t last = (start + values_.size() - 1) % values_.size();
    return {ts_[start], ts_[last]};
  }

 private:
  size_t capacity_;
  size_t next_ = 0;
  int64_t count_ = 0;
  std::vector<double> values_;
  std::vector<int64_t> ts_;
};

// Data-time scan boundaries every `interval_ns` from the first time seen. Due(t) returns true
// once per boundary crossed (several crossed at once count as one).
class ScanClock {
 public:
  explicit ScanClock(int64_t interval_ns) : interval_ns_(std::max<int64_t>(1, interval_ns)) {}
  bool Due(int64_t t_ns) {
    if (next_ns_ == INT64_MIN) {
      next_ns_ = t_ns + interval_ns_;
      return false;
    }
    if (t_ns < next_ns_) return false;
    while (next_ns_ <= t_ns) next_ns_ += interval_ns_;
    return true;
  }

 private:
  int64_t interval_ns_;
  int64_t next_ns_ = INT64_MIN;
};

template <typename T>
T& Grow(std::vector<T>& v, size_t index) {
  if (v.size() <= index) v.resize(index + 1);
  return v[index];
}

inline bool Recorded(int64_t v) { return v != model::kMissing; }

// Who a per-rank finding is about. A process outside torch.distributed has no rank (kMissing):
// it is named by its pid, never as a rank number.
inline std::string WhoDevice(int64_t rank, int64_t pid) {
  if (Recorded(rank)) return "rank" + std::to_string(rank);
  if (Recorded(pid) && pid > 0) return "pid" + std::to_string(pid);
  return "";
}
inline std::string Capitalized(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}
inline std::string Who(int64_t rank, int64_t pid) {
  if (Recorded(rank)) return "rank " + std::to_string(rank);
  if (Recorded(pid) && pid > 0) return "process " + std::to_string(pid);
  return "the training process";
}

// Whether a node has a GPU: its facts list one or GPU samples were seen. Rules whose advice
// differs on a machine without a GPU feed it their snapshots. No GPU: no GPU advice.
class GpuPresence {
 public:
  void OnSnapshot(const RunContext& ctx, const Snapshot& snap) {
    const size_t node = static_cast<size_t>(snap.node);
    if (node < seen_.size() && seen_[node] != 0) return;
    for (const SampleValue& v : snap.values) {
      if (ctx.Series(v.series).kind == MetricKind::kGpuUtil) {
        Grow(seen_, static_cast<size_t>(snap.node)) = 1;
        return;
      }
    }
  }
  bool Has(const RunContext& ctx, int32_t node) const {
    if (static_cast<size_t>(node) < seen_.size() && seen_[static_cast<size_t>(node)] != 0) {
      return true;
    }
    const model::NodeInfo* info = ctx.NodeInfo(node);
    return info != nullptr && !info->gpus.empty();
  }

 private:
  std::vector<uint8_t> seen_;
};

// Rules each built-in source file contributes.
struct BuiltinRule {
  RuleSpec spec;
  RuleFactory factory;
};
template <typename R>
RuleFactory FactoryOf() {
  return [](const RuleSpec& spec, Params params) -> std::unique_ptr<Rule> {
    return std::make_unique<R>(spec, std::move(params));
  };
}
void AddSageMakerSystemRules(std::vector<BuiltinRule>* out);
void AddSageMakerFrameworkRules(std::vector<BuiltinRule>* out);
void AddOwnRules(std::vector<BuiltinRule>* out);
void AddRecompilationRule(std::vector<BuiltinRule>* out);
void AddHealthRules(std::vector<BuiltinRule>* out);  // health_rules.cc

}  // namespace trainprof::analyze::rules
