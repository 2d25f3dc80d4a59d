#pragma once
// Helpers shared by the store tests.

#include <stdlib.h>

#include <string>

#include "base/test_dir.h"
#include "model/run_metadata.h"

namespace trainprof::store::testing {

inline std::string MakeTempDir(const std::string& prefix = "trainprof_test") {
  return MakeTestDir(prefix);
}

inline model::NodeInfo TestNode(const std::string& name = "node0") {
  model::NodeInfo n;
  n.node = name;
  n.hostname = name + ".local";
  n.cpu_model = "Test CPU";
  n.cpu_cores = 32;
  n.memory_total_bytes = 64LL << 30;
  return n;
}

}  // namespace trainprof::store::testing
