// BuildPythonFunctions: groups the run's cProfile rows into profiles and picks each profile's
// top functions by own and by cumulative time, with their callers.

#include "report/report_python.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "base/json_dump.h"
#include "model/event.h"

namespace trainprof::report {
namespace {

using nlohmann::json;

// A function row's args are a flat object with one list of flat objects.
constexpr int kMaxArgsDepth = 4;
constexpr size_t kMaxArgsBytes = 1 << 20;
constexpr size_t kMaxCallers = 10;  // what the writers store (_detail.py MAX_CALLERS)

bool Int(const json& o, const char* key, int64_t* out) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer()) return false;
  *out = it->get<int64_t>();
  return true;
}

std::string Str(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The cProfile row an instant's args hold; false when they are not one.
bool ParseRow(const std::string& args, PythonFunctionRow* row, std::string* steps) {
  if (args.empty() || args.size() > kMaxArgsBytes || JsonNestingExceeds(args, kMaxArgsDepth)) {
    return false;
  }
  json a = json::parse(args, nullptr, /*allow_exceptions=*/false);
  if (!a.is_object()) return false;
  PythonFunctionRow r;
  if (!Int(a, "cumulative_ns", &r.cumulative_ns) || !Int(a, "total_ns", &r.total_ns) ||
      !Int(a, "calls", &r.calls)) {
    return false;
  }
  if (!Int(a, "primitive_calls", &r.primitive_calls)) r.primitive_calls = r.calls;
  Int(a, "line", &r.line);
  r.function = Str(a, "function");
  r.file = Str(a, "file");
  int64_t n;
  if (Int(a, "callers", &n)) r.caller_count = n;
  if (r.calls > 0) r.total_per_call_ns = static_cast<double>(r.total_ns) / r.calls;
  if (r.primitive_calls > 0) {
    r.cumulative_per_call_ns = static_cast<double>(r.cumulative_ns) / r.primitive_calls;
  }
  auto cb = a.find("called_by");
  if (cb != a.end() && cb->is_array()) {
    for (const json& c : *cb) {
      if (r.callers.size() >= kMaxCallers) break;
      if (!c.is_object()) continue;
      PythonCaller e;
      e.function = Str(c, "function");
      e.file = Str(c, "file");
      Int(c, "line", &e.line);
      Int(c, "calls", &e.calls);
      if (!Int(c, "primitive_calls", &e.primitive_calls)) e.primitive_calls = e.calls;
      Int(c, "total_ns", &e.total_ns);
      Int(c, "cumulative_ns", &e.cumulative_ns);
      r.callers.push_back(std::move(e));
    }
  }
  *steps = Str(a, "steps");
  *row = std::move(r);
  return true;
}

bool NameLess(const PythonFunctionRow& a, const PythonFunctionRow& b) {
  return std::tie(a.file, a.line, a.function) < std::tie(b.file, b.line, b.function);
}

std::vector<PythonFunctionRow> Top(std::vector<PythonFunctionRow> rows, bool by_total) {
  auto less = [by_total](const PythonFunctionRow& a, const PythonFunctionRow& b) {
    const int64_t ka = by_total ? a.total_ns : a.cumulative_ns;
    const int64_t kb = by_total ? b.total_ns : b.cumulative_ns;
    if (ka != kb) return ka > kb;
    const int64_t sa = by_total ? a.cumulative_ns : a.total_ns;
    const int64_t sb = by_total ? b.cumulative_ns : b.total_ns;
    if (sa != sb) return sa > sb;
    return NameLess(a, b);
  };
  const size_t n = std::min(rows.size(), kPythonTopFunctions);
  std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n), rows.end(), less);
  rows.resize(n);
  return rows;
}

}  // namespace

Status BuildPythonFunctions(store::RunReader& reader, PythonFunctions* out) {
  store::EventQuery q;
  q.categories = {"python_function"};
  TP_ASSIGN_OR_RETURN(auto events, reader.Events(q));
  // (end, node, pid, rank, steps) -> rows: time first, so profiles come in time order.
  using Key = std::tuple<int64_t, std::string, int64_t, int64_t, std::string>;
  std::map<Key, std::vector<PythonFunctionRow>> profiles;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events.kind[i] != static_cast<uint8_t>(model::EventKind::kInstant)) continue;
    PythonFunctionRow row;
    std::string steps;
    if (!ParseRow(events.args[i], &row, &steps)) {
      ++out->unreadable;
      continue;
    }
    profiles[{events.start_ns[i], events.nodes.at(events.node[i]), events.pid[i], events.rank[i],
              steps}]
        .push_back(std::move(row));
  }
  out->profile_count = static_cast<int64_t>(profiles.size());
  for (auto& [key, rows] : profiles) {
    if (out->profiles.size() >= kMaxPythonProfiles) break;
    PythonProfile p;
    p.end_ns = std::get<0>(key);
    p.node = std::get<1>(key);
    if (std::get<2>(key) != model::kMissing) p.pid = std::get<2>(key);
    if (std::get<3>(key) != model::kMissing) p.rank = std::get<3>(key);
    p.steps = std::get<4>(key);
    p.functions = static_cast<int64_t>(rows.size());
    p.by_total = Top(rows, /*by_total=*/true);
    p.by_cumulative = Top(std::move(rows), /*by_total=*/false);
    out->profiles.push_back(std::move(p));
  }
  if (profiles.empty()) {
    out->note =
        "No Python function profile in this run. To get one, record with cProfile over some "
        "training steps: trainprof record --python-profile 10-20 -- python train.py (or "
        "--python-profile-time START+SECONDS, or trainprof detail RUN --steps N "
        "--python-profile while the job runs); SageMaker Debugger's cProfile dumps arrive with "
        "trainprof import smdebug.";
  }
  return OkStatus();
}

}  // namespace trainprof::report
