#include "importers/common/byte_source.h"

#include <isa-l/igzip_lib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/files.h"

namespace trainprof::importers {
namespace {
constexpr size_t kInputChunkBytes = 1 << 18;

const char* InflateError(int rc) {
  switch (rc) {
    case ISAL_INVALID_BLOCK:
      return "invalid deflate block";
    case ISAL_INVALID_SYMBOL:
      return "invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK:
      return "invalid back-reference distance";
    case ISAL_INVALID_WRAPPER:
      return "invalid gzip header";
    case ISAL_UNSUPPORTED_METHOD:
      return "unsupported compression method";
    case ISAL_INCORRECT_CHECKSUM:
      return "incorrect checksum";
    case ISAL_NEED_DICT:
      return "needs a preset dictionary";
    default:
      return "inflate error";
  }
}
}  // namespace

struct ByteSource::Inflate {
  inflate_state state;
};

ByteSource::ByteSource(std::string path, FILE* f) : path_(std::move(path)), file_(f) {}

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
    // The gzip wrapper is parsed and its CRC checked; concatenated members are handled in Read.
    src->z_ = std::make_unique<Inflate>();
    isal_inflate_init(&src->z_->state);
    src->z_->state.crc_flag = ISAL_GZIP;
    src->in_.resize(kInputChunkBytes);
  }
  return src;
}

ByteSource::~ByteSource() {
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
  inflate_state& z = z_->state;
  z.next_out = reinterpret_cast<uint8_t*>(out);
  z.avail_out = static_cast<uint32_t>(std::min<size_t>(capacity, UINT32_MAX));
  const uint32_t wanted = z.avail_out;
  while (z.avail_out > 0) {
    if (z.block_state == ISAL_BLOCK_FINISH) {
      // A member ended. Another may follow (concatenated .gz files are valid gzip).
      if (z.avail_in == 0) {
        TP_ASSIGN_OR_RETURN(size_t n, ReadRaw(reinterpret_cast<char*>(in_.data()), in_.size()));
        z.next_in = in_.data();
        z.avail_in = static_cast<uint32_t>(n);
      }
      if (z.avail_in == 0) {
        stream_end_ = true;
        break;
      }
      uint8_t* next_in = z.next_in;
      const uint32_t avail_in = z.avail_in;
      isal_inflate_reset(&z);
      z.crc_flag = ISAL_GZIP;
      z.next_in = next_in;
      z.avail_in = avail_in;
      z.next_out = reinterpret_cast<uint8_t*>(out) + (wanted - z.avail_out);
      continue;
    }
    if (z.avail_in == 0) {
      TP_ASSIGN_OR_RETURN(size_t n, ReadRaw(reinterpret_cast<char*>(in_.data()), in_.size()));
      if (n == 0) {
        // The file ended inside the deflate stream.
        return DataLoss(path_ +
                        ": truncated gzip stream (file ends before the end of the "
                        "compressed data, after " +
                        std::to_string(file_bytes_read_) + " bytes)");
      }
      z.next_in = in_.data();
      z.avail_in = static_cast<uint32_t>(n);
    }
    const uint32_t out_before = z.avail_out, in_before = z.avail_in;
    int rc = isal_inflate(&z);
    if (rc < 0 || rc == ISAL_NEED_DICT) {
      return DataLoss(path_ + ": corrupt gzip data (" + InflateError(rc) + ")");
    }
    if (z.block_state != ISAL_BLOCK_FINISH && z.avail_out == out_before &&
        z.avail_in == in_before) {
      return DataLoss(path_ + ": corrupt gzip data (no progress)");  // never loop forever
    }
  }
  return static_cast<size_t>(wanted - z.avail_out);
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
