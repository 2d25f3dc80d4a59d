#ifndef TRAINPROF_SERVE_ANSWER_CACHE_H_
#define TRAINPROF_SERVE_ANSWER_CACHE_H_

// The dashboard's answers, computed once and shared by every client that asks while the run's
// data is unchanged: 50 pages on a live run cost one computation of each answer per new sample,
// not fifty, and none of them waits behind another's computation when an earlier answer exists.
//
// Per key (a run and a request):
// - The kept answer is served while the run's version (its newest timestamp, whether it ended)
//   is the same, for at most max_age_ns (an answer can depend on the clock: a run's status).
// - One client computes an answer at a time. While it does, the others get the kept answer
//   (up to stale_while_computing_ns old) when there is one, and wait for the new one otherwise.
// - An answer that took more than cheap_ns to compute is recomputed for a new version at most
//   every cost_factor times its last cost (capped at max_stale_ns): a live run's report is
//   rebuilt a few times a second at most, whatever the sampling rate, so the server's share of a
//   core stays bounded. Cheap answers (a chart) are always fresh.
// - A run that ended is shown as ended at once: an answer made before the end is never served
//   after it.
// - Bounded: at most max_entries answers and about max_bytes of bodies; past either, all are
//   dropped (the next requests recompute them).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace trainprof::serve {

// What a run's answers depend on.
struct RunVersion {
  std::optional<int64_t> latest;  // newest timestamp in the run
  bool finished = false;
  bool operator==(const RunVersion&) const = default;
};

class AnswerCache {
 public:
  struct Policy {
    int64_t max_age_ns = 5'000'000'000;
    int64_t cheap_ns = 20'000'000;
    int64_t cost_factor = 8;
    int64_t max_stale_ns = 1'000'000'000;
    int64_t stale_while_computing_ns = 60'000'000'000;
    size_t max_entries = 512;
    int64_t max_bytes = 64 << 20;
  };
  struct Answer {
    int status = 0;
    std::shared_ptr<const std::string> body;
  };

  // clock: monotonic nanoseconds (tests give a fake one).
  explicit AnswerCache(Policy policy, std::function<int64_t()> clock);

  // The answer for `key` at `version`: kept, or made by compute() (called without any lock of
  // this cache held, by one caller at a time per key).
  Answer Get(const std::string& key, const RunVersion& version,
             const std::function<Answer()>& compute);

  int64_t bytes() const;
  size_t entries() const;

 private:
  struct Entry {
    std::mutex mu;          // guards the fields below; held only to read or replace them
    std::mutex compute_mu;  // held by the caller computing the answer
    RunVersion version;
    int64_t made_ns = 0;
    int64_t cost_ns = 0;
    Answer answer;
  };
  std::optional<Answer> Kept(Entry& e, const RunVersion& version, bool stale_ok,
                             int64_t max_age_ns);

  const Policy policy_;
  const std::function<int64_t()> clock_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  int64_t bytes_ = 0;  // guarded by mu_
};

}  // namespace trainprof::serve

#endif  // TRAINPROF_SERVE_ANSWER_CACHE_H_
