#include "collect/proc_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <utility>

namespace trainprof::collect {

ProcFile::~ProcFile() { Close(); }

ProcFile::ProcFile(ProcFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      last_errno_(other.last_errno_),
      buffer_(std::move(other.buffer_)) {}

ProcFile& ProcFile::operator=(ProcFile&& other) noexcept {
  if (this != &other) {
    Close();
    path_ = std::move(other.path_);
    kind_ = other.kind_;
    fd_ = std::exchange(other.fd_, -1);
    last_errno_ = other.last_errno_;
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

bool ProcFile::Open() {
  if (fd_ >= 0) return true;
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    last_errno_ = errno;
    return false;
  }
  return true;
}

void ProcFile::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool ProcFile::Read(std::string_view* contents) {
  if (!Open()) return false;
  if (buffer_.empty()) buffer_.resize(4096);
  // /proc files are generated on read: a read that fills the buffer may have been cut short,
  // so grow and read again from offset 0 until the whole file fits.
  for (;;) {
    size_t total = 0;
    for (;;) {
      ssize_t n =
          ::pread(fd_, buffer_.data() + total, buffer_.size() - total, static_cast<off_t>(total));
      if (n < 0) {
        if (errno == EINTR) continue;
        last_errno_ = errno;
        // ESRCH: the process behind a /proc/<pid> file is gone; the fd is of no more use.
        if (errno == ESRCH) Close();
        return false;
      }
      if (n == 0) break;
      total += static_cast<size_t>(n);
      if (total == buffer_.size()) break;
      if (kind_ == Kind::kSingleRecord) break;  // short: the whole text
    }
    if (total < buffer_.size()) {
      *contents = std::string_view(buffer_.data(), total);
      return true;
    }
    buffer_.resize(buffer_.size() * 2);
  }
}

bool TextCursor::NextLine(std::string_view* line) {
  if (pos_ >= text_.size()) return false;
  size_t end = text_.find('\n', pos_);
  if (end == std::string_view::npos) end = text_.size();
  *line = text_.substr(pos_, end - pos_);
  pos_ = end + 1;
  return true;
}

std::string_view NextToken(std::string_view* s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n'; };
  size_t i = 0;
  while (i < s->size() && space((*s)[i])) ++i;
  size_t j = i;
  while (j < s->size() && !space((*s)[j])) ++j;
  std::string_view token = s->substr(i, j - i);
  s->remove_prefix(j);
  return token;
}

bool ParseU64(std::string_view token, unsigned long long* value) {
  if (token.empty()) return false;
  auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), *value);
  return ec == std::errc() && ptr == token.data() + token.size();
}

bool ParseI64(std::string_view token, long long* value) {
  if (token.empty()) return false;
  auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), *value);
  return ec == std::errc() && ptr == token.data() + token.size();
}

bool ParseDouble(std::string_view token, double* value) {
  if (token.empty()) return false;
  auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), *value);
  return ec == std::errc() && ptr == token.data() + token.size();
}

int ParseU64s(std::string_view s, unsigned long long* values, int max) {
  int n = 0;
  while (n < max) {
    std::string_view token = NextToken(&s);
    if (!ParseU64(token, &values[n])) break;
    ++n;
  }
  return n;
}

bool SplitKey(std::string_view line, std::string_view* key, std::string_view* rest) {
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return false;
  *key = line.substr(0, colon);
  *rest = line.substr(colon + 1);
  return true;
}

}  // namespace trainprof::collect
