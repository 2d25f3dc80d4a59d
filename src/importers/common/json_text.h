#pragma once
// Small, allocation-free JSON scanning over text spans, for importers that stream large
// traces: finding where a value ends (to cut a big array into elements), walking the members of
// one object, decoding strings and numbers. Numbers that are timestamps are converted from their
// TEXT into integer nanoseconds (never through double, which loses nanoseconds beyond 2^53).
// Threads: pure functions.

#include <cstdint>
#include <string>
#include <string_view>

namespace trainprof::importers::json {

enum class ScanResult {
  kOk,
  kIncomplete,  // the text ends inside the value: read more and try again
  kInvalid,     // not JSON
};

inline bool IsWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

inline const char* SkipWs(const char* p, const char* end) {
  while (p < end && IsWs(*p)) ++p;
  return p;
}

// One past the closing quote of the string whose opening quote is at p[-1], or null when the
// text ends first.
const char* StringEnd(const char* p, const char* end);

// A byte that ends a number or literal.
inline bool IsScalarEnd(char c) { return c == ',' || c == '}' || c == ']' || IsWs(c); }

// `p` points at the first character of a value. On kOk, *value_end is one past its last
// character. A number or literal that touches `end` is kIncomplete unless `at_eof`.
ScanResult FindValueEnd(const char* p, const char* end, bool at_eof, const char** value_end);

// Decodes the JSON string starting at `p` (which points at the opening quote) into `out`.
// Returns false if it is not a valid string.
bool DecodeString(std::string_view text, std::string* out);

// A string's text without quotes when it has no escapes (the common case); false otherwise.
inline bool RawStringBody(std::string_view text, std::string_view* body) {
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') return false;
  std::string_view inner = text.substr(1, text.size() - 2);
  if (inner.find('\\') != std::string_view::npos) return false;
  *body = inner;
  return true;
}

// An integer in decimal text ("42", "-7"); false for anything else (fractions, exponents,
// overflow, quotes).
bool ParseInt64(std::string_view text, int64_t* out);

// An integer that may also be given as a string ("42") or a float with zero fraction.
bool ParseLooseInt64(std::string_view text, int64_t* out);

// A quantity in microseconds as decimal text ("1623142623529248", "2413669096090.100",
// "1.5e3") into nanoseconds. Digits beyond the nanosecond are rounded half away from zero.
// False for non-numbers and overflow.
bool ParseMicrosToNs(std::string_view text, int64_t* ns);

// A trace's timestamp plus its file's base, in epoch nanoseconds. False when the sum leaves
// +-kMaxAbsTimestampNs (about the year 2116 either side of 1970): then an event's end (a
// duration of at most 30 days added) and the difference of any two such times fit an int64.
inline constexpr int64_t kMaxAbsTimestampNs = INT64_MAX / 2;
inline bool OffsetTimestampNs(int64_t ts_ns, int64_t base_ns, int64_t* out) {
  int64_t sum;
  if (__builtin_add_overflow(ts_ns, base_ns, &sum)) return false;
  if (sum > kMaxAbsTimestampNs || sum < -kMaxAbsTimestampNs) return false;
  *out = sum;
  return true;
}

// Decimal text times 10^digits as an integer, exactly (digits <= 9): seconds with digits 9
// give nanoseconds. Beyond `digits` decimals it rounds half away from zero.
bool ParseScaledDecimal(std::string_view text, int digits, int64_t* out);

// A finite double from number text; false otherwise.
bool ParseDouble(std::string_view text, double* out);

// Appends `text` without whitespace outside strings (keeps stored args compact).
void AppendMinified(std::string_view text, std::string* out);

// `base`'s members, then those of `extra` whose keys `base` lacks, as one minified object in
// *out (both minified objects; an empty or non-object side counts as no members). What a
// begin/end pair's args become: Horovod writes dtype and shape on the end event.
void MergeObjectMembers(std::string_view base, std::string_view extra, std::string* out);

// A key as ObjectReader gives it (its raw body), decoded: "dev\u00e9" -> "devé".
std::string DecodeKey(std::string_view raw);

// Walks the members of one JSON object given as complete text.
// Usage: ObjectReader r(text); std::string_view k, v; while (r.Next(&k, &v)) {...}
// if (!r.ok()) error. Keys come back as their raw body (escapes left in place, rare in keys);
// values as their raw text.
class ObjectReader {
 public:
  explicit ObjectReader(std::string_view text);
  bool Next(std::string_view* key, std::string_view* value);
  bool ok() const { return ok_; }

 private:
  const char* p_;
  const char* end_;
  bool ok_ = true;
  bool first_ = true;
  bool done_ = false;
};

// Same for the elements of an array given as complete text.
class ArrayReader {
 public:
  explicit ArrayReader(std::string_view text);
  bool Next(std::string_view* value);
  bool ok() const { return ok_; }

 private:
  const char* p_;
  const char* end_;
  bool ok_ = true;
  bool first_ = true;
  bool done_ = false;
};

}  // namespace trainprof::importers::json
