#pragma once
// Sorted, non-overlapping time intervals and the set operations the analyses need.
// Threads: pure functions.

#include <cstdint>
#include <utility>
#include <vector>

namespace trainprof::analyze::trace {

using Interval = std::pair<int64_t, int64_t>;  // [start_ns, end_ns)
using Intervals = std::vector<Interval>;

// Sorts and merges overlapping or touching intervals (HTA's merge_kernel_intervals).
Intervals Merge(Intervals v);
int64_t Length(const Intervals& merged);
int64_t IntersectLength(const Intervals& a, const Intervals& b);
// a minus b; both merged.
Intervals Subtract(const Intervals& a, const Intervals& b);
// Both merged (linear); lists that are not are sorted first.
Intervals Union(const Intervals& a, const Intervals& b);
// The part of a merged list inside [lo, hi).
Intervals Clip(const Intervals& merged, int64_t lo, int64_t hi);

}  // namespace trainprof::analyze::trace
