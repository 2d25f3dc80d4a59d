#include "importers/smdebug/python_stats_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace trainprof::importers::smdebug {
namespace {

constexpr int kMaxDepth = 8;  // a pstats dump nests 4 deep
constexpr size_t kMaxObjects = 16u << 20;
constexpr uint8_t kFlagRef = 0x80;

enum class Kind { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kSet };

// One decoded object; containers hold arena indices (dicts: key, value, key, value, ...).
struct Obj {
  Kind kind = Kind::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<uint32_t> items;
};

class MarshalReader {
 public:
  explicit MarshalReader(std::string_view b) : b_(b) {}

  StatusOr<uint32_t> Read(int depth) {
    if (depth > kMaxDepth) return Error("nesting deeper than " + std::to_string(kMaxDepth));
    if (arena_.size() >= kMaxObjects) return Error("more than 16 M objects");
    const size_t at = pos_;
    if (pos_ >= b_.size()) return Error("truncated (ends where an object should start)");
    const uint8_t code = static_cast<uint8_t>(b_[pos_++]);
    const bool ref = (code & kFlagRef) != 0;
    const char type = static_cast<char>(code & ~kFlagRef);
    if (type == 'r') {
      int64_t idx;
      if (!Int32(&idx)) return Error("truncated reference");
      if (idx < 0 || static_cast<size_t>(idx) >= refs_.size()) {
        return Error("reference " + std::to_string(idx) + " to an object not read yet", at);
      }
      return refs_[static_cast<size_t>(idx)];
    }
    const uint32_t id = static_cast<uint32_t>(arena_.size());
    arena_.emplace_back();
    if (ref) refs_.push_back(id);  // before the children, as CPython numbers them
    switch (type) {
      case 'N':
        return id;
      case 'F':
      case 'T':
        arena_[id].kind = Kind::kBool;
        arena_[id].i = type == 'T';
        return id;
      case 'i': {
        int64_t v;
        if (!Int32(&v)) return Error("truncated int");
        arena_[id].kind = Kind::kInt;
        arena_[id].i = v;
        return id;
      }
      case 'l':
        return Long(id);
      case 'g': {
        if (b_.size() - pos_ < 8) return Error("truncated float");
        uint64_t bits = 0;
        for (int k = 7; k >= 0; --k) bits = (bits << 8) | static_cast<uint8_t>(b_[pos_ + k]);
        pos_ += 8;
        double d;
        std::memcpy(&d, &bits, sizeof d);
        arena_[id].kind = Kind::kFloat;
        arena_[id].f = d;
        return id;
      }
      case 'f': {  // marshal version 0/1: the float's repr, length in one byte
        if (pos_ >= b_.size()) return Error("truncated float");
        const size_t n = static_cast<uint8_t>(b_[pos_++]);
        if (b_.size() - pos_ < n) return Error("truncated float");
        std::string text(b_.substr(pos_, n));
        pos_ += n;
        char* end = nullptr;
        double d = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size()) return Error("float text is not a number", at);
        arena_[id].kind = Kind::kFloat;
        arena_[id].f = d;
        return id;
      }
      case 'z':
      case 'Z':
        return Str(id, /*short_length=*/true);
      case 's':
      case 't':
      case 'u':
      case 'a':
      case 'A':
        return Str(id, /*short_length=*/false);
      case ')':
      case '(':
      case '[':
      case '<':
      case '>': {
        int64_t n;
        if (type == ')') {
          if (pos_ >= b_.size()) return Error("truncated tuple");
          n = static_cast<uint8_t>(b_[pos_++]);
        } else if (!Int32(&n)) {
          return Error("truncated container length");
        }
        // Every element takes at least one byte: a larger count is corrupt, not a big dump.
        if (n < 0 || static_cast<size_t>(n) > b_.size() - pos_) {
          return Error("container length " + std::to_string(n) + " beyond the file's end", at);
        }
        arena_[id].kind = type == '['                    ? Kind::kList
                          : (type == '<' || type == '>') ? Kind::kSet
                                                         : Kind::kTuple;
        std::vector<uint32_t> items;
        items.reserve(static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) {
          TP_ASSIGN_OR_RETURN(uint32_t item, Read(depth + 1));
          items.push_back(item);
        }
        arena_[id].items = std::move(items);
        return id;
      }
      case '{': {
        arena_[id].kind = Kind::kDict;
        std::vector<uint32_t> items;
        for (;;) {
          if (pos_ >= b_.size()) return Error("truncated dict (no end marker)");
          if (b_[pos_] == '0') {
            ++pos_;
            break;
          }
          TP_ASSIGN_OR_RETURN(uint32_t key, Read(depth + 1));
          TP_ASSIGN_OR_RETURN(uint32_t value, Read(depth + 1));
          items.push_back(key);
          items.push_back(value);
        }
        arena_[id].items = std::move(items);
        return id;
      }
      default:
        return Error(std::string("marshal type '") +
                         (type >= 0x20 && type < 0x7f ? std::string(1, type)
                                                      : "\\x" + Hex(static_cast<uint8_t>(type))) +
                         "' is not part of a pstats dump",
                     at);
    }
  }

  const Obj& at(uint32_t id) const { return arena_[id]; }
  size_t pos() const { return pos_; }

 private:
  static std::string Hex(uint8_t v) {
    const char* d = "0123456789abcdef";
    return {d[v >> 4], d[v & 15]};
  }

  Status Error(const std::string& what, size_t at = SIZE_MAX) const {
    return InvalidArgument("python_stats: " + what + " at byte " +
                           std::to_string(at == SIZE_MAX ? pos_ : at));
  }

  bool Int32(int64_t* out) {
    if (b_.size() - pos_ < 4) return false;
    uint32_t v = 0;
    for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<uint8_t>(b_[pos_ + k]);
    pos_ += 4;
    *out = static_cast<int32_t>(v);
    return true;
  }

  StatusOr<uint32_t> Long(uint32_t id) {
    const size_t at = pos_ - 1;
    int64_t n;
    if (!Int32(&n)) return Error("truncated long");
    const int64_t digits = n < 0 ? -n : n;
    if (digits > 4) return Error("integer wider than 60 bits", at);  // counts never are
    if (b_.size() - pos_ < static_cast<size_t>(2 * digits)) return Error("truncated long");
    int64_t v = 0;
    for (int64_t k = digits - 1; k >= 0; --k) {
      const size_t p = pos_ + static_cast<size_t>(2 * k);
      const int d = static_cast<uint8_t>(b_[p]) | (static_cast<uint8_t>(b_[p + 1]) << 8);
      if (d >= (1 << 15)) return Error("long digit out of range", at);
      v = (v << 15) | d;
    }
    pos_ += static_cast<size_t>(2 * digits);
    arena_[id].kind = Kind::kInt;
    arena_[id].i = n < 0 ? -v : v;
    return id;
  }

  StatusOr<uint32_t> Str(uint32_t id, bool short_length) {
    int64_t n;
    if (short_length) {
      if (pos_ >= b_.size()) return Error("truncated string");
      n = static_cast<uint8_t>(b_[pos_++]);
    } else if (!Int32(&n)) {
      return Error("truncated string length");
    }
    if (n < 0 || static_cast<size_t>(n) > b_.size() - pos_) {
      return Error("string length " + std::to_string(n) + " beyond the file's end");
    }
    arena_[id].kind = Kind::kString;
    arena_[id].s.assign(b_.substr(pos_, static_cast<size_t>(n)));
    pos_ += static_cast<size_t>(n);
    return id;
  }

  std::string_view b_;
  size_t pos_ = 0;
  std::vector<Obj> arena_;
  std::vector<uint32_t> refs_;
};

bool AsInt(const Obj& o, int64_t* out) {
  if (o.kind != Kind::kInt && o.kind != Kind::kBool) return false;
  *out = o.i;
  return true;
}

// Seconds that become int64 nanoseconds downstream: a value whose nanoseconds would not fit
// (about 292 years) is not a time a profiler measured, and is refused rather than cast.
constexpr double kMaxSeconds = 9.0e9;

bool AsSeconds(const Obj& o, double* out) {
  double v;
  if (o.kind == Kind::kFloat) {
    v = o.f;
  } else if (o.kind == Kind::kInt) {
    v = static_cast<double>(o.i);
  } else {
    return false;
  }
  if (!std::isfinite(v) || std::fabs(v) > kMaxSeconds) return false;
  *out = v;
  return true;
}

}  // namespace

StatusOr<std::vector<PythonFunctionStats>> DecodePythonStats(std::string_view bytes) {
  MarshalReader r(bytes);
  TP_ASSIGN_OR_RETURN(uint32_t top, r.Read(0));
  if (r.pos() != bytes.size()) {
    return InvalidArgument("python_stats: " + std::to_string(bytes.size() - r.pos()) +
                           " bytes after the statistics dict");
  }
  const Obj& dict = r.at(top);
  if (dict.kind != Kind::kDict) {
    return InvalidArgument("python_stats: the dump is not a dict (not a pstats file?)");
  }
  std::vector<PythonFunctionStats> out;
  out.reserve(dict.items.size() / 2);
  for (size_t k = 0; k + 1 < dict.items.size(); k += 2) {
    const Obj& key = r.at(dict.items[k]);
    const Obj& value = r.at(dict.items[k + 1]);
    const std::string which = "python_stats: entry " + std::to_string(k / 2) + ": ";
    PythonFunctionStats f;
    if (key.kind != Kind::kTuple || key.items.size() != 3 ||
        r.at(key.items[0]).kind != Kind::kString || !AsInt(r.at(key.items[1]), &f.line) ||
        r.at(key.items[2]).kind != Kind::kString) {
      return InvalidArgument(which + "key is not (file, line, function)");
    }
    f.file = r.at(key.items[0]).s;
    f.function = r.at(key.items[2]).s;
    if (value.kind != Kind::kTuple || value.items.size() < 4 ||
        !AsInt(r.at(value.items[0]), &f.primitive_calls) ||
        !AsInt(r.at(value.items[1]), &f.calls) || !AsSeconds(r.at(value.items[2]), &f.total_s) ||
        !AsSeconds(r.at(value.items[3]), &f.cumulative_s)) {
      return InvalidArgument(which + "value is not (calls, calls, seconds, seconds, callers)");
    }
    if (value.items.size() >= 5 && r.at(value.items[4]).kind == Kind::kDict) {
      const Obj& callers = r.at(value.items[4]);
      f.callers = static_cast<int64_t>(callers.items.size() / 2);
      for (size_t c = 0; c + 1 < callers.items.size(); c += 2) {
        const Obj& ck = r.at(callers.items[c]);
        const Obj& cv = r.at(callers.items[c + 1]);
        PythonCallerStats e;
        if (ck.kind != Kind::kTuple || ck.items.size() != 3 ||
            r.at(ck.items[0]).kind != Kind::kString || !AsInt(r.at(ck.items[1]), &e.line) ||
            r.at(ck.items[2]).kind != Kind::kString) {
          return InvalidArgument(which + "caller " + std::to_string(c / 2) +
                                 ": key is not (file, line, function)");
        }
        e.file = r.at(ck.items[0]).s;
        e.function = r.at(ck.items[2]).s;
        if (cv.kind == Kind::kTuple && cv.items.size() >= 4) {
          // (calls, primitive calls, ...): the reverse of the function's own tuple, as
          // cProfile writes an edge and pstats' print_callers reads it.
          if (!AsInt(r.at(cv.items[0]), &e.calls) ||
              !AsInt(r.at(cv.items[1]), &e.primitive_calls) ||
              !AsSeconds(r.at(cv.items[2]), &e.total_s) ||
              !AsSeconds(r.at(cv.items[3]), &e.cumulative_s)) {
            return InvalidArgument(which + "caller " + std::to_string(c / 2) +
                                   ": value is not (calls, calls, seconds, seconds)");
          }
        } else if (AsInt(cv, &e.calls)) {  // the pure-Python `profile` module: a count only
          e.primitive_calls = e.calls;
        } else {
          return InvalidArgument(which + "caller " + std::to_string(c / 2) +
                                 ": value is neither (calls, calls, seconds, seconds) nor a count");
        }
        f.called_by.push_back(std::move(e));
      }
      // As _detail.py: int(seconds * 1e9) decides the order, so both sides sort alike.
      auto order_ns = [](const PythonCallerStats& e) {
        return static_cast<int64_t>(e.cumulative_s * 1e9);
      };
      std::sort(f.called_by.begin(), f.called_by.end(),
                [&](const PythonCallerStats& a, const PythonCallerStats& b) {
                  if (order_ns(a) != order_ns(b)) return order_ns(a) > order_ns(b);
                  if (a.calls != b.calls) return a.calls > b.calls;
                  if (a.file != b.file) return a.file < b.file;
                  if (a.line != b.line) return a.line < b.line;
                  return a.function < b.function;
                });
      if (f.called_by.size() > kMaxPythonCallers) f.called_by.resize(kMaxPythonCallers);
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace trainprof::importers::smdebug
