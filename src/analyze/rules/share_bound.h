#pragma once
// The share of samples with a condition, judged with a confidence bound over the samples so
// far instead of after a fixed count of samples or windows (issue 19). Used by CPUBottleneck,
// IOBottleneck and LowGPUUtilization.
//
// Samples arrive in time order with up to two indicators (e.g. "GPU idle while a core is busy").
// They are grouped into blocks of `block_ns` of data time. Each time a block closes, the spans
// ending at the newest closed block are tried, one block longer each, back to `max_span_ns`
// (older blocks are dropped); a span is judged once it covers `min_span_ns` and `min_samples`.
// For a span with n samples of which k have the condition, the share p = k / n is bounded with
// the Wilson score interval at one-sided confidence `confidence`, on an effective sample count
// n / deff: samples of a system metric are autocorrelated (a busy second is followed by a busy
// second), so the design effect deff = sum_j n_j (m_j - p)^2 / (J p (1 - p)) measured from the J
// block means m_j (1 for independent samples, up to the block size when blocks are all-or-
// nothing) discounts them; a span where every sample has the condition (or none) shows no
// variation to measure it from and counts its samples. The bound is per span tested.
//
// Threads: a plain value; one thread at a time.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>

#include "analyze/stats/stats.h"

namespace trainprof::analyze::rules {

// The one-sided normal quantile for a confidence in (0.5, 1): 0.95 -> 1.645, 0.99 -> 2.326.
using stats::NormalQuantile;

// Wilson score bounds of a share p observed on n (effective) samples, z the normal quantile.
inline double WilsonLower(double p, double n, double z) {
  if (n <= 0) return 0;
  const double z2 = z * z;
  const double centre = p + z2 / (2 * n);
  const double margin = z * std::sqrt(std::max(0.0, p * (1 - p) / n + z2 / (4 * n * n)));
  return std::clamp((centre - margin) / (1 + z2 / n), 0.0, 1.0);
}
inline double WilsonUpper(double p, double n, double z) { return 1 - WilsonLower(1 - p, n, z); }

struct ShareSpan {
  int64_t start_ns = 0, end_ns = 0;  // first and last sample of the span
  int64_t samples = 0, blocks = 0;
  int64_t hits[2] = {0, 0};  // samples with each indicator
  double share[2] = {0, 0};
  double design_effect[2] = {1, 1};
  double effective_samples[2] = {0, 0};
  double lower[2] = {0, 0}, upper[2] = {1, 1};  // Wilson bounds of each share
};

struct ShareOptions {
  int64_t block_ns = 2'000'000'000;
  int64_t min_span_ns = 10'000'000'000;
  int64_t max_span_ns = 300'000'000'000;
  int64_t min_samples = 10;
  int64_t max_samples = 0;  // > 0: spans hold at most this many samples (older blocks dropped)
  double confidence = 0.95;
};

class ShareBound {
 public:
  explicit ShareBound(const ShareOptions& o = {}) : o_(o), z_(NormalQuantile(o.confidence)) {}

  // Adds a sample; returns true when it closed a block (then Spans() has new spans to judge).
  bool Add(int64_t ts_ns, bool a, bool b = false) {
    bool closed = false;
    if (!open_.samples || ts_ns - open_.start_ns >= o_.block_ns) {
      if (open_.samples) {
        blocks_.push_back(open_);
        held_ += open_.samples;
        while (!blocks_.empty() &&
               (blocks_.back().end_ns - blocks_.front().start_ns > o_.max_span_ns ||
                blocks_.size() > kMaxBlocks || (o_.max_samples > 0 && held_ > o_.max_samples))) {
          held_ -= blocks_.front().samples;
          blocks_.pop_front();
        }
        closed = true;
      }
      open_ = Block{};
      open_.start_ns = ts_ns;
    }
    open_.end_ns = ts_ns;
    ++open_.samples;
    open_.hits[0] += a ? 1 : 0;
    open_.hits[1] += b ? 1 : 0;
    ++total_;
    return closed;
  }
  int64_t total() const { return total_; }
  void Clear() {
    blocks_.clear();
    held_ = 0;
    open_ = Block{};
  }

  // Calls `judge(span)` for each span ending at the newest closed block, shortest first, that
  // covers min_span_ns and min_samples; stops when it returns true.
  template <typename F>
  void Spans(F&& judge) const {
    Spans([](double, double) { return true; }, judge);
  }
  // The same for the spans whose shares pass `viable(share a, share b)`; the bounds of the
  // others are not computed. A Wilson interval holds its share (lower <= share <= upper), so
  // a rule that needs, say, upper < 5 % passes `share < 5 %` and loses nothing: on a long run
  // most spans are then skipped at the cost of a division.
  template <typename V, typename F>
  void Spans(V&& viable, F&& judge) const {
    int64_t n = 0, k[2] = {0, 0};
    double sq[2] = {0, 0};  // sum over blocks of hits^2 / samples
    for (size_t i = blocks_.size(); i-- > 0;) {
      const Block& bl = blocks_[i];
      n += bl.samples;
      for (int j = 0; j < 2; ++j) {
        k[j] += bl.hits[j];
        sq[j] += static_cast<double>(bl.hits[j]) * static_cast<double>(bl.hits[j]) /
                 static_cast<double>(bl.samples);
      }
      const int64_t start = bl.start_ns, end = blocks_.back().end_ns;
      if (end - start < o_.min_span_ns || n < o_.min_samples) continue;
      if (!viable(static_cast<double>(k[0]) / static_cast<double>(n),
                  static_cast<double>(k[1]) / static_cast<double>(n))) {
        continue;
      }
      ShareSpan s;
      s.start_ns = start;
      s.end_ns = end;
      s.samples = n;
      s.blocks = static_cast<int64_t>(blocks_.size() - i);
      const double dn = static_cast<double>(n);
      for (int j = 0; j < 2; ++j) {
        const double p = static_cast<double>(k[j]) / dn;
        double deff = 1;
        if (p > 0 && p < 1) {
          // sum_b n_b (m_b - p)^2 = sum_b h_b^2 / n_b - 2 p k + p^2 n
          const double between = sq[j] - 2 * p * static_cast<double>(k[j]) + p * p * dn;
          const double mean_block = dn / static_cast<double>(s.blocks);
          deff = std::clamp(between / (static_cast<double>(s.blocks) * p * (1 - p)), 1.0,
                            std::max(1.0, mean_block));
        }
        const double n_eff = static_cast<double>(n) / deff;
        s.hits[j] = k[j];
        s.share[j] = p;
        s.design_effect[j] = deff;
        s.effective_samples[j] = n_eff;
        s.lower[j] = WilsonLower(p, n_eff, z_);
        s.upper[j] = WilsonUpper(p, n_eff, z_);
      }
      if (judge(s)) return;
    }
  }
  const ShareOptions& options() const { return o_; }
  // The closed blocks from `start_ns` on as [[start_ns, samples, hits a, hits b], ...], at most
  // `max_blocks` (the newest), for a finding's evidence.
  nlohmann::json Blocks(int64_t start_ns, size_t max_blocks) const {
    nlohmann::json out = nlohmann::json::array();
    size_t first = 0;
    while (first < blocks_.size() && blocks_[first].start_ns < start_ns) ++first;
    if (blocks_.size() - first > max_blocks) first = blocks_.size() - max_blocks;
    for (size_t i = first; i < blocks_.size(); ++i) {
      const Block& b = blocks_[i];
      out.push_back({b.start_ns, b.samples, b.hits[0], b.hits[1]});
    }
    return out;
  }

 private:
  static constexpr size_t kMaxBlocks = 1024;  // bound whatever the parameters
  struct Block {
    int64_t start_ns = 0, end_ns = 0, samples = 0;
    int64_t hits[2] = {0, 0};
  };
  ShareOptions o_;
  double z_;
  std::deque<Block> blocks_;
  Block open_;
  int64_t total_ = 0, held_ = 0;
};

}  // namespace trainprof::analyze::rules
