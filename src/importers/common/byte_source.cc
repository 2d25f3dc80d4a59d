#include "importers/common/byte_source.h"

#include <cerrno>
#include <cstring>

#include "base/files.h"

namespace trainprof::importers {
namespace {
constexpr size_t kInputChunkBytes = 1 << 18;
}  // namespace

StatusOr<std::unique_ptr<ByteSource>> ByteSource::Open(const std::string& path) {
  if (IsDirectory(path)) return InvalidArgument(path + ": is a directory, expected a file");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    int err = errno;
    if (err == ENOENT) return NotFound(path + ": no such file");
    return Unavailable(path + ": " + ErrnoMessage(err));
  }
  std::unique_ptr<ByteSource> src(new ByteSource(path, f));
  int c0 = std::fgetc(f);
  int c1 = c0 == EOF ? EOF : std::fgetc(f);
  src->gzip_ = c0 == 0x1f && c1 == 0x8b;
  std::rewind(f);
  if (src->gzip_) {
    // 16 + MAX_WBITS: gzip wrapper only; concatenated members are handled in Read.
    if (inflateInit2(&src->z_, 16 + MAX_WBITS) != Z_OK) {
      return Internal(path + ": zlib inflateInit2 failed");
    }
    src->z_initialized_ = true;
    src->in_.resize(kInputChunkBytes);
  }
  return src;
}

ByteSource::~ByteSource() {
  if (z_initialized_) inflateEnd(&z_);
  if (file_ != nullptr) std::fclose(file_);
}

StatusOr<size_t> ByteSource::ReadRaw(char* out, size_t capacity) {
  size_t n = std::fread(out, 1, capacity, file_);
  if (n == 0 && std::ferror(file_)) return Unavailable(path_ + ": read error");
  file_bytes_read_ += static_cast<int64_t>(n);
  return n;
}

StatusOr<size_t> ByteSource::Read(char* out, size_t capacity) {
  if (!gzip_) return ReadRaw(out, capacity);
  if (stream_end_ || capacity == 0) return size_t{0};
  z_.next_out = reinterpret_cast<Bytef*>(out);
  z_.avail_out = static_cast<uInt>(capacity);
  while (z_.avail_out > 0) {
    if (z_.avail_in == 0) {
      TP_ASSIGN_OR_RETURN(size_t n, ReadRaw(reinterpret_cast<char*>(in_.data()), in_.size()));
      if (n == 0) {
        // The file ended inside the deflate stream.
        return DataLoss(path_ +
                        ": truncated gzip stream (file ends before the end of the "
                        "compressed data, after " +
                        std::to_string(file_bytes_read_) + " bytes)");
      }
      z_.next_in = in_.data();
      z_.avail_in = static_cast<uInt>(n);
    }
    int rc = inflate(&z_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow (concatenated .gz files are valid gzip).
      if (z_.avail_in == 0) {
        TP_ASSIGN_OR_RETURN(size_t n, ReadRaw(reinterpret_cast<char*>(in_.data()), in_.size()));
        z_.next_in = in_.data();
        z_.avail_in = static_cast<uInt>(n);
      }
      if (z_.avail_in == 0) {
        stream_end_ = true;
        break;
      }
      if (inflateReset(&z_) != Z_OK) return DataLoss(path_ + ": corrupt gzip member");
      continue;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return DataLoss(path_ + ": corrupt gzip data (" +
                      std::string(z_.msg != nullptr ? z_.msg : "zlib error") + ")");
    }
  }
  return capacity - z_.avail_out;
}

StatusOr<std::string> ReadAllDecompressed(const std::string& path) {
  TP_ASSIGN_OR_RETURN(auto src, ByteSource::Open(path));
  std::string out;
  char buf[1 << 16];
  while (true) {
    TP_ASSIGN_OR_RETURN(size_t n, src->Read(buf, sizeof buf));
    if (n == 0) break;
    out.append(buf, n);
  }
  return out;
}

}  // namespace trainprof::importers
