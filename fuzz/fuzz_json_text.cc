// libFuzzer target: the JSON scanning helpers every importer relies on.
#include <cstdint>
#include <string>
#include <string_view>

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
