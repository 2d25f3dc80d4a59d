// libFuzzer target: the JSON scanning helpers every importer relies on.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "importers/common/json_minify.h"
#include "importers/common/json_text.h"
#include "importers/kineto/kineto_event_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace json = trainprof::importers::json;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  int64_t v;
  double d;
  (void)json::ParseMicrosToNs(text, &v);
  (void)json::ParseScaledDecimal(text, 9, &v);
  (void)json::ParseLooseInt64(text, &v);
  (void)json::ParseDouble(text, &d);
  std::string s;
  (void)json::DecodeString(text, &s);
  s.clear();
  json::AppendMinified(text, &s);
  const char* end = nullptr;
  if (!text.empty()) {
    (void)json::FindValueEnd(text.data(), text.data() + text.size(), true, &end);
    (void)json::FindValueEnd(text.data(), text.data() + text.size(), false, &end);
  }
  // The minifier (its 64-byte path where the CPU has one) against its scalar loop and against
  // FindValueEnd + AppendMinified: the same answer, end and bytes for any text after a bracket.
  if (!text.empty() && (text[0] == '{' || text[0] == '[')) {
    const char* const b = text.data();
    const char* const e = b + text.size();
    std::string fast, slow;
    const char *fast_end = nullptr, *slow_end = nullptr, *oracle_end = nullptr;
    const bool f = json::MinifyValue(b, e, &fast, &fast_end);
    const bool g = json::MinifyValueScalar(b, e, &slow, &slow_end);
    const bool o = json::FindValueEnd(b, e, false, &oracle_end) == json::ScanResult::kOk;
    if (f != g || f != o) std::abort();
    if (f) {
      std::string oracle;
      json::AppendMinified(std::string_view(b, static_cast<size_t>(oracle_end - b)), &oracle);
      if (fast_end != oracle_end || slow_end != oracle_end || fast != oracle || slow != oracle) {
        std::abort();
      }
    }
  }
  json::ObjectReader r(text);
  std::string_view k, val;
  while (r.Next(&k, &val)) {
  }
  json::ArrayReader a(text);
  while (a.Next(&val)) {
  }
  trainprof::importers::kineto::RawEvent e;
  std::string scratch;
  (void)trainprof::importers::kineto::ParseRawEvent(text, &e, &scratch);
  (void)trainprof::importers::kineto::ParseTrackId(text);
  return 0;
}
