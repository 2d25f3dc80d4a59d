#include "analyze/trace/rank_trace.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "base/strings.h"
#include "model/event.h"
#include "store/codec.h"
#include "store/node_store_reader.h"

namespace trainprof::analyze::trace {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

int64_t ArgInt(std::string_view args, const char* quoted_key) {
  // Not std::string::find: find stops at every '"' of the JSON to compare the key.
  const size_t key_len = std::strlen(quoted_key);
  const size_t at = FindSubstring(args, std::string_view(quoted_key, key_len));
  if (at == std::string_view::npos) return -1;
  size_t p = at + key_len;
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

void KeepTraceArgs(std::string_view args, std::string* kept) {
  kept->clear();
  for (const char* key : {"\"stream\"", "\"correlation\""}) {
    // -1: absent, not an integer, or -1 itself; ArgInt reads -1 from the text without the key.
    const int64_t v = ArgInt(args, key);
    if (v != -1) kept->append(key).append(":").append(std::to_string(v));
  }
}

namespace {

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

// Looked up once per dictionary code, not per event.
RankSplitter::CatRole RankSplitter::RoleOf(const std::string& cat) {
  if (cat == "kernel" || cat == "mtia_ccp_events") return CatRole::kNamedDevice;
  if (cat == "gpu_memcpy") return CatRole::kMemcpy;
  if (cat == "gpu_memset") return CatRole::kMemset;
  if (cat == "cuda_sync") return CatRole::kSync;
  return CatRole::kCpu;
}

bool SplitByRankReadsArgs(const std::string& category, model::EventKind kind) {
  if (kind != model::EventKind::kSpan) return false;
  return RankSplitter::RoleOf(category) != RankSplitter::CatRole::kCpu ||
         CpuKindOf(category) == CpuKind::kRuntime;
}

RankSplitter::RankSplitter(const store::Dictionary* names, const store::Dictionary* categories,
                           const store::Dictionary* nodes)
    : names_(names), categories_(categories), nodes_(nodes) {}

void RankSplitter::Learn(const Event& e) {
  const std::vector<std::string>& cats = categories_->values();
  for (size_t c = role_.size(); c <= static_cast<size_t>(e.category) && c < cats.size(); ++c) {
    role_.push_back(RoleOf(cats[c]));
    cpu_kind_.push_back(CpuKindOf(cats[c]));
  }
  const std::vector<std::string>& names = names_->values();
  for (size_t n = named_kind_.size(); n <= static_cast<size_t>(e.name) && n < names.size(); ++n) {
    // Device activities of other accelerators carry memory copies as named kernels.
    const std::string& nm = names[n];
    named_kind_.push_back(StartsWith(nm, "Memcpy") || StartsWith(nm, "dma") ? GpuKind::kMemcpy
                          : StartsWith(nm, "Memset")                        ? GpuKind::kMemset
                                                                            : GpuKind::kKernel);
    step_name_.push_back(StartsWith(nm, "ProfilerStep#"));
  }
}

void RankSplitter::Add(const Event& e) {
  if (e.kind != static_cast<uint8_t>(model::EventKind::kSpan)) return;
  const auto cat = static_cast<size_t>(e.category);
  const auto name = static_cast<size_t>(e.name);
  if (cat >= role_.size() || name >= named_kind_.size()) Learn(e);
  const int64_t rank = e.rank == model::kMissing ? -1 : e.rank;
  const std::pair<int64_t, int32_t> code{rank, rank >= 0 ? -1 : e.node};
  if (code != last_code_) {
    RankTrace*& slot = by_code_[code];
    if (slot == nullptr) {
      const std::string& node = nodes_->at(e.node);
      RankTrace& r = by_key_[std::make_pair(rank, rank >= 0 ? std::string() : node)];
      if (r.names == nullptr) {
        r.rank = rank;
        r.node = node;
        r.label = rank >= 0 ? std::to_string(rank) : node;
        r.names = names_;
      }
      slot = &r;
    }
    last_code_ = code;
    last_ = slot;
  }
  RankTrace& r = *last_;
  const int64_t start = e.start_ns;
  const int64_t end = model::SpanEndNs(start, e.duration_ns);
  bool gpu = true;
  GpuKind gk = GpuKind::kKernel;
  switch (role_[cat]) {
    case CatRole::kNamedDevice:
      gk = named_kind_[name];
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
    a.name = e.name;
    a.device = e.pid == model::kMissing ? -1 : e.pid;
    a.stream = e.tid == model::kMissing ? ArgInt(e.args, "\"stream\"") : e.tid;
    a.correlation = ArgInt(e.args, "\"correlation\"");
    a.kind = gk;
    r.gpu.push_back(a);
    return;
  }
  CpuSpan c;
  c.start_ns = start;
  c.end_ns = end;
  c.name = e.name;
  c.tid = e.tid == model::kMissing ? -1 : e.tid;
  c.kind = cpu_kind_[cat];
  if (c.kind == CpuKind::kOp || c.kind == CpuKind::kAnnotation) {
    // ProfilerStep#N spans are covered by their derived "step" spans.
    if (step_name_[name]) return;
  }
  if (c.kind == CpuKind::kRuntime) c.correlation = ArgInt(e.args, "\"correlation\"");
  if (c.kind == CpuKind::kStep) c.step = e.step == model::kMissing ? -1 : e.step;
  r.cpu.push_back(c);
}

std::vector<RankTrace> RankSplitter::Finish() {
  std::vector<RankTrace> out;
  out.reserve(by_key_.size());
  for (auto& [key, r] : by_key_) {
    // Usually in order already (a store's chunks each sorted, few overlapping).
    auto by_start = [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; };
    SortRuns(&r.gpu, by_start);
    SortRuns(&r.cpu, by_start);
    out.push_back(std::move(r));
  }
  by_key_.clear();
  by_code_.clear();
  last_code_ = {-2, -2};
  last_ = nullptr;
  return out;
}

std::vector<RankTrace> SplitByRank(const store::EventTable& t) {
  RankSplitter split(&t.names, &t.categories, &t.nodes);
  RankSplitter::Event e;
  for (size_t i = 0; i < t.size(); ++i) {
    e.kind = t.kind[i];
    if (e.kind != static_cast<uint8_t>(model::EventKind::kSpan)) continue;
    e.name = t.name[i];
    e.category = t.category[i];
    e.node = t.node[i];
    e.rank = t.rank[i];
    e.pid = t.pid[i];
    e.tid = t.tid[i];
    e.step = t.step[i];
    e.start_ns = t.start_ns[i];
    e.duration_ns = t.duration_ns[i];
    e.args = t.args[i];
    split.Add(e);
  }
  return split.Finish();
}

Status SplitStoreByRank(store::NodeStoreReader& store, store::ReadProblems* problems,
                        StoreSplit* out) {
  RankSplitter split(&out->names, &out->categories, &out->nodes);
  const int32_t node = out->nodes.Code(store.node());
  store::EventTable& steps = out->step_events;
  const int32_t step_node = steps.nodes.Code(store.node());
  // Codes by the store's string ids, resolved once per id: kUnseen, kUnknown (the store has no
  // such string: a damaged chunk), or a code of out's dictionaries (modes: of step_events').
  constexpr int32_t kUnseen = -1, kUnknown = -2;
  std::vector<int32_t> name_code, category_code, mode_code;
  std::vector<char> step_category;  // by category code: an event BuildSteps reads
  auto resolve = [&](std::vector<int32_t>& memo, store::Dictionary& dict, uint32_t id) {
    if (id >= memo.size()) memo.resize(static_cast<size_t>(id) + 1, kUnseen);
    int32_t& c = memo[id];
    if (c == kUnseen) {
      const std::string* value = store.StringById(id);
      c = value ? dict.Code(*value) : kUnknown;
    }
    return c;
  };
  const std::string steps_categories[] = {model::kCategoryStep, model::kCategoryDataWait,
                                          model::kCategoryForward, model::kCategoryBackward,
                                          model::kCategoryOptimizer};
  RankSplitter::Event e;
  Status status = store.VisitEventChunks(
      store::kMinTime, store::kMaxTime, problems,
      [&](int64_t chunk_id, const store::EventChunkColumns& c) {
        for (size_t i = 0; i < c.size(); ++i) {
          const int64_t start = c.start_ns[i];
          // The rows a whole-time EventQuery keeps.
          if (!(start < store::kMaxTime &&
                model::SpanEndNs(start, c.duration_ns[i]) >= store::kMinTime)) {
            continue;
          }
          const int32_t name = resolve(name_code, out->names, c.name_id[i]);
          const int32_t category = resolve(category_code, out->categories, c.category_id[i]);
          const int32_t mode = resolve(mode_code, steps.modes, c.mode_id[i]);
          if (name < 0 || category < 0 || mode < 0) {
            problems->Add(store.path() + ": event chunk " + std::to_string(chunk_id) +
                          ": refers to an unknown string id");
            continue;
          }
          const auto cat = static_cast<size_t>(category);
          for (size_t k = step_category.size(); k <= cat; ++k) {
            const std::string& value = out->categories.at(static_cast<int32_t>(k));
            step_category.push_back(std::find(std::begin(steps_categories),
                                              std::end(steps_categories),
                                              value) != std::end(steps_categories));
          }
          if (step_category[cat]) {
            steps.node.push_back(step_node);
            steps.name.push_back(steps.names.Code(out->names.at(name)));
            steps.category.push_back(steps.categories.Code(out->categories.at(category)));
            steps.mode.push_back(mode);
            steps.kind.push_back(c.kind[i]);
            steps.rank.push_back(c.rank[i]);
            steps.pid.push_back(c.pid[i]);
            steps.tid.push_back(c.tid[i]);
            steps.step.push_back(c.step[i]);
            steps.start_ns.push_back(start);
            steps.duration_ns.push_back(c.duration_ns[i]);
            steps.args.emplace_back();
          }
          e.kind = c.kind[i];
          e.name = name;
          e.category = category;
          e.node = node;
          e.rank = c.rank[i];
          e.pid = c.pid[i];
          e.tid = c.tid[i];
          e.step = c.step[i];
          e.start_ns = start;
          e.duration_ns = c.duration_ns[i];
          e.args = c.args[i];
          split.Add(e);
        }
      });
  out->ranks = split.Finish();
  return status;
}

}  // namespace trainprof::analyze::trace
