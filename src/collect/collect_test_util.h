#pragma once
// Test helpers for the collectors: a sink that records what it gets (and flags metric names
// missing from the catalog), canned /proc trees copied into a temporary root, and in-place
// rewrites so a collector's open file descriptors see the next canned state. Tests only.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "collect/collector.h"
#include "collect/metric_catalog.h"
#include "gtest/gtest.h"

namespace trainprof::collect::testing {

inline std::string TestData(const std::string& rel) {
  return std::string(TRAINPROF_SOURCE_DIR) + "/tests/testdata/" + rel;
}

class RecordingSink : public SampleSink {
 public:
  void Add(std::string_view metric, std::string_view device, double value) override {
    if (FindMetric(metric) == nullptr) unknown.emplace_back(metric);
    values[{std::string(metric), std::string(device)}] = value;
    ++adds;
  }
  void Count(std::string_view counter, int64_t delta) override {
    counters[std::string(counter)] += delta;
  }
  void Note(std::string_view key, std::string_view value) override {
    notes.emplace_back(std::string(key), std::string(value));
  }
  std::optional<double> Get(const std::string& metric, const std::string& device = "") const {
    auto it = values.find({metric, device});
    if (it == values.end()) return std::nullopt;
    return it->second;
  }
  bool Has(const std::string& metric, const std::string& device = "") const {
    return Get(metric, device).has_value();
  }
  int64_t Counter(const std::string& name) const {
    auto it = counters.find(name);
    return it == counters.end() ? 0 : it->second;
  }
  void Clear() {
    values.clear();
    counters.clear();
    adds = 0;
  }
  std::map<std::pair<std::string, std::string>, double> values;
  std::map<std::string, int64_t> counters;
  std::vector<std::string> unknown;
  std::vector<std::pair<std::string, std::string>> notes;
  int adds = 0;
};

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "trainprof_collect_XXXXXX");
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void CopyTree(const std::string& from, const std::string& to) {
  std::filesystem::copy(
      from, to,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
}

// Rewrites every file of `to` that `from` has, in place (same inode), as the kernel does.
inline void RewriteTree(const std::string& from, const std::string& to) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(from)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::stringstream contents;
    contents << in.rdbuf();
    const auto rel = std::filesystem::relative(entry.path(), from);
    std::ofstream out(std::filesystem::path(to) / rel, std::ios::trunc);
    out << contents.str();
  }
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

inline Tick TickAt(double seconds) {
  const auto ns = static_cast<int64_t>(seconds * 1e9);
  return Tick{.wall_ns = 1764500000000000000 + ns, .mono_ns = 1000000000 + ns};
}

}  // namespace trainprof::collect::testing
