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
  // a few hundred bytes) without the byte loop below. The counts add up in the eight byte lanes
  // of one word, summed every 64 words (a lane holds at most 64 by then): no popcount, which
  // is a library call where the build does not assume a CPU that has the instruction.
  constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7fULL;
  constexpr uint64_t kEach = 0x0101010101010101ULL;
  constexpr uint64_t kEvenLanes = 0x00ff00ff00ff00ffULL;
  auto zero_lanes = [](uint64_t v) {  // 1 in each byte lane where v's byte is zero
    return ~(((v & kLow7) + kLow7) | v | kLow7) >> 7;
  };
  auto lane_sum = [](uint64_t lanes) {
    const uint64_t pairs = (lanes & kEvenLanes) + ((lanes >> 8) & kEvenLanes);
    return static_cast<size_t>((pairs * 0x0001000100010001ULL) >> 48);
  };
  size_t openers = 0;
  size_t i = 0;
  uint64_t lanes = 0;
  for (int words = 0; i + 8 <= text.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, text.data() + i, 8);
    lanes += zero_lanes(v ^ ('{' * kEach)) + zero_lanes(v ^ ('[' * kEach));
    if (++words == 64) {
      openers += lane_sum(lanes);
      lanes = 0;
      words = 0;
    }
  }
  openers += lane_sum(lanes);
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
