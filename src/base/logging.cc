#include "base/logging.h"

#include <cstdio>

namespace trainprof {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarning)};
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

void Log(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) < g_level.load()) return;
  const char* tag = level == LogLevel::kError     ? "error: "
                    : level == LogLevel::kWarning ? "warning: "
                                                  : "";
  std::fprintf(stderr, "trainprof: %s%s\n", tag, message.c_str());
}

}  // namespace trainprof
