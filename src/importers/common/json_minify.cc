#include "importers/common/json_minify.h"

#include <array>
#include <cstdint>

#include "importers/common/json_text.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TRAINPROF_MINIFY_AVX2 1
#include <immintrin.h>
#endif

namespace trainprof::importers::json {
namespace {

// Bytes copied as they are: everything but whitespace, quotes and brackets.
constexpr auto kPlain = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = true;
  for (unsigned char c : {' ', '\n', '\r', '\t', '"', '{', '}', '[', ']'}) t[c] = false;
  return t;
}();

// The scalar loop from q, `depth` brackets deep, inside a string when in_string (whose bytes
// before q hold no backslash: the vector path hands over only such values).
bool MinifyFrom(const char* q, const char* end, std::string* out, const char** value_end,
                int64_t depth, bool in_string) {
  if (in_string) {
    const char* e = StringEnd(q, end);
    if (e == nullptr) return false;
    out->append(q, static_cast<size_t>(e - q));
    q = e;
  }
  while (q < end) {
    const char* r = q;
    while (r < end && kPlain[static_cast<unsigned char>(*r)]) ++r;
    if (r != q) out->append(q, static_cast<size_t>(r - q));
    q = r;
    if (q >= end) break;
    const char c = *q;
    if (c == '"') {
      const char* e = StringEnd(q + 1, end);
      if (e == nullptr) return false;
      out->append(q, static_cast<size_t>(e - q));
      q = e;
      continue;
    }
    ++q;
    if (IsWs(c)) {  // the indentation after a line break: a run of them
      q = SkipWs(q, end);
      continue;
    }
    out->push_back(c);
    if (c == '{' || c == '[') {
      ++depth;
    } else if (--depth == 0) {
      *value_end = q;
      return true;
    }
  }
  return false;
}

#ifdef TRAINPROF_MINIFY_AVX2

// For each mask of 8 bytes to keep, the shuffle that packs them to the front.
constexpr auto kPack = [] {
  std::array<std::array<uint8_t, 8>, 256> t{};
  for (int m = 0; m < 256; ++m) {
    int n = 0;
    for (int b = 0; b < 8; ++b) {
      if (m & (1 << b)) t[m][n++] = static_cast<uint8_t>(b);
    }
    for (; n < 8; ++n) t[m][n] = 0x80;  // zero: written past the kept bytes, then overwritten
  }
  return t;
}();

__attribute__((target("avx2,pclmul,popcnt,bmi"))) uint64_t Mask(__m256i lo, __m256i hi,
                                                                __m256i byte) {
  const uint32_t a = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, byte)));
  const uint32_t b = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, byte)));
  return uint64_t{a} | uint64_t{b} << 32;
}

__attribute__((target("avx2,pclmul,popcnt,bmi"))) bool MinifyAvx2(const char* p, const char* end,
                                                                  std::string* out,
                                                                  const char** value_end) {
  constexpr size_t kBuf = 4096;
  alignas(32) char buf[kBuf + 64];
  size_t w = 0;
  const __m256i quote = _mm256_set1_epi8('"'), backslash = _mm256_set1_epi8('\\');
  const __m256i space = _mm256_set1_epi8(' '), nl = _mm256_set1_epi8('\n');
  const __m256i cr = _mm256_set1_epi8('\r'), tab = _mm256_set1_epi8('\t');
  const __m256i lower = _mm256_set1_epi8(0x20);  // '[' | 0x20 is '{', ']' | 0x20 is '}'
  const __m256i open = _mm256_set1_epi8('{'), close = _mm256_set1_epi8('}');
  const __m128i ones = _mm_set1_epi8(static_cast<char>(0xFF));
  uint64_t in_string = 0;  // all ones when the last block ended inside a string
  int64_t depth = 0;
  const char* q = p;
  while (end - q >= 64) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32));
    // A backslash anywhere in the block (even past the value): the scalar loop from here,
    // which reads escapes; before this block the value had none, so its state carries over.
    if (Mask(lo, hi, backslash) != 0) break;
    const uint64_t quotes = Mask(lo, hi, quote);
    // Bit i: an odd number of quotes at or before byte i (an opening quote and what follows it
    // up to, not including, its closing quote): the prefix XOR, a carry-less multiply by ~0.
    const uint64_t strings = static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_clmulepi64_si128(
                                 _mm_set_epi64x(0, static_cast<int64_t>(quotes)), ones, 0))) ^
                             in_string;
    in_string = static_cast<uint64_t>(static_cast<int64_t>(strings) >> 63);
    const __m256i ws_lo =
        _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(lo, space), _mm256_cmpeq_epi8(lo, nl)),
                        _mm256_or_si256(_mm256_cmpeq_epi8(lo, cr), _mm256_cmpeq_epi8(lo, tab)));
    const __m256i ws_hi =
        _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(hi, space), _mm256_cmpeq_epi8(hi, nl)),
                        _mm256_or_si256(_mm256_cmpeq_epi8(hi, cr), _mm256_cmpeq_epi8(hi, tab)));
    const uint64_t ws = uint64_t{static_cast<uint32_t>(_mm256_movemask_epi8(ws_lo))} |
                        uint64_t{static_cast<uint32_t>(_mm256_movemask_epi8(ws_hi))} << 32;
    const __m256i lo20 = _mm256_or_si256(lo, lower), hi20 = _mm256_or_si256(hi, lower);
    const uint64_t opens = Mask(lo20, hi20, open) & ~strings;
    const uint64_t closes = Mask(lo20, hi20, close) & ~strings;
    uint64_t keep = ~(ws & ~strings);
    bool ended = false;
    if (static_cast<int64_t>(_mm_popcnt_u64(closes)) >= depth) {
      // The value may end here: walk its brackets in order.
      for (uint64_t s = opens | closes; s != 0; s &= s - 1) {
        const int i = static_cast<int>(_tzcnt_u64(s));
        if ((opens >> i) & 1) {
          ++depth;
        } else if (--depth == 0) {
          if (i < 63) keep &= (uint64_t{2} << i) - 1;
          *value_end = q + i + 1;
          ended = true;
          break;
        }
      }
    } else {
      depth += static_cast<int64_t>(_mm_popcnt_u64(opens)) -
               static_cast<int64_t>(_mm_popcnt_u64(closes));
    }
    // Pack the kept bytes, 8 at a time.
    for (int g = 0; g < 8; ++g) {
      const unsigned m = static_cast<unsigned>(keep >> (8 * g)) & 0xFF;
      const __m128i src = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 8 * g));
      const __m128i shuffle = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(kPack[m].data()));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(buf + w), _mm_shuffle_epi8(src, shuffle));
      w += static_cast<size_t>(_mm_popcnt_u32(m));
    }
    if (ended) {
      out->append(buf, w);
      return true;
    }
    q += 64;
    if (w > kBuf) {
      out->append(buf, w);
      w = 0;
    }
  }
  out->append(buf, w);
  return MinifyFrom(q, end, out, value_end, depth, in_string != 0);
}

bool HasAvx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
                          __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi");
  return yes;
}

#endif  // TRAINPROF_MINIFY_AVX2

}  // namespace

bool MinifyValueScalar(const char* p, const char* end, std::string* out, const char** value_end) {
  return MinifyFrom(p, end, out, value_end, 0, false);
}

bool MinifyValue(const char* p, const char* end, std::string* out, const char** value_end) {
#ifdef TRAINPROF_MINIFY_AVX2
  if (HasAvx2()) return MinifyAvx2(p, end, out, value_end);
#endif
  return MinifyValueScalar(p, end, out, value_end);
}

bool MinifyValueIsVectorized() {
#ifdef TRAINPROF_MINIFY_AVX2
  return HasAvx2();
#else
  return false;
#endif
}

}  // namespace trainprof::importers::json
