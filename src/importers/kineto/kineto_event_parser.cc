#include "importers/kineto/kineto_event_parser.h"

#include "importers/common/json_text.h"

namespace trainprof::importers::kineto {

bool ParseRawEvent(std::string_view text, RawEvent* out, std::string* name_scratch) {
  *out = RawEvent{};
  json::ObjectReader r(text);
  std::string_view k, v;
  while (r.Next(&k, &v)) {
    if (k.empty()) continue;
    switch (k[0]) {
      case 'p':
        if (k == "ph") {
          std::string_view body;
          if (json::RawStringBody(v, &body) && body.size() == 1)
            out->ph = body[0];
          else
            return false;
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
        if (k == "cat") {
          if (!json::RawStringBody(v, &out->cat)) out->cat = std::string_view("?");
        }
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
  }
  return r.ok() && out->ph != 0;
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
