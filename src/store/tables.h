#pragma once
// Columnar results of store queries. Strings that repeat (node, metric, device, event name...)
// are dictionary-coded: an int32 code per row plus the list of distinct values, which is what
// pandas.Categorical and Arrow dictionaries take without a per-row copy.

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/event.h"

namespace trainprof::store {

class Dictionary {
 public:
  int32_t Code(const std::string& value) {
    auto [it, inserted] = index_.emplace(value, static_cast<int32_t>(values_.size()));
    if (inserted) values_.push_back(value);
    return it->second;
  }
  const std::vector<std::string>& values() const { return values_; }
  const std::string& at(int32_t code) const { return values_.at(static_cast<size_t>(code)); }

 private:
  std::vector<std::string> values_;
  std::unordered_map<std::string, int32_t> index_;
};

inline constexpr int64_t kMinTime = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kMaxTime = std::numeric_limits<int64_t>::max();

// Long-form system metrics: node, metric, device, timestamp_ns, value.
struct MetricTable {
  Dictionary nodes, metrics, devices;
  std::vector<int32_t> node, metric, device;
  std::vector<int64_t> timestamp_ns;
  std::vector<double> value;
  size_t size() const { return value.size(); }
};

// Framework events; integer fields hold model::kMissing where nothing was recorded.
struct EventTable {
  Dictionary nodes, names, categories, modes;
  std::vector<int32_t> node, name, category, mode;
  std::vector<uint8_t> kind;  // model::EventKind
  std::vector<int64_t> rank, pid, tid, step, start_ns, duration_ns;
  std::vector<std::string> args;
  size_t size() const { return start_ns.size(); }
};

// One row per step (an optimizer step). Parts not recorded are model::kMissing.
struct StepTable {
  Dictionary nodes, modes;
  std::vector<int32_t> node, mode;
  std::vector<int64_t> rank, pid, step, start_ns, duration_ns;
  std::vector<int64_t> data_wait_ns, forward_ns, backward_ns, optimizer_ns;
  size_t size() const { return step.size(); }
};

struct MetricQuery {
  int64_t start_ns = kMinTime;  // samples with start_ns <= timestamp_ns < end_ns
  int64_t end_ns = kMaxTime;
  std::vector<std::string> metrics, nodes, devices;  // empty: all
};

struct EventQuery {
  int64_t start_ns = kMinTime;  // events overlapping [start_ns, end_ns)
  int64_t end_ns = kMaxTime;
  std::vector<std::string> names, categories, nodes;
  std::vector<int64_t> ranks;
  bool args = true;  // false: the args column holds empty strings (not copied)
  // When set (and `args`), only the events it accepts keep their args, asked once per category
  // and kind: a reader that needs the args of a few kinds of events (trace analysis: a kernel's
  // correlation and stream) does not copy a million others'.
  std::function<bool(const std::string& category, model::EventKind kind)> keep_args;
  // When set, the args an event keeps are what this makes of its args text, asked per event:
  // a reader that needs a few values of long texts (trace analysis: two integers of an
  // operator's args of 750 bytes) keeps those, not the text.
  std::function<void(std::string_view args, std::string* kept)> map_args;
};

// What a query met that it could not read: corrupt chunks are skipped, counted and named.
struct ReadProblems {
  int64_t corrupt_chunks = 0;
  std::vector<std::string> messages;  // the first few, for people
  void Add(const std::string& message) {
    ++corrupt_chunks;
    if (messages.size() < 10) messages.push_back(message);
  }
};

}  // namespace trainprof::store
