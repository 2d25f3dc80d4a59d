#pragma once
// Framework events: spans (a name with a start and a duration) and instants (a point in time),
// as recorded in training processes or imported from other tools' traces.

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace trainprof::model {

// Sentinel for an integer field that was not recorded (step, rank, pid...). Missing is not 0.
inline constexpr int64_t kMissing = std::numeric_limits<int64_t>::min();

enum class EventKind : uint8_t {
  kSpan = 0,     // [start_ns, start_ns + duration_ns)
  kInstant = 1,  // a point in time; duration_ns is 0
};

// Well-known categories. Others are free-form (importers keep the source's category).
inline constexpr const char* kCategoryStep = "step";           // one optimizer step
inline constexpr const char* kCategoryDataWait = "data_wait";  // waiting for the next batch
inline constexpr const char* kCategoryForward = "forward";
inline constexpr const char* kCategoryBackward = "backward";
inline constexpr const char* kCategoryOptimizer = "optimizer";
inline constexpr const char* kCategoryPhase = "phase";  // initialisation, training, download...
inline constexpr const char* kCategoryMark = "mark";    // user marks (instants)

struct Event {
  EventKind kind = EventKind::kSpan;
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  std::string name;
  std::string category;
  std::string mode;  // "train", "eval", "predict", "global" or "" when unknown
  int64_t step = kMissing;
  int64_t pid = kMissing;
  int64_t tid = kMissing;
  int64_t rank = kMissing;
  std::string args;  // a JSON object as text, or empty

  int64_t end_ns() const { return start_ns + duration_ns; }
};

// start + max(0, duration), held at the largest time: a damaged store's times may be anything,
// and a signed overflow is undefined behaviour.
inline int64_t SpanEndNs(int64_t start_ns, int64_t duration_ns) {
  if (duration_ns <= 0) return start_ns;
  return start_ns > std::numeric_limits<int64_t>::max() - duration_ns
             ? std::numeric_limits<int64_t>::max()
             : start_ns + duration_ns;
}

// An event whose strings belong to someone else (an importer's read buffer, a recorder's
// thread buffer): what the store's writer copies in without building an Event.
struct EventView {
  EventKind kind = EventKind::kSpan;
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  std::string_view name;
  std::string_view category;
  std::string_view mode;
  int64_t step = kMissing;
  int64_t pid = kMissing;
  int64_t tid = kMissing;
  int64_t rank = kMissing;
  std::string_view args;
};

inline EventView ViewOf(const Event& e) {
  return EventView{e.kind, e.start_ns, e.duration_ns, e.name, e.category, e.mode,
                   e.step, e.pid,      e.tid,         e.rank, e.args};
}

}  // namespace trainprof::model
