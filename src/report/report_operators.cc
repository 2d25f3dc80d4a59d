// BuildOperators (report_operators.h): one pass over the run's operator-level spans.

#include "report/report_operators.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "model/event.h"

namespace trainprof::report {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Status BuildOperators(store::RunReader& reader, Operators* out) {
  static const std::set<std::string> kCpu = {"cpu_op",          "cuda_runtime", "cuda_driver",
                                             "python_function", "tf_op",        "user_annotation"};
  static const std::set<std::string> kGpu = {"kernel", "gpu_memcpy", "gpu_memset", "tf_device_op",
                                             "gpu_user_annotation"};
  store::EventQuery q;
  for (const auto& c : kCpu) q.categories.push_back(c);
  for (const auto& c : kGpu) q.categories.push_back(c);
  TP_ASSIGN_OR_RETURN(auto events, reader.Events(q));
  Operators& ops = *out;
  struct Acc {
    int64_t count = 0, total = 0;
  };
  std::map<std::pair<int32_t, int32_t>, Acc> acc;  // (category, name) codes
  int64_t kernel = 0, memcpy = 0, memset = 0, comm = 0;
  std::unordered_map<int32_t, bool> is_comm;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events.kind[i] != static_cast<uint8_t>(model::EventKind::kSpan)) continue;
    const std::string& cat = events.categories.at(events.category[i]);
    // gpu_user_annotation spans enclose kernels; counting them would count that time twice.
    if (cat == "gpu_user_annotation" || cat == "user_annotation") continue;
    ++ops.event_count;
    Acc& a = acc[{events.category[i], events.name[i]}];
    ++a.count;
    a.total += events.duration_ns[i];
    if (kGpu.count(cat)) {
      ops.gpu_total_ns += events.duration_ns[i];
      if (cat == "gpu_memcpy") {
        memcpy += events.duration_ns[i];
      } else if (cat == "gpu_memset") {
        memset += events.duration_ns[i];
      } else {
        auto [it, inserted] = is_comm.emplace(events.name[i], false);
        if (inserted)
          it->second = Lower(events.names.at(events.name[i])).find("nccl") != std::string::npos;
        (it->second ? comm : kernel) += events.duration_ns[i];
      }
    } else {
      ops.cpu_total_ns += events.duration_ns[i];
    }
  }
  for (const auto& [key, a] : acc) {
    OperatorRow row;
    row.category = events.categories.at(key.first);
    row.name = events.names.at(key.second);
    row.count = a.count;
    row.total_ns = a.total;
    row.mean_ns = static_cast<double>(a.total) / static_cast<double>(a.count);
    bool gpu_row = kGpu.count(row.category) > 0;
    int64_t denom = gpu_row ? ops.gpu_total_ns : ops.cpu_total_ns;
    if (denom > 0) row.share = static_cast<double>(a.total) / static_cast<double>(denom);
    (gpu_row ? ops.gpu : ops.cpu).push_back(std::move(row));
  }
  for (auto* rows : {&ops.cpu, &ops.gpu}) {
    std::sort(rows->begin(), rows->end(),
              [](const OperatorRow& a, const OperatorRow& b) { return a.total_ns > b.total_ns; });
    if (rows->size() > 25) rows->resize(25);
  }
  if (ops.gpu_total_ns > 0) {
    for (auto [name, ns] : {std::pair<const char*, int64_t>{"kernel", kernel},
                            {"memcpy", memcpy},
                            {"memset", memset},
                            {"communication", comm}}) {
      ops.gpu_breakdown.push_back(
          {name, ns, static_cast<double>(ns) / static_cast<double>(ops.gpu_total_ns)});
    }
  }
  return OkStatus();
}

}  // namespace trainprof::report
