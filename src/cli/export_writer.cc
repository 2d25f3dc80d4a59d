#include "cli/export_writer.h"

#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cstdio>

#include "base/files.h"

namespace trainprof::cli {
namespace {

constexpr size_t kFlushBytes = 1 << 20;

// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not one.
size_t Utf8Length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

}  // namespace

StatusOr<std::unique_ptr<ExportFile>> ExportFile::Create(const std::string& path, bool gzip,
                                                         ProgressSink* progress) {
  std::unique_ptr<ExportFile> f(new ExportFile(path, gzip));
  f->progress_ = progress;
  if (gzip) {
    f->handle_ = gzopen(path.c_str(), "wb6");
  } else {
    f->handle_ = std::fopen(path.c_str(), "wb");
  }
  if (f->handle_ == nullptr) {
    return Unavailable(path + ": cannot create: " + ErrnoMessage(errno));
  }
  f->buffer_.reserve(kFlushBytes + 4096);
  return f;
}

ExportFile::~ExportFile() {
  if (handle_ == nullptr) return;
  if (gzip_) {
    gzclose(static_cast<gzFile>(handle_));
  } else {
    std::fclose(static_cast<FILE*>(handle_));
  }
}

void ExportFile::Write(std::string_view text) {
  buffer_.append(text);
  MaybeFlush();
}

void ExportFile::MaybeFlush() {
  if (buffer_.size() >= kFlushBytes) FlushBuffer();
}

void ExportFile::FlushBuffer() {
  if (buffer_.empty() || handle_ == nullptr) return;
  ProgressAdvance(progress_, static_cast<int64_t>(buffer_.size()));
  if (error_.empty()) {
    if (gzip_) {
      int n = gzwrite(static_cast<gzFile>(handle_), buffer_.data(),
                      static_cast<unsigned>(buffer_.size()));
      if (n <= 0 || static_cast<size_t>(n) != buffer_.size()) {
        int errnum = 0;
        const char* msg = gzerror(static_cast<gzFile>(handle_), &errnum);
        error_ = std::string("gzip write failed: ") +
                 (errnum == Z_ERRNO ? ErrnoMessage(errno) : std::string(msg ? msg : "?"));
      }
    } else if (std::fwrite(buffer_.data(), 1, buffer_.size(), static_cast<FILE*>(handle_)) !=
               buffer_.size()) {
      error_ = "write failed: " + ErrnoMessage(errno);
    }
  }
  buffer_.clear();
}

Status ExportFile::Close() {
  FlushBuffer();
  if (handle_ != nullptr) {
    int rc =
        gzip_ ? gzclose(static_cast<gzFile>(handle_)) : std::fclose(static_cast<FILE*>(handle_));
    handle_ = nullptr;
    if (rc != 0 && error_.empty()) error_ = "close failed: " + ErrnoMessage(errno);
  }
  if (!error_.empty()) return Unavailable(path_ + ": " + error_);
  return OkStatus();
}

void AppendJsonString(std::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      size_t n = Utf8Length(text, i);
      if (n == 0) {
        out->append("\xEF\xBF\xBD");  // U+FFFD for a byte that is not UTF-8
        ++i;
      } else {
        out->append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xF]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

namespace {

// ns split into a whole part and `digits` decimals of `unit` (1000 for µs, 1e9 for s).
void AppendScaled(int64_t ns, int64_t unit, int digits, std::string* out) {
  // Work on the magnitude in uint64 so that INT64_MIN does not overflow.
  uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (ns < 0) out->push_back('-');
  out->append(std::to_string(mag / static_cast<uint64_t>(unit)));
  out->push_back('.');
  std::string frac = std::to_string(mag % static_cast<uint64_t>(unit));
  out->append(static_cast<size_t>(digits) - frac.size(), '0');
  out->append(frac);
}

}  // namespace

void AppendMicros(int64_t ns, std::string* out) { AppendScaled(ns, 1000, 3, out); }

void AppendSeconds(int64_t ns, std::string* out) { AppendScaled(ns, 1'000'000'000, 9, out); }

void AppendDouble(double v, std::string* out) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

}  // namespace trainprof::cli
