#include "importers/kineto/kineto_event_parser.h"

#include <array>

#include "importers/common/json_minify.h"
#include "importers/common/json_text.h"

namespace trainprof::importers::kineto {

namespace {

// One member of an event into *out (values stay views); false when it makes the event
// invalid. Shared by both paths, so that they read members alike.
[[gnu::always_inline]] inline bool TakeMember(std::string_view k, std::string_view v, RawEvent* out,
                                              std::string* name_scratch) {
  if (k.empty()) return true;
  switch (k[0]) {
    case 'p':
      if (k == "ph") {
        std::string_view body;
        if (!json::RawStringBody(v, &body) || body.size() != 1) return false;
        out->ph = body[0];
      } else if (k == "pid") {
        out->pid = v;
      }
      break;
    case 'n':
      if (k == "name") {
        if (!json::RawStringBody(v, &out->name)) {
          if (!json::DecodeString(v, name_scratch)) return false;
          out->name = *name_scratch;
        }
        out->has_name = true;
      }
      break;
    case 'c':
      if (k == "cat" && !json::RawStringBody(v, &out->cat)) out->cat = std::string_view("?");
      break;
    case 't':
      if (k == "ts")
        out->ts = v;
      else if (k == "tid")
        out->tid = v;
      break;
    case 'd':
      if (k == "dur") out->dur = v;
      break;
    case 'a':
      if (k == "args") out->args = v;
      break;
    case 'i':
      if (k == "id") out->id = v;
      break;
    case 's':
      if (k == "s") json::RawStringBody(v, &out->s);
      break;
    case 'b':
      if (k == "bp") json::RawStringBody(v, &out->bp);
      break;
    default:
      break;
  }
  return true;
}

}  // namespace

bool ParseRawEvent(std::string_view text, RawEvent* out, std::string* name_scratch) {
  *out = RawEvent{};
  json::ObjectReader r(text);
  std::string_view k, v;
  while (r.Next(&k, &v)) {
    if (!TakeMember(k, v, out, name_scratch)) return false;
  }
  return r.ok() && out->ph != 0;
}

namespace {

// json::IsScalarEnd as a table: a number's digits (a timestamp has 17) cost a lookup each.
constexpr auto kScalarEnd = [] {
  std::array<bool, 256> t{};
  for (unsigned char c : {',', '}', ']', ' ', '\n', '\r', '\t'}) t[c] = true;
  return t;
}();

// *out = RawEvent{} member by member: 184 bytes, which the compiler clears with `rep stos`,
// slow to start, once per event otherwise.
void Clear(RawEvent* out) {
  out->ph = 0;
  out->has_name = false;
  out->text_end = 0;
  for (std::string_view* v : {&out->name, &out->cat, &out->args, &out->s, &out->bp, &out->pid,
                              &out->tid, &out->ts, &out->dur, &out->id}) {
    *v = std::string_view();
  }
}

}  // namespace

InPlace ParseEventInPlace(const char* p, const char* end, RawEvent* out, std::string* name_scratch,
                          std::string* args, const char** event_end) {
  Clear(out);
  if (p >= end || *p != '{') return InPlace::kInvalid;
  const size_t args_from = args->size();  // the args go after what *args holds already
  const char* q = p + 1;
  while (true) {
    q = json::SkipWs(q, end);
    if (q >= end) return InPlace::kIncomplete;
    if (*q != '"') return InPlace::kInvalid;  // includes "{}": no ph, ParseRawEvent decides
    const char* ks = q + 1;
    const char* ke = ks;
    while (ke < end && *ke != '"' && *ke != '\\') ++ke;
    if (ke >= end) return InPlace::kIncomplete;
    if (*ke == '\\') return InPlace::kInvalid;
    const std::string_view k(ks, static_cast<size_t>(ke - ks));
    q = json::SkipWs(ke + 1, end);
    if (q >= end) return InPlace::kIncomplete;
    if (*q != ':') return InPlace::kInvalid;
    q = json::SkipWs(q + 1, end);
    if (q >= end) return InPlace::kIncomplete;
    const char c = *q;
    const char* ve = nullptr;
    if (c == '"') {
      ve = json::StringEnd(q + 1, end);
      if (ve == nullptr) return InPlace::kIncomplete;
    } else if (c == '{' || c == '[') {
      if (k == "args") {
        args->resize(args_from);  // a repeated "args": the last one counts
        if (!json::MinifyValue(q, end, args, &ve)) return InPlace::kIncomplete;
      } else {
        json::ScanResult r = json::FindValueEnd(q, end, false, &ve);
        if (r == json::ScanResult::kIncomplete) return InPlace::kIncomplete;
        if (r != json::ScanResult::kOk) return InPlace::kInvalid;
      }
    } else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
      ve = q + 1;
      while (ve < end && !kScalarEnd[static_cast<unsigned char>(*ve)]) ++ve;
      if (ve >= end) return InPlace::kIncomplete;
    } else {
      return InPlace::kInvalid;
    }
    const std::string_view v(q, static_cast<size_t>(ve - q));
    if (!TakeMember(k, v, out, name_scratch)) return InPlace::kInvalid;
    if (k == "args") {
      if (c != '{' && c != '[') {  // a scalar is its own minified form
        args->resize(args_from);
        args->append(v);
      }
      out->args = std::string_view(*args).substr(args_from);
    }
    q = json::SkipWs(ve, end);
    if (q >= end) return InPlace::kIncomplete;
    if (*q == ',') {
      ++q;
      continue;
    }
    if (*q != '}') return InPlace::kInvalid;
    *event_end = q + 1;
    return out->ph != 0 ? InPlace::kOk : InPlace::kInvalid;
  }
}

int64_t ParseTrackId(std::string_view text) {
  if (text.empty()) return model::kMissing;
  int64_t v;
  if (json::ParseInt64(text, &v)) return v;
  std::string_view body;
  if (!json::RawStringBody(text, &body)) return model::kMissing;
  if (json::ParseInt64(body, &v)) return v;
  constexpr std::string_view kStream = "stream ";
  if (body.substr(0, kStream.size()) == kStream) {
    std::string_view rest = body.substr(kStream.size());
    size_t n = 0;
    while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
    if (n > 0 && json::ParseInt64(rest.substr(0, n), &v)) return v;
  }
  return model::kMissing;
}

std::string_view NormalizeCategory(std::string_view cat) {
  if (cat.empty()) return cat;
  switch (cat[0]) {
    case 'O':
      if (cat == "Operator") return "cpu_op";
      break;
    case 'R':
      if (cat == "Runtime") return "cuda_runtime";
      break;
    case 'K':
      if (cat == "Kernel") return "kernel";
      break;
    case 'M':
      if (cat == "Memcpy") return "gpu_memcpy";
      if (cat == "Memset") return "gpu_memset";
      break;
    case 'P':
      if (cat == "Python") return "python_function";
      break;
    default:
      break;
  }
  return cat;
}

bool IsLaunchFlowCategory(std::string_view cat) {
  return cat == "ac2g" || cat == "async" || cat == "async_cpu_to_gpu" || cat == "async_gpu";
}

bool ParseProfilerStep(std::string_view name, int64_t* step) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (name.size() <= kPrefix.size() || name.substr(0, kPrefix.size()) != kPrefix) return false;
  return json::ParseInt64(name.substr(kPrefix.size()), step) && *step >= 0;
}

}  // namespace trainprof::importers::kineto
