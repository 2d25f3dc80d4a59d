#include "analyze/trace/rank_trace.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "model/event.h"

namespace trainprof::analyze::trace {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

int64_t ArgInt(const std::string& args, const char* quoted_key) {
  // memmem, not std::string::find: find stops at every '"' of the JSON to compare the key.
  const size_t key_len = std::strlen(quoted_key);
  const void* hit = memmem(args.data(), args.size(), quoted_key, key_len);
  if (hit == nullptr) return -1;
  size_t p = static_cast<size_t>(static_cast<const char*>(hit) - args.data()) + key_len;
  while (p < args.size() && (args[p] == ' ' || args[p] == ':')) ++p;
  bool neg = false;
  if (p < args.size() && args[p] == '-') {
    neg = true;
    ++p;
  }
  if (p >= args.size() || args[p] < '0' || args[p] > '9') return -1;
  int64_t v = 0;
  while (p < args.size() && args[p] >= '0' && args[p] <= '9' && v < (INT64_MAX - 9) / 10) {
    v = v * 10 + (args[p] - '0');
    ++p;
  }
  return neg ? -v : v;
}

namespace {

// What a category makes of its events (looked up once per dictionary code, not per event).
enum class CatRole : uint8_t { kNamedDevice, kMemcpy, kMemset, kSync, kCpu };

CatRole RoleOf(const std::string& cat) {
  if (cat == "kernel" || cat == "mtia_ccp_events") return CatRole::kNamedDevice;
  if (cat == "gpu_memcpy") return CatRole::kMemcpy;
  if (cat == "gpu_memset") return CatRole::kMemset;
  if (cat == "cuda_sync") return CatRole::kSync;
  return CatRole::kCpu;
}

CpuKind CpuKindOf(const std::string& cat) {
  if (cat == "cpu_op") return CpuKind::kOp;
  if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "mtia_runtime") {
    return CpuKind::kRuntime;
  }
  if (cat == "user_annotation") return CpuKind::kAnnotation;
  if (cat == model::kCategoryStep) return CpuKind::kStep;
  if (cat == "collective") return CpuKind::kCollective;
  return CpuKind::kOther;
}

}  // namespace

bool SplitByRankReadsArgs(const std::string& category, model::EventKind kind) {
  if (kind != model::EventKind::kSpan) return false;
  return RoleOf(category) != CatRole::kCpu || CpuKindOf(category) == CpuKind::kRuntime;
}

std::vector<RankTrace> SplitByRank(const store::EventTable& t) {
  const std::vector<std::string>& cats = t.categories.values();
  std::vector<CatRole> role(cats.size());
  std::vector<CpuKind> cpu_kind(cats.size());
  for (size_t c = 0; c < cats.size(); ++c) {
    role[c] = RoleOf(cats[c]);
    cpu_kind[c] = CpuKindOf(cats[c]);
  }
  const std::vector<std::string>& names = t.names.values();
  std::vector<GpuKind> named_kind(names.size());
  std::vector<char> step_name(names.size());
  for (size_t n = 0; n < names.size(); ++n) {
    // Device activities of other accelerators carry memory copies as named kernels.
    const std::string& nm = names[n];
    named_kind[n] = StartsWith(nm, "Memcpy") || StartsWith(nm, "dma") ? GpuKind::kMemcpy
                    : StartsWith(nm, "Memset")                        ? GpuKind::kMemset
                                                                      : GpuKind::kKernel;
    step_name[n] = StartsWith(nm, "ProfilerStep#");
  }
  std::map<std::pair<int64_t, std::string>, RankTrace> by_key;
  // (rank, node code) -> its trace: no node string per event.
  std::map<std::pair<int64_t, int32_t>, RankTrace*> by_code;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] != static_cast<uint8_t>(model::EventKind::kSpan)) continue;
    const size_t cat = static_cast<size_t>(t.category[i]);
    int64_t rank = t.rank[i] == model::kMissing ? -1 : t.rank[i];
    RankTrace*& slot = by_code[{rank, rank >= 0 ? -1 : t.node[i]}];
    if (slot == nullptr) {
      const std::string& node = t.nodes.at(t.node[i]);
      slot = &by_key[std::make_pair(rank, rank >= 0 ? std::string() : node)];
    }
    RankTrace& r = *slot;
    const std::string& node = t.nodes.at(t.node[i]);
    if (r.names == nullptr) {
      r.rank = rank;
      r.node = node;
      r.label = rank >= 0 ? std::to_string(rank) : node;
      r.names = &t.names;
    }
    int64_t start = t.start_ns[i];
    int64_t end = start + std::max<int64_t>(0, t.duration_ns[i]);
    bool gpu = true;
    GpuKind gk = GpuKind::kKernel;
    switch (role[cat]) {
      case CatRole::kNamedDevice:
        gk = named_kind[static_cast<size_t>(t.name[i])];
        break;
      case CatRole::kMemcpy:
        gk = GpuKind::kMemcpy;
        break;
      case CatRole::kMemset:
        gk = GpuKind::kMemset;
        break;
      case CatRole::kSync:
        gk = GpuKind::kSync;
        break;
      case CatRole::kCpu:
        gpu = false;
        break;
    }
    if (gpu) {
      GpuActivity a;
      a.start_ns = start;
      a.end_ns = end;
      a.name = t.name[i];
      a.device = t.pid[i] == model::kMissing ? -1 : t.pid[i];
      a.stream = t.tid[i] == model::kMissing ? ArgInt(t.args[i], "\"stream\"") : t.tid[i];
      a.correlation = ArgInt(t.args[i], "\"correlation\"");
      a.kind = gk;
      r.gpu.push_back(a);
      continue;
    }
    CpuSpan c;
    c.start_ns = start;
    c.end_ns = end;
    c.name = t.name[i];
    c.tid = t.tid[i] == model::kMissing ? -1 : t.tid[i];
    c.kind = cpu_kind[cat];
    if (c.kind == CpuKind::kOp || c.kind == CpuKind::kAnnotation) {
      // ProfilerStep#N spans are covered by their derived "step" spans.
      if (step_name[static_cast<size_t>(t.name[i])]) continue;
    }
    if (c.kind == CpuKind::kRuntime) c.correlation = ArgInt(t.args[i], "\"correlation\"");
    if (c.kind == CpuKind::kStep) c.step = t.step[i] == model::kMissing ? -1 : t.step[i];
    r.cpu.push_back(c);
  }
  std::vector<RankTrace> out;
  for (auto& [key, r] : by_key) {
    auto by_start = [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; };
    std::sort(r.gpu.begin(), r.gpu.end(), by_start);
    std::sort(r.cpu.begin(), r.cpu.end(), by_start);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace trainprof::analyze::trace
