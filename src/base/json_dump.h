#pragma once
// nlohmann::json::dump() throws on invalid UTF-8, and text from traces, hosts and processes
// (kernel names, GPU names, paths) may hold it: a fuzzed trace with one bad byte in a device
// name aborted `import`. Documents we write go through DumpJson, where bad bytes become U+FFFD.

#include <nlohmann/json.hpp>
#include <string>

namespace trainprof {

inline std::string DumpJson(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace trainprof
