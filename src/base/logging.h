#pragma once
// Minimal leveled logging to stderr, prefixed "trainprof: ". The training job shares the
// terminal, so we log little: warnings once, errors always. TP_LOG_ONCE guards repeated problems.

#include <atomic>
#include <string>

namespace trainprof {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void Log(LogLevel level, const std::string& message);

}  // namespace trainprof

#define TP_LOG_WARNING(msg) ::trainprof::Log(::trainprof::LogLevel::kWarning, (msg))
#define TP_LOG_ERROR(msg) ::trainprof::Log(::trainprof::LogLevel::kError, (msg))
#define TP_LOG_INFO(msg) ::trainprof::Log(::trainprof::LogLevel::kInfo, (msg))
// Logs `msg` the first time this line runs in the process, never again.
#define TP_LOG_ONCE(level, msg)                                          \
  do {                                                                   \
    static std::atomic<bool> tp_logged_once_{false};                     \
    if (!tp_logged_once_.exchange(true)) ::trainprof::Log(level, (msg)); \
  } while (0)
