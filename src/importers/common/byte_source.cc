#include "importers/common/byte_source.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/files.h"

namespace trainprof::importers {
namespace {
constexpr size_t kInputChunkBytes = 1 << 18;
// Compressed files below this inflate with zlib under kAuto: ISA-L's load and self-test (about
// 0.5 ms) exceed what it saves on ~400 KB of JSON (zlib ~300 MB/s, ISA-L ~1 GB/s here).
constexpr off_t kIsalMinFileBytes = 48 << 10;

}  // namespace

ByteSource::ByteSource(std::string path, FILE* f) : path_(std::move(path)), file_(f) {}

StatusOr<std::unique_ptr<ByteSource>> ByteSource::Open(const std::string& path,
                                                       GzipBackend backend) {
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
  struct stat st {};
  const bool stat_ok = fstat(fileno(f), &st) == 0;
  const int64_t size = stat_ok && S_ISREG(st.st_mode) ? static_cast<int64_t>(st.st_size) : 0;
  src->text_bytes_hint_ = size;
  if (src->gzip_) {
    // ISIZE, the last 4 bytes: the (last member's) uncompressed size mod 2^32.
    unsigned char t[4];
    int64_t isize = 0;
    if (size >= 18 && pread(fileno(f), t, sizeof t, size - 4) == 4) {
      isize = int64_t{t[0]} | int64_t{t[1]} << 8 | int64_t{t[2]} << 16 | int64_t{t[3]} << 24;
    }
    src->text_bytes_hint_ = std::max(isize, 8 * size);
    // The gzip wrapper is parsed and its CRC checked; concatenated members are handled in Read.
    // A small file inflates with zlib: loading ISA-L and its self-test cost more than it saves.
    if (backend == GzipBackend::kAuto && stat_ok && st.st_size < kIsalMinFileBytes) {
      backend = GzipBackend::kZlib;
    }
    std::string error;
    src->z_ = GzipInflater::Create(backend, &error);
    if (src->z_ == nullptr) return Unavailable(path + ": cannot inflate gzip: " + error);
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
  ProgressAdvance(progress_, static_cast<int64_t>(n));
  return n;
}

StatusOr<size_t> ByteSource::Read(char* out, size_t capacity) {
  if (!gzip_) return ReadRaw(out, capacity);
  if (stream_end_ || capacity == 0) return size_t{0};
  GzipInflater& z = *z_;
  const uint32_t wanted = static_cast<uint32_t>(std::min<size_t>(capacity, UINT32_MAX));
  z.SetOutput(reinterpret_cast<uint8_t*>(out), wanted);
  while (z.avail_out() > 0) {
    if (member_end_) {
      // A member ended. Another may follow (concatenated .gz files are valid gzip).
      if (z.avail_in() == 0) {
        TP_ASSIGN_OR_RETURN(size_t n, ReadRaw(reinterpret_cast<char*>(in_.data()), in_.size()));
        z.SetInput(in_.data(), static_cast<uint32_t>(n));
      }
      if (z.avail_in() == 0) {
        stream_end_ = true;
        break;
      }
      z.ResetKeepingInput();
      member_end_ = false;
      continue;
    }
    if (z.avail_in() == 0 && !input_end_) {
      TP_ASSIGN_OR_RETURN(size_t n, ReadRaw(reinterpret_cast<char*>(in_.data()), in_.size()));
      if (n == 0) input_end_ = true;
      z.SetInput(in_.data(), static_cast<uint32_t>(n));
    }
    const uint32_t out_before = z.avail_out(), in_before = z.avail_in();
    std::string error;
    GzipInflater::Result r = z.Inflate(&error);
    if (input_end_ && r == GzipInflater::Result::kOk && z.avail_out() == out_before) {
      // The file ended inside the deflate stream, and what the inflater held decoded (ISA-L
      // keeps up to 32 KiB more than a small read takes) has been delivered: all of the text
      // before the cut, in whatever sizes it is read.
      return DataLoss(path_ +
                      ": truncated gzip stream (file ends before the end of the "
                      "compressed data, after " +
                      std::to_string(file_bytes_read_) + " bytes)");
    }
    if (r == GzipInflater::Result::kError) {
      return DataLoss(path_ + ": corrupt gzip data (" + error + ")");
    }
    if (r == GzipInflater::Result::kMemberEnd) {
      member_end_ = true;
      continue;
    }
    if (z.avail_out() == out_before && z.avail_in() == in_before) {
      return DataLoss(path_ + ": corrupt gzip data (no progress)");  // never loop forever
    }
  }
  return static_cast<size_t>(wanted - z.avail_out());
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
