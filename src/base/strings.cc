#include "base/strings.h"

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace trainprof {

std::string StrFormat(const char* format, ...) {
  char small[128];
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(small, sizeof small, format, args);
  va_end(args);
  std::string out;
  if (n < 0) {
    va_end(again);
    return out;
  }
  if (static_cast<size_t>(n) < sizeof small) {
    va_end(again);
    return std::string(small, static_cast<size_t>(n));
  }
  out.resize(static_cast<size_t>(n) + 1);
  std::vsnprintf(out.data(), out.size(), format, again);
  va_end(again);
  out.resize(static_cast<size_t>(n));
  return out;
}

size_t FindSubstring(std::string_view text, std::string_view needle) {
  const size_t n = needle.size();
  if (n == 0) return 0;
  if (text.size() < n) return std::string_view::npos;
  const char* t = text.data();
  const size_t last = text.size() - n;  // the last position the needle can start at
  if (n == 1) return text.find(needle[0]);
  // Two bytes of the needle are tested at 16 positions at once, then the whole needle where
  // both match. Not its first and last when it has inner bytes: a quoted key's are quotes, found
  // at every key of the same length in a JSON text.
  const size_t p1 = n >= 4 ? 1 : 0;
  const size_t p2 = n >= 4 ? n - 2 : n - 1;
  // Vector extensions (GCC and Clang): SSE2 on x86-64, NEON on arm64.
  using V16 = uint8_t __attribute__((vector_size(16)));
  V16 b1 = {}, b2 = {};
  b1 += static_cast<uint8_t>(needle[p1]);
  b2 += static_cast<uint8_t>(needle[p2]);
  size_t i = 0;
  // Block loads read t[i + p1, i + p1 + 16) and t[i + p2, i + p2 + 16): inside the text while
  // i + 15 <= last (p2 <= n - 1).
  for (; i + 15 <= last; i += 16) {
    V16 a, b;
    std::memcpy(&a, t + i + p1, 16);
    std::memcpy(&b, t + i + p2, 16);
    const auto hit = (a == b1) & (b == b2);  // each lane 0 or all ones
    uint64_t half[2];
    std::memcpy(half, &hit, 16);
    for (int h = 0; h < 2; ++h) {
      uint64_t m = half[h];
      while (m != 0) {
        const int lane = __builtin_ctzll(m) / 8;
        const size_t at = i + 8 * static_cast<size_t>(h) + static_cast<size_t>(lane);
        if (std::memcmp(t + at, needle.data(), n) == 0) return at;
        m &= ~(uint64_t{0xff} << (8 * lane));
      }
    }
  }
  for (; i <= last; ++i) {
    if (t[i + p1] == needle[p1] && std::memcmp(t + i, needle.data(), n) == 0) return i;
  }
  return std::string_view::npos;
}

}  // namespace trainprof
