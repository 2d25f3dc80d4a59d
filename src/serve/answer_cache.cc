#include "serve/answer_cache.h"

#include <algorithm>
#include <utility>

namespace trainprof::serve {

AnswerCache::AnswerCache(Policy policy, std::function<int64_t()> clock)
    : policy_(policy), clock_(std::move(clock)) {}

int64_t AnswerCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t AnswerCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::optional<AnswerCache::Answer> AnswerCache::Kept(Entry& e, const RunVersion& version,
                                                     bool stale_ok, int64_t max_age_ns) {
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.answer.status == 0 || clock_() - e.made_ns > max_age_ns) return std::nullopt;
  if (e.version == version || (stale_ok && e.version.finished == version.finished)) {
    return e.answer;
  }
  return std::nullopt;
}

AnswerCache::Answer AnswerCache::Get(const std::string& key, const RunVersion& version,
                                     const std::function<Answer()>& compute) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if ((entries_.size() >= policy_.max_entries && !entries_.count(key)) ||
        bytes_ > policy_.max_bytes) {
      entries_.clear();
      bytes_ = 0;
    }
    auto& slot = entries_[key];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  bool throttled = false;
  {
    std::lock_guard<std::mutex> lock(entry->mu);
    throttled = entry->cost_ns > policy_.cheap_ns &&
                clock_() - entry->made_ns <
                    std::min(policy_.max_stale_ns, policy_.cost_factor * entry->cost_ns);
  }
  if (auto hit = Kept(*entry, version, throttled, policy_.max_age_ns)) return *hit;
  std::unique_lock<std::mutex> computing(entry->compute_mu, std::try_to_lock);
  if (!computing.owns_lock()) {  // another caller computes it: the last answer, or wait
    if (auto hit = Kept(*entry, version, true, policy_.stale_while_computing_ns)) return *hit;
    computing.lock();
    if (auto hit = Kept(*entry, version, false, policy_.max_age_ns)) return *hit;
  }
  const int64_t started = clock_();
  Answer made = compute();
  if (!made.body) made.body = std::make_shared<const std::string>();
  const int64_t size = static_cast<int64_t>(made.body->size());
  int64_t old_size = 0;
  {
    std::lock_guard<std::mutex> lock(entry->mu);
    old_size = entry->answer.body ? static_cast<int64_t>(entry->answer.body->size()) : 0;
    entry->answer = made;
    entry->version = version;
    entry->made_ns = clock_();
    entry->cost_ns = entry->made_ns - started;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second == entry) bytes_ += size - old_size;
  }
  return made;
}

}  // namespace trainprof::serve
