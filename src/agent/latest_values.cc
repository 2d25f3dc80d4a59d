#include "agent/latest_values.h"

#include <utility>

namespace trainprof::agent {

void LatestValues::Publish(LatestSnapshot snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = std::move(snapshot);
}

LatestSnapshot LatestValues::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

}  // namespace trainprof::agent
