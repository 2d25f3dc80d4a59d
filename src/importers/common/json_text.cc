#include "importers/common/json_text.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_set>
#include <vector>

namespace trainprof::importers::json {
namespace {

// The bytes that matter when skipping a nested value: quotes and brackets.
constexpr auto kStructural = [] {
  std::array<bool, 256> t{};
  for (unsigned char c : {'"', '{', '}', '[', ']'}) t[c] = true;
  return t;
}();

}  // namespace

// Most strings in traces are keys and short names: a plain loop finds their end before a
// memchr call would have started; longer ones (kernel names, args) go to memchr.
const char* StringEnd(const char* p, const char* end) {
  const char* const start = p;
  for (const char* stop = std::min(end, p + 24); p < stop; ++p) {
    if (*p == '"') {
      const char* b = p;
      while (b > start && b[-1] == '\\') --b;
      if (((p - b) & 1) == 0) return p + 1;
    }
  }
  while (p < end) {
    const void* hit = std::memchr(p, '"', static_cast<size_t>(end - p));
    if (hit == nullptr) return nullptr;
    const char* q = static_cast<const char*>(hit);
    // Count the backslashes before the quote: an odd count escapes it.
    const char* b = q;
    while (b > start && b[-1] == '\\') --b;
    if (((q - b) & 1) == 0) return q + 1;
    p = q + 1;
  }
  return nullptr;
}

namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool Hex4(const char* p, const char* end, uint32_t* out) {
  if (end - p < 4) return false;
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= static_cast<uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= static_cast<uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= static_cast<uint32_t>(c - 'A' + 10);
    else
      return false;
  }
  *out = v;
  return true;
}

}  // namespace

ScanResult FindValueEnd(const char* p, const char* end, bool at_eof, const char** value_end) {
  if (p >= end) return at_eof ? ScanResult::kInvalid : ScanResult::kIncomplete;
  char c = *p;
  if (c == '"') {
    const char* e = StringEnd(p + 1, end);
    if (e == nullptr) return at_eof ? ScanResult::kInvalid : ScanResult::kIncomplete;
    *value_end = e;
    return ScanResult::kOk;
  }
  if (c == '{' || c == '[') {
    int depth = 0;
    const char* q = p;
    while (q < end) {
      // Skip what cannot open, close or quote anything, a table lookup a byte.
      while (q < end && !kStructural[static_cast<unsigned char>(*q)]) ++q;
      if (q >= end) break;
      char d = *q;
      if (d == '"') {
        q = StringEnd(q + 1, end);
        if (q == nullptr) break;
        continue;
      }
      if (d == '{' || d == '[') {
        ++depth;
      } else if (d == '}' || d == ']') {
        if (--depth == 0) {
          *value_end = q + 1;
          return ScanResult::kOk;
        }
        if (depth < 0) return ScanResult::kInvalid;
      }
      ++q;
    }
    return at_eof ? ScanResult::kInvalid : ScanResult::kIncomplete;
  }
  if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
    const char* q = p;
    while (q < end && !IsScalarEnd(*q)) ++q;
    if (q == end && !at_eof) return ScanResult::kIncomplete;
    *value_end = q;
    return ScanResult::kOk;
  }
  return ScanResult::kInvalid;
}

bool DecodeString(std::string_view text, std::string* out) {
  out->clear();
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') return false;
  const char* p = text.data() + 1;
  const char* end = text.data() + text.size() - 1;
  out->reserve(static_cast<size_t>(end - p));
  while (p < end) {
    char c = *p++;
    if (c != '\\') {
      out->push_back(c);
      continue;
    }
    if (p >= end) return false;
    char e = *p++;
    switch (e) {
      case '"':
        out->push_back('"');
        break;
      case '\\':
        out->push_back('\\');
        break;
      case '/':
        out->push_back('/');
        break;
      case 'b':
        out->push_back('\b');
        break;
      case 'f':
        out->push_back('\f');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 'r':
        out->push_back('\r');
        break;
      case 't':
        out->push_back('\t');
        break;
      case 'u': {
        uint32_t cp;
        if (!Hex4(p, end, &cp)) return false;
        p += 4;
        if (cp >= 0xD800 && cp < 0xDC00) {
          uint32_t lo;
          if (end - p >= 6 && p[0] == '\\' && p[1] == 'u' && Hex4(p + 2, end, &lo) &&
              lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
          } else {
            cp = 0xFFFD;  // a lone surrogate: keep going with the replacement character
          }
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          cp = 0xFFFD;
        }
        AppendUtf8(cp, out);
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

bool ParseInt64(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  size_t i = 0;
  bool neg = false;
  if (text[0] == '-') {
    neg = true;
    i = 1;
  }
  if (i >= text.size()) return false;
  uint64_t v = 0;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c < '0' || c > '9') return false;
    if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - 9) / 10) return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

bool ParseLooseInt64(std::string_view text, int64_t* out) {
  std::string_view body;
  if (RawStringBody(text, &body)) text = body;
  if (ParseInt64(text, out)) return true;
  double d;
  if (!ParseDouble(text, &d)) return false;
  if (d != std::floor(d) || std::fabs(d) > 9.0e18) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

bool ParseScaledDecimal(std::string_view text, int digits, int64_t* out) {
  std::string_view body;
  if (RawStringBody(text, &body)) text = body;  // some writers quote numbers
  if (text.empty() || digits < 0 || digits > 9) return false;
  int64_t scale = 1;
  for (int k = 0; k < digits; ++k) scale *= 10;
  size_t i = 0;
  bool neg = false;
  if (text[0] == '-') {
    neg = true;
    ++i;
  }
  const uint64_t limit =
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(scale);
  uint64_t whole = 0;
  size_t n_digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++n_digits) {
    whole = whole * 10 + static_cast<uint64_t>(text[i] - '0');
    if (whole > limit) return false;
  }
  uint64_t frac = 0;
  bool round_up = false;
  int frac_digits = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++frac_digits) {
      if (frac_digits < digits) {
        frac = frac * 10 + static_cast<uint64_t>(text[i] - '0');
      } else if (frac_digits == digits) {
        round_up = text[i] >= '5';
      }
    }
    if (frac_digits == 0) return false;
    for (int k = frac_digits; k < digits; ++k) frac *= 10;
  }
  if (n_digits == 0) return false;
  if (i < text.size()) {
    if (text[i] != 'e' && text[i] != 'E') return false;
    // Exponent notation is rare in traces: go through long double (64-bit mantissa) and
    // round to the unit.
    std::string copy(text);
    char* endp = nullptr;
    long double v = std::strtold(copy.c_str(), &endp);
    if (endp != copy.c_str() + copy.size() || !std::isfinite(static_cast<double>(v))) {
      return false;
    }
    long double n = std::round(v * static_cast<long double>(scale));
    if (std::fabs(static_cast<double>(n)) > 9.2e18) return false;
    *out = static_cast<int64_t>(n);
    return true;
  }
  uint64_t total = whole * static_cast<uint64_t>(scale) + frac + (round_up ? 1 : 0);
  if (total > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = neg ? -static_cast<int64_t>(total) : static_cast<int64_t>(total);
  return true;
}

bool ParseMicrosToNs(std::string_view text, int64_t* ns) { return ParseScaledDecimal(text, 3, ns); }

bool ParseDouble(std::string_view text, double* out) {
  if (text.empty() || text.size() > 64) return false;
  char buf[65];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  char* endp = nullptr;
  double v = std::strtod(buf, &endp);
  if (endp != buf + text.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

void MergeObjectMembers(std::string_view base, std::string_view extra, std::string* out) {
  out->clear();
  out->push_back('{');
  std::unordered_set<std::string_view> keys;  // base's keys: one lookup per extra member
  auto add = [&](std::string_view text, bool check) {
    if (text.empty() || text.front() != '{') return;
    ObjectReader r(text);
    std::string_view k, v;
    while (r.Next(&k, &v)) {
      if (check && keys.count(k)) continue;
      if (!check) keys.insert(k);
      if (out->size() > 1) out->push_back(',');
      out->push_back('"');
      out->append(k);
      out->append("\":");
      out->append(v);
    }
  };
  add(base, false);
  add(extra, true);
  out->push_back('}');
}

std::string DecodeKey(std::string_view raw) {
  if (raw.find('\\') == std::string_view::npos) return std::string(raw);
  std::string quoted;
  quoted.reserve(raw.size() + 2);
  quoted.push_back('"');
  quoted.append(raw);
  quoted.push_back('"');
  std::string out;
  if (!DecodeString(quoted, &out)) return std::string(raw);
  return out;
}

void AppendMinified(std::string_view text, std::string* out) {
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    char c = *p;
    if (c == '"') {
      const char* e = StringEnd(p + 1, end);
      if (e == nullptr) e = end;
      out->append(p, static_cast<size_t>(e - p));
      p = e;
      continue;
    }
    if (!IsWs(c)) out->push_back(c);
    ++p;
  }
}

ObjectReader::ObjectReader(std::string_view text)
    : p_(text.data()), end_(text.data() + text.size()) {
  p_ = SkipWs(p_, end_);
  if (p_ >= end_ || *p_ != '{') {
    ok_ = false;
    done_ = true;
    return;
  }
  ++p_;
}

bool ObjectReader::Next(std::string_view* key, std::string_view* value) {
  if (done_) return false;
  p_ = SkipWs(p_, end_);
  if (p_ >= end_) {
    ok_ = false;
    done_ = true;
    return false;
  }
  if (*p_ == '}') {
    done_ = true;
    return false;
  }
  if (!first_) {
    if (*p_ != ',') {
      ok_ = false;
      done_ = true;
      return false;
    }
    p_ = SkipWs(p_ + 1, end_);
  }
  first_ = false;
  if (p_ >= end_ || *p_ != '"') {
    ok_ = false;
    done_ = true;
    return false;
  }
  const char* key_end = StringEnd(p_ + 1, end_);
  if (key_end == nullptr) {
    ok_ = false;
    done_ = true;
    return false;
  }
  *key = std::string_view(p_ + 1, static_cast<size_t>(key_end - p_ - 2));
  p_ = SkipWs(key_end, end_);
  if (p_ >= end_ || *p_ != ':') {
    ok_ = false;
    done_ = true;
    return false;
  }
  p_ = SkipWs(p_ + 1, end_);
  const char* v_end = nullptr;
  if (FindValueEnd(p_, end_, true, &v_end) != ScanResult::kOk) {
    ok_ = false;
    done_ = true;
    return false;
  }
  *value = std::string_view(p_, static_cast<size_t>(v_end - p_));
  p_ = v_end;
  return true;
}

ArrayReader::ArrayReader(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {
  p_ = SkipWs(p_, end_);
  if (p_ >= end_ || *p_ != '[') {
    ok_ = false;
    done_ = true;
    return;
  }
  ++p_;
}

bool ArrayReader::Next(std::string_view* value) {
  if (done_) return false;
  p_ = SkipWs(p_, end_);
  if (p_ >= end_) {
    ok_ = false;
    done_ = true;
    return false;
  }
  if (*p_ == ']') {
    done_ = true;
    return false;
  }
  if (!first_) {
    if (*p_ != ',') {
      ok_ = false;
      done_ = true;
      return false;
    }
    p_ = SkipWs(p_ + 1, end_);
  }
  first_ = false;
  const char* v_end = nullptr;
  if (FindValueEnd(p_, end_, true, &v_end) != ScanResult::kOk) {
    ok_ = false;
    done_ = true;
    return false;
  }
  *value = std::string_view(p_, static_cast<size_t>(v_end - p_));
  p_ = v_end;
  return true;
}

}  // namespace trainprof::importers::json
