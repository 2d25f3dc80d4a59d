#pragma once
// The one function the agent needs from collect/: every collector for this node, in the order
// the sampling loop calls them. collect/ defines it (its list of collectors); until that lands,
// stand_in_collectors.cc (a temporary file, deleted at merge) provides a minimal one.

#include <memory>
#include <vector>

#include "collect/collector.h"

namespace trainprof::collect {

std::vector<std::unique_ptr<Collector>> MakeCollectors(const CollectorContext& context);

}  // namespace trainprof::collect
