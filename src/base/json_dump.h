#pragma once
// nlohmann::json::dump() throws on invalid UTF-8, and text from traces, hosts and processes
// (kernel names, GPU names, paths) may hold it: a fuzzed trace with one bad byte in a device
// name aborted `import`. Documents we write go through DumpJson, where bad bytes become U+FFFD.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace trainprof {

inline std::string DumpJson(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

// Whether the JSON text nests objects/arrays deeper than `limit` (brackets inside strings do not
// count). One loop, no recursion: for text from files, checked before anything recursive
// (nlohmann's dump, a DOM walk) sees it. Malformed text is judged by its brackets alone.
inline bool JsonNestingExceeds(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limit) return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

}  // namespace trainprof
