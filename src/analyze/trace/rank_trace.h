#pragma once
// The per-rank view of imported trace events that the analyses work on: GPU activities
// (kernels, memcpy, memset, syncs) with device, stream and correlation id, and CPU spans
// (operators, runtime calls, annotations, profiler steps). Built once from the store's
// EventTable; names stay dictionary codes into that table.
// Threads: plain data, read-only after construction.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "store/tables.h"

namespace trainprof::store {
class NodeStoreReader;
}  // namespace trainprof::store

namespace trainprof::analyze::trace {

enum class GpuKind : uint8_t { kKernel, kMemcpy, kMemset, kSync };
// kCollective: a collective timed on the host by in-process instrumentation (category
// "collective": all_reduce, barrier... of torch.distributed), what the rank waits in.
enum class CpuKind : uint8_t { kOp, kRuntime, kAnnotation, kStep, kCollective, kOther };

// The narrow fields last: 48 bytes, not 56 (a million of these are read, sorted and merged).
struct GpuActivity {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t device = -1;
  int64_t stream = -1;
  int64_t correlation = -1;
  int32_t name = 0;  // code in the EventTable's names
  GpuKind kind = GpuKind::kKernel;
};

struct CpuSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t tid = -1;
  int64_t correlation = -1;  // runtime calls
  int64_t step = -1;         // profiler steps
  int32_t name = 0;
  CpuKind kind = CpuKind::kOther;
};

struct RankTrace {
  int64_t rank = -1;  // -1 when the trace had no distributedInfo
  std::string label;  // "0", or the node name when the rank is unknown
  std::string node;
  const store::Dictionary* names = nullptr;
  std::vector<GpuActivity> gpu;  // sorted by start
  std::vector<CpuSpan> cpu;      // sorted by start
  const std::string& Name(int32_t code) const { return names->at(code); }
};

// Builds rank traces from events given one at a time, in any order: each rank's activities and
// spans are sorted by start at the end, equal starts in the order given (so events in a store's
// chunk order give the traces of the same events sorted by start first). SplitByRank is this
// over a table; analyze feeds it a store's chunks straight (SplitStoreByRank).
class RankSplitter {
 public:
  // Events name their name, category and node by codes of these dictionaries, which may grow
  // between Add()s. `names` must outlive the traces (they name events by it).
  RankSplitter(const store::Dictionary* names, const store::Dictionary* categories,
               const store::Dictionary* nodes);
  struct Event {
    int32_t name = 0, category = 0, node = 0;
    uint8_t kind = 0;                              // model::EventKind
    int64_t rank = 0, pid = 0, tid = 0, step = 0;  // model::kMissing when absent
    int64_t start_ns = 0, duration_ns = 0;
    std::string_view args;  // read during the call only
  };
  void Add(const Event& e);
  // The traces, by (rank, node when the rank is unknown).
  std::vector<RankTrace> Finish();

  // What a category makes of its events: a device activity of some kind, or a CPU span.
  enum class CatRole : uint8_t { kNamedDevice, kMemcpy, kMemset, kSync, kCpu };
  static CatRole RoleOf(const std::string& category);

 private:
  void Learn(const Event& e);  // extends the per-code tables to the event's codes
  const store::Dictionary* names_;
  const store::Dictionary* categories_;
  const store::Dictionary* nodes_;
  std::vector<CatRole> role_;        // by category code
  std::vector<CpuKind> cpu_kind_;    // by category code
  std::vector<GpuKind> named_kind_;  // by name code
  std::vector<char> step_name_;      // by name code: a ProfilerStep#N span
  std::map<std::pair<int64_t, std::string>, RankTrace> by_key_;
  std::map<std::pair<int64_t, int32_t>, RankTrace*> by_code_;  // (rank, node code or -1)
  std::pair<int64_t, int32_t> last_code_{-2, -2};
  RankTrace* last_ = nullptr;
};

// Sorts `v` by `less` as std::stable_sort does (equal elements keep their order), in one pass
// when `v` is a few ascending runs: a store's chunks, each in order, overlapping little, and
// the steps written after the spans. Each run is merged into the sorted part from the first
// element it precedes; many short runs fall back to std::stable_sort.
template <typename T, typename Less>
void SortRuns(std::vector<T>* v, Less less) {
  const size_t n = v->size();
  size_t sorted = 0;  // (*v)[0, sorted) is in order
  size_t moved = 0;
  while (true) {
    sorted = std::max<size_t>(sorted, 1);
    while (sorted < n && !less((*v)[sorted], (*v)[sorted - 1])) ++sorted;
    if (sorted >= n) return;
    size_t run_end = sorted + 1;
    while (run_end < n && !less((*v)[run_end], (*v)[run_end - 1])) ++run_end;
    // Elements equal to the run's first stay before it: upper_bound, and inplace_merge is
    // stable.
    const auto from = std::upper_bound(v->begin(), v->begin() + static_cast<ptrdiff_t>(sorted),
                                       (*v)[sorted], less);
    moved += run_end - static_cast<size_t>(from - v->begin());
    if (moved > 8 * n) {  // many runs: the sorted prefix is still the stable order of its part
      std::stable_sort(v->begin(), v->end(), less);
      return;
    }
    std::inplace_merge(from, v->begin() + static_cast<ptrdiff_t>(sorted),
                       v->begin() + static_cast<ptrdiff_t>(run_end), less);
    sorted = run_end;
  }
}

// Groups a table's events by (rank, or node when the rank is missing). The table must outlive
// the result (names point into it).
std::vector<RankTrace> SplitByRank(const store::EventTable& events);
// One store's events split by rank straight from its chunks, without an EventTable (a million
// events' table was most of analyze's read): the traces SplitByRank gives for the store's
// RunReader::EventsByStore table. Also keeps the events store::BuildSteps reads (steps and
// their data-wait / forward / backward / optimizer parts) for the run's steps. Held by pointer:
// the traces name events by `names`.
struct StoreSplit {
  store::Dictionary names, categories, nodes;
  std::vector<RankTrace> ranks;
  store::EventTable step_events;
};
Status SplitStoreByRank(store::NodeStoreReader& store, store::ReadProblems* problems,
                        StoreSplit* out);

// Whether SplitByRank reads the args of an event of this category and kind (a device
// activity's correlation and stream, a runtime call's correlation): EventQuery::keep_args for
// a read that only feeds it.
bool SplitByRankReadsArgs(const std::string& category, model::EventKind kind);

// The integer value of `"key":` in a JSON args text, or -1 when absent.
int64_t ArgInt(std::string_view args, const char* quoted_key);
// EventQuery::map_args for a read that feeds only SplitByRank and BuildHtaTraces: the args text
// reduced to the two values they read ("stream" and "correlation", as ArgInt reads them), so
// that ArgInt reads the same from it.
void KeepTraceArgs(std::string_view args, std::string* kept);

}  // namespace trainprof::analyze::trace
