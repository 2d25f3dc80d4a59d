#pragma once
// The tokenizer half of the Kineto importer: one traceEvents element (a JSON object as text)
// into its raw fields, without allocating. Meaning (categories, ranks, steps) is the
// importer's job (kineto_importer.cc).
// Threads: pure functions.

#include <cstdint>
#include <string>
#include <string_view>

#include "model/event.h"

namespace trainprof::importers::kineto {

// Raw members of one trace event. Views point into the event text (or `scratch` for names with
// escapes) and are valid while both live.
struct RawEvent {
  char ph = 0;
  std::string_view name, cat, args, s, bp;
  std::string_view pid, tid, ts, dur, id;
  bool has_name = false;
  // Where the element ends in the trace's text (bytes from its start; the parsers leave it 0,
  // the importer's sinks set it from TraceSink::element_offset): how far into the file the
  // importer is, which decides where it cuts its store batches.
  int64_t text_end = 0;
};

// False when the text is not an object or a member is malformed.
bool ParseRawEvent(std::string_view text, RawEvent* out, std::string* name_scratch);

enum class InPlace {
  kOk,          // *event_end is one past the object's closing brace
  kIncomplete,  // the text ends inside the object: read more and try again
  kInvalid,     // not an event this fast path takes: cut the element out and use ParseRawEvent
};

// The import's fast path: parses the event object that starts at p[0] in the same pass that
// finds its end, and appends its args minified to *args (out->args views the appended bytes,
// valid until *args next grows; on kIncomplete / kInvalid *args may hold a partial tail that the
// caller drops). For every
// element it accepts the result is what ParseRawEvent plus json::AppendMinified of the args
// give; anything unusual (escaped keys, no "ph", malformed members) is left to them.
InPlace ParseEventInPlace(const char* p, const char* end, RawEvent* out, std::string* name_scratch,
                          std::string* args, const char** event_end);

// pid / tid as Kineto writes them: a number, a numeric string, "stream 7" (older GPU rows) or
// a label ("Traces", "") which has no number: model::kMissing.
int64_t ParseTrackId(std::string_view text);

// Categories of every format generation mapped to today's Kineto names: Operator -> cpu_op,
// Runtime -> cuda_runtime, Kernel -> kernel, Memcpy -> gpu_memcpy, Memset -> gpu_memset,
// Python -> python_function; others unchanged.
std::string_view NormalizeCategory(std::string_view cat);

// Flow categories linking a CPU launch to its GPU activity: ac2g (2022+), async
// (2021, name "launch"), async_cpu_to_gpu / async_gpu (2022).
bool IsLaunchFlowCategory(std::string_view cat);

// "ProfilerStep#12" -> 12; false for other names.
bool ParseProfilerStep(std::string_view name, int64_t* step);

}  // namespace trainprof::importers::kineto
