#include "analyze/trace/intervals.h"

#include <algorithm>

namespace trainprof::analyze::trace {

namespace {

// Merges intervals already ordered by start (ties in any order: they merge alike).
Intervals MergeOrdered(const Intervals& v) {
  Intervals out;
  for (const Interval& x : v) {
    if (x.second < x.first) continue;
    if (!out.empty() && x.first <= out.back().second) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

bool ByStart(const Interval& a, const Interval& b) { return a.first < b.first; }

}  // namespace

Intervals Merge(Intervals v) {
  // A trace's activities mostly come ordered by start already: then no sort.
  if (!std::is_sorted(v.begin(), v.end(), ByStart)) std::sort(v.begin(), v.end());
  return MergeOrdered(v);
}

int64_t Length(const Intervals& merged) {
  int64_t total = 0;
  for (const Interval& x : merged) total += x.second - x.first;
  return total;
}

int64_t IntersectLength(const Intervals& a, const Intervals& b) {
  int64_t total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t lo = std::max(a[i].first, b[j].first);
    int64_t hi = std::min(a[i].second, b[j].second);
    if (hi > lo) total += hi - lo;
    if (a[i].second < b[j].second)
      ++i;
    else
      ++j;
  }
  return total;
}

Intervals Subtract(const Intervals& a, const Intervals& b) {
  Intervals out;
  size_t j = 0;
  for (const Interval& x : a) {
    int64_t cur = x.first;
    while (j < b.size() && b[j].second <= cur) ++j;
    size_t k = j;
    while (k < b.size() && b[k].first < x.second) {
      if (b[k].first > cur) out.emplace_back(cur, b[k].first);
      cur = std::max(cur, b[k].second);
      if (b[k].second >= x.second) break;
      ++k;
    }
    if (cur < x.second) out.emplace_back(cur, x.second);
  }
  return out;
}

Intervals Union(const Intervals& a, const Intervals& b) {
  // Both merged, so each ordered by start: one linear merge instead of a sort.
  Intervals v(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), v.begin(), ByStart);
  if (!std::is_sorted(v.begin(), v.end(), ByStart)) std::sort(v.begin(), v.end());  // unmerged
  return MergeOrdered(v);
}

Intervals Clip(const Intervals& merged, int64_t lo, int64_t hi) {
  Intervals out;
  auto it = std::lower_bound(merged.begin(), merged.end(), lo,
                             [](const Interval& x, int64_t t) { return x.second <= t; });
  for (; it != merged.end() && it->first < hi; ++it) {
    int64_t s = std::max(it->first, lo), e = std::min(it->second, hi);
    if (e > s) out.emplace_back(s, e);
  }
  return out;
}

}  // namespace trainprof::analyze::trace
