#include "importers/common/byte_source.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "importers/common/test_util.h"

namespace trainprof::importers {
namespace {

using testing::TempDir;
using testing::WriteFile;
using testing::WriteGzip;

std::string ReadAll(const std::string& path, size_t chunk, Status* status) {
  auto src = ByteSource::Open(path);
  if (!src.ok()) {
    *status = src.status();
    return {};
  }
  std::string out;
  std::string buf(chunk, '\0');
  while (true) {
    auto n = (*src)->Read(buf.data(), buf.size());
    if (!n.ok()) {
      *status = n.status();
      return out;
    }
    if (*n == 0) break;
    out.append(buf.data(), *n);
  }
  *status = OkStatus();
  return out;
}

// A file's raw bytes.
std::string Slurp(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

std::string Text(size_t n) {
  std::mt19937 rng(3);
  std::string s;
  while (s.size() < n) s += "{\"ph\":\"X\",\"ts\":" + std::to_string(rng() % 100000) + "},\n";
  return s;
}

TEST(ByteSourceTest, InflatesGzipInAnyChunkSizeAndConcatenatedMembers) {
  const std::string dir = TempDir();
  const std::string a = Text(3 << 20), b = Text(1000);
  WriteGzip(dir + "/a.gz", a);
  WriteGzip(dir + "/b.gz", b);
  Status st;
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 20}) {
    if (chunk == 1) {  // byte by byte on the small member only (it is slow)
      EXPECT_EQ(ReadAll(dir + "/b.gz", chunk, &st), b);
      EXPECT_TRUE(st.ok()) << st.message();
      continue;
    }
    EXPECT_EQ(ReadAll(dir + "/a.gz", chunk, &st), a) << chunk;
    EXPECT_TRUE(st.ok()) << st.message();
  }
  // Two gzip files concatenated are one valid gzip stream.
  WriteFile(dir + "/ab.gz", Slurp(dir + "/a.gz") + Slurp(dir + "/b.gz"));
  EXPECT_EQ(ReadAll(dir + "/ab.gz", 1 << 16, &st), a + b);
  EXPECT_TRUE(st.ok()) << st.message();
  // A plain file reads as it is.
  WriteFile(dir + "/plain.json", b);
  EXPECT_EQ(ReadAll(dir + "/plain.json", 100, &st), b);
}

TEST(ByteSourceTest, TruncatedCorruptAndTrailingBytesAreClearErrors) {
  const std::string dir = TempDir();
  WriteGzip(dir + "/a.gz", Text(1 << 20));
  const std::string gz = Slurp(dir + "/a.gz");
  Status st;
  WriteFile(dir + "/cut.gz", gz.substr(0, gz.size() / 2));
  ReadAll(dir + "/cut.gz", 1 << 16, &st);
  EXPECT_NE(st.message().find("truncated gzip stream"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("cut.gz"), std::string::npos);
  std::string bad = gz;
  for (size_t i = 100; i < 200; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
  WriteFile(dir + "/bad.gz", bad);
  ReadAll(dir + "/bad.gz", 1 << 16, &st);
  EXPECT_NE(st.message().find("corrupt gzip data"), std::string::npos) << st.message();
  WriteFile(dir + "/tail.gz", gz + "garbage after the member");
  ReadAll(dir + "/tail.gz", 1 << 16, &st);
  EXPECT_NE(st.message().find("gzip"), std::string::npos) << st.message();
  std::string crc = gz;
  crc[crc.size() - 6] = static_cast<char>(crc[crc.size() - 6] ^ 1);  // the CRC32 trailer
  WriteFile(dir + "/crc.gz", crc);
  ReadAll(dir + "/crc.gz", 1 << 16, &st);
  EXPECT_NE(st.message().find("checksum"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace trainprof::importers
