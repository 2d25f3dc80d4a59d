#pragma once
// Reads a file as a stream of bytes in chunks, transparently inflating gzip (detected by its
// magic bytes, not the file name). Importers parse from these chunks so that a trace of any
// size is never held whole in memory. Inflating is ISA-L's when libisal.so.2 is present at run
// time (igzip: about 3x zlib's speed here, 6 GB/s of trace JSON, so a .json.gz imports nearly
// as fast as the plain file), else zlib's (gzip_inflater.h).
// Threads: one ByteSource per thread.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "importers/common/gzip_inflater.h"

namespace trainprof::importers {

class ByteSource {
 public:
  // Opens `path`; NotFound when it does not exist. `backend` picks the gzip inflater (tests
  // compare the two; kAuto is ISA-L when it loads and the file is
  // over 48 KiB, else zlib).
  static StatusOr<std::unique_ptr<ByteSource>> Open(const std::string& path,
                                                    GzipBackend backend = GzipBackend::kAuto);
  ~ByteSource();
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Reads up to `capacity` bytes into `out`; returns the count, 0 at the end. A truncated or
  // corrupt gzip stream is a DataLoss error naming the file.
  StatusOr<size_t> Read(char* out, size_t capacity);

  bool gzip() const { return gzip_; }
  // "isal" or "zlib" for a gzip file, "" otherwise.
  const char* inflater_name() const { return z_ ? z_->name() : ""; }
  const std::string& path() const { return path_; }
  // Bytes read from the file so far (compressed bytes for gzip).
  int64_t file_bytes_read() const { return file_bytes_read_; }
  // About how many bytes Read will give, known before reading: the file's size, or for gzip
  // the trailer's ISIZE (the last member's size mod 2^32), at least 8x the compressed size. A
  // hint for choosing how to read (one thread or two), never a bound.
  int64_t text_bytes_hint() const { return text_bytes_hint_; }
  // Each read of the file advances `progress` by the bytes read from it (null: none).
  void set_progress(ProgressSink* progress) { progress_ = progress; }

 private:
  ByteSource(std::string path, FILE* f);
  StatusOr<size_t> ReadRaw(char* out, size_t capacity);

  std::string path_;
  FILE* file_ = nullptr;
  bool gzip_ = false;
  bool stream_end_ = false;
  bool member_end_ = false;
  bool input_end_ = false;  // the file ended (inside a member: what is decoded drains first)
  std::unique_ptr<GzipInflater> z_;
  std::vector<unsigned char> in_;
  int64_t file_bytes_read_ = 0;
  int64_t text_bytes_hint_ = 0;
  ProgressSink* progress_ = nullptr;
};

// Reads the whole (decompressed) content; for small files such as config and metadata.
StatusOr<std::string> ReadAllDecompressed(const std::string& path);

}  // namespace trainprof::importers
