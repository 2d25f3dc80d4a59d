#pragma once
// A /proc or /sys file kept open and re-read with pread(2) from offset 0 each tick, into a
// buffer that grows only when the file outgrows it. Opening a /proc file costs a path walk and
// a dentry lookup; keeping it open makes a sample a single syscall. Used from the sampling
// thread of the collector that owns it.

#include <string>
#include <string_view>
#include <vector>

namespace trainprof::collect {

class ProcFile {
 public:
  // How to tell that a read got the whole file.
  enum class Kind {
    // Read until a read returns 0 bytes: seq_files of many records (/proc/net/dev,
    // /proc/diskstats, children lists) return at most a page of whole records per read.
    kAny,
    // A short read is the whole file: single-record seq_files (/proc/<pid>/stat and io,
    // /proc/stat, /proc/meminfo, /proc/loadavg) generate all their text at once and return
    // it whole when it fits. Saves the second read per file per tick that only sees 0 bytes,
    // which for these files runs the kernel's text generator a second time.
    kSingleRecord,
  };
  ProcFile() = default;
  explicit ProcFile(std::string path, Kind kind = Kind::kAny)
      : path_(std::move(path)), kind_(kind) {}
  ~ProcFile();
  ProcFile(ProcFile&& other) noexcept;
  ProcFile& operator=(ProcFile&& other) noexcept;
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;

  const std::string& path() const { return path_; }
  bool is_open() const { return fd_ >= 0; }

  // Opens the file if it is not open yet. False (errno kept in last_errno()) when it cannot.
  bool Open();
  // The whole file as it is now; false when it cannot be read (the file stays open unless the
  // error says it is gone, so a later call retries). The view lives until the next Read.
  bool Read(std::string_view* contents);
  int last_errno() const { return last_errno_; }
  void Close();

 private:
  std::string path_;
  Kind kind_ = Kind::kAny;
  int fd_ = -1;
  int last_errno_ = 0;
  std::vector<char> buffer_ = std::vector<char>(4096);
};

// Allocation-free scanning of /proc text: a cursor over the file's bytes.
class TextCursor {
 public:
  explicit TextCursor(std::string_view text) : text_(text) {}
  bool AtEnd() const { return pos_ >= text_.size(); }
  // The next line without its '\n'; false at the end.
  bool NextLine(std::string_view* line);

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

// Splits off the next whitespace-separated token of *s; "" when none is left.
std::string_view NextToken(std::string_view* s);
// Parses a whole token as an unsigned / signed integer / double; false if it is not one.
bool ParseU64(std::string_view token, unsigned long long* value);
bool ParseI64(std::string_view token, long long* value);
bool ParseDouble(std::string_view token, double* value);
// Parses up to `max` unsigned integers from *s into values; returns how many were parsed
// (stops at the first token that is not a number).
int ParseU64s(std::string_view s, unsigned long long* values, int max);
// For "Key:   value kB" lines: the key before ':' and the rest.
bool SplitKey(std::string_view line, std::string_view* key, std::string_view* rest);

}  // namespace trainprof::collect
