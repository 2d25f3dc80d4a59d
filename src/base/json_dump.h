#pragma once
// nlohmann::json::dump() throws on invalid UTF-8, and text from traces, hosts and processes
// (kernel names, GPU names, paths) may hold it: a fuzzed trace with one bad byte in a device
// name aborted `import`. Documents we write go through DumpJson, where bad bytes become U+FFFD.

#include <cstdint>
#include <cstring>
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
  // No more opening brackets than the limit, wherever they are, cannot nest deeper. Counted 8
  // bytes at a time (the high bit of each byte of ~((v & 0x7f..) + 0x7f.. | v | 0x7f..) is set
  // exactly where v's byte is zero), this settles most texts (a trace's args: a few brackets in
  // a few hundred bytes) without the byte loop below.
  constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7fULL;
  constexpr uint64_t kEach = 0x0101010101010101ULL;
  auto zero_bytes = [](uint64_t v) {
    return __builtin_popcountll(~(((v & kLow7) + kLow7) | v | kLow7));
  };
  size_t openers = 0;
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, text.data() + i, 8);
    openers += static_cast<size_t>(zero_bytes(v ^ ('{' * kEach)) + zero_bytes(v ^ ('[' * kEach)));
  }
  for (; i < text.size(); ++i) openers += text[i] == '{' || text[i] == '[';
  if (openers <= static_cast<size_t>(limit < 0 ? 0 : limit)) return false;
  int depth = 0;
  bool in_string = false;
  for (i = 0; i < text.size(); ++i) {
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
