#pragma once
// Helpers of the exporters (export_chrome_trace.cc, export_smdebug.cc): a buffered output file
// that is gzip-compressed when asked (written as it goes, never held whole in memory), and the
// JSON text pieces written by hand so that output streams: strings escaped for JSON, int64 ns as
// decimal microseconds, doubles in their shortest exact form.
// Threads: one thread per ExportFile.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/progress.h"
#include "base/status.h"

namespace trainprof::cli {

// Stored args nested deeper than this are exported as text ("args_text"), never walked
// recursively; imports store at most 64 levels (importers' kMaxArgsDepth).
inline constexpr int kMaxExportArgsDepth = 256;

class ExportFile {
 public:
  // Creates (truncates) `path`; gzip-compressed when `gzip`. The directory must exist.
  // `progress` (optional) is advanced by the bytes written (before compression).
  static StatusOr<std::unique_ptr<ExportFile>> Create(const std::string& path, bool gzip,
                                                      ProgressSink* progress = nullptr);
  ~ExportFile();
  ExportFile(const ExportFile&) = delete;
  ExportFile& operator=(const ExportFile&) = delete;

  // Appends to the buffer; the buffer goes to the file when it passes 1 MiB.
  void Write(std::string_view text);
  std::string& buffer() { return buffer_; }  // append directly, then call MaybeFlush()
  void MaybeFlush();
  // Writes what is buffered and closes; reports the first write error (disk full...).
  Status Close();
  const std::string& path() const { return path_; }

 private:
  ExportFile(std::string path, bool gzip) : path_(std::move(path)), gzip_(gzip) {}
  void FlushBuffer();

  std::string path_;
  bool gzip_;
  void* handle_ = nullptr;  // FILE* or gzFile
  std::string buffer_;
  std::string error_;
  ProgressSink* progress_ = nullptr;
};

// Appends `text` as a JSON string literal (quotes included): ", \ and control characters
// escaped; bytes that are not valid UTF-8 become U+FFFD, so every consumer can parse it.
void AppendJsonString(std::string_view text, std::string* out);
// Appends ns as decimal microseconds with ns precision: 1234567 -> "1234.567", -1500 -> "-1.500".
void AppendMicros(int64_t ns, std::string* out);
// Appends seconds with ns precision: 1591160699457089400 -> "1591160699.457089400".
void AppendSeconds(int64_t ns, std::string* out);
// Appends the shortest decimal text that reads back as exactly `v` (finite values only).
void AppendDouble(double v, std::string* out);

}  // namespace trainprof::cli
