#include "importers/common/byte_source.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/files.h"

#include "importers/common/test_util.h"

namespace trainprof::importers {
namespace {

using testing::SharedData;
using testing::TempDir;
using testing::WriteFile;
using testing::WriteGzip;

std::string ReadAll(const std::string& path, size_t chunk, Status* status,
                    GzipBackend backend = GzipBackend::kAuto) {
  auto src = ByteSource::Open(path, backend);
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

// Both inflaters run every case: ISA-L (loaded with dlopen; libisal2 is in
// scripts/system-packages.txt, so its absence here is a failure, not a skip) and the zlib
// fallback that machines without it use.
class ByteSourceTest : public ::testing::TestWithParam<GzipBackend> {};

INSTANTIATE_TEST_SUITE_P(Inflaters, ByteSourceTest,
                         ::testing::Values(GzipBackend::kIsal, GzipBackend::kZlib),
                         [](const auto& p) {
                           return std::string(p.param == GzipBackend::kIsal ? "Isal" : "Zlib");
                         });

TEST_P(ByteSourceTest, InflatesGzipInAnyChunkSizeAndConcatenatedMembers) {
  const GzipBackend be = GetParam();
  const std::string dir = TempDir();
  const std::string a = Text(3 << 20), b = Text(1000);
  WriteGzip(dir + "/a.gz", a);
  WriteGzip(dir + "/b.gz", b);
  Status st;
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 20}) {
    if (chunk == 1) {  // byte by byte on the small member only (it is slow)
      EXPECT_EQ(ReadAll(dir + "/b.gz", chunk, &st, be), b);
      EXPECT_TRUE(st.ok()) << st.message();
      continue;
    }
    EXPECT_EQ(ReadAll(dir + "/a.gz", chunk, &st, be), a) << chunk;
    EXPECT_TRUE(st.ok()) << st.message();
  }
  // Two gzip files concatenated are one valid gzip stream.
  WriteFile(dir + "/ab.gz", Slurp(dir + "/a.gz") + Slurp(dir + "/b.gz"));
  EXPECT_EQ(ReadAll(dir + "/ab.gz", 1 << 16, &st, be), a + b);
  EXPECT_TRUE(st.ok()) << st.message();
  // A plain file reads as it is.
  WriteFile(dir + "/plain.json", b);
  EXPECT_EQ(ReadAll(dir + "/plain.json", 100, &st, be), b);
}

TEST_P(ByteSourceTest, TruncatedCorruptAndTrailingBytesAreClearErrors) {
  const GzipBackend be = GetParam();
  const std::string dir = TempDir();
  WriteGzip(dir + "/a.gz", Text(1 << 20));
  const std::string gz = Slurp(dir + "/a.gz");
  Status st;
  WriteFile(dir + "/cut.gz", gz.substr(0, gz.size() / 2));
  ReadAll(dir + "/cut.gz", 1 << 16, &st, be);
  EXPECT_NE(st.message().find("truncated gzip stream"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("cut.gz"), std::string::npos);
  // All of the text before the cut is read, in any read size, as zlib's gzread (an independent
  // reader) reads it: every read but the one that meets the cut. (ISA-L used to stop with up
  // to 32 KiB of decoded text undelivered, the more the smaller the reads.)
  std::string oracle;
  gzFile g = gzopen((dir + "/cut.gz").c_str(), "rb");
  ASSERT_NE(g, nullptr);
  char buf[1 << 16];
  int got;
  while ((got = gzread(g, buf, sizeof buf)) > 0) oracle.append(buf, static_cast<size_t>(got));
  gzclose(g);
  ASSERT_GT(oracle.size(), size_t{100000});
  for (size_t chunk : {size_t{512}, size_t{7} << 10, size_t{1} << 20}) {
    const std::string before = ReadAll(dir + "/cut.gz", chunk, &st, be);
    EXPECT_FALSE(st.ok());
    EXPECT_TRUE(before == oracle.substr(0, before.size())) << chunk;
    EXPECT_GT(before.size() + chunk, oracle.size()) << chunk;
  }
  std::string bad = gz;
  for (size_t i = 100; i < 200; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
  WriteFile(dir + "/bad.gz", bad);
  ReadAll(dir + "/bad.gz", 1 << 16, &st, be);
  EXPECT_NE(st.message().find("corrupt gzip data"), std::string::npos) << st.message();
  WriteFile(dir + "/tail.gz", gz + "garbage after the member");
  ReadAll(dir + "/tail.gz", 1 << 16, &st, be);
  EXPECT_NE(st.message().find("gzip"), std::string::npos) << st.message();
  std::string crc = gz;
  crc[crc.size() - 6] = static_cast<char>(crc[crc.size() - 6] ^ 1);  // the CRC32 trailer
  WriteFile(dir + "/crc.gz", crc);
  ReadAll(dir + "/crc.gz", 1 << 16, &st, be);
  EXPECT_NE(st.message().find("checksum"), std::string::npos) << st.message();
}

TEST_P(ByteSourceTest, TheInflaterAskedForIsTheOneUsed) {
  const std::string dir = TempDir();
  WriteGzip(dir + "/a.gz", "{}");
  auto src = ByteSource::Open(dir + "/a.gz", GetParam());
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_STREQ((*src)->inflater_name(), GetParam() == GzipBackend::kIsal ? "isal" : "zlib");
}

// The real traces (plain and gzip) inflate to the same bytes through ISA-L and zlib, and to what
// zlib's own gzread (an independent reader) gives.
TEST(ByteSourceBackends, RealGzipTracesInflateIdenticallyWithIsalAndZlib) {
  int files = 0;
  for (const char* rel : {"traces/kineto", "traces/HolisticTraceAnalysis"}) {
    const std::string root = SharedData(rel);
    std::vector<std::string> stack = {root};
    while (!stack.empty() && files < 6) {
      std::string d = stack.back();
      stack.pop_back();
      auto names = ListDirectory(d);
      if (!names.ok()) continue;
      for (const std::string& name : *names) {
        const std::string p = d + "/" + name;
        if (IsDirectory(p)) {
          stack.push_back(p);
          continue;
        }
        if (p.size() < 3 || p.compare(p.size() - 3, 3, ".gz") != 0) continue;
        Status st;
        const std::string isal = ReadAll(p, 1 << 16, &st, GzipBackend::kIsal);
        ASSERT_TRUE(st.ok()) << st.message();
        const std::string zlib = ReadAll(p, 1 << 16, &st, GzipBackend::kZlib);
        ASSERT_TRUE(st.ok()) << st.message();
        EXPECT_EQ(isal, zlib) << p;
        std::string oracle;
        gzFile g = gzopen(p.c_str(), "rb");
        ASSERT_NE(g, nullptr) << p;
        char buf[1 << 16];
        int n;
        while ((n = gzread(g, buf, sizeof buf)) > 0) oracle.append(buf, static_cast<size_t>(n));
        gzclose(g);
        EXPECT_EQ(isal.size(), oracle.size()) << p;
        EXPECT_TRUE(isal == oracle) << p;
        if (++files >= 6) break;
      }
    }
  }
  EXPECT_GT(files, 0) << "no .gz trace found under ../shared/data/traces";
}

TEST(ByteSourceHint, TextBytesHintIsTheFileSizeOrTheGzipTrailersSize) {
  const std::string dir = TempDir();
  std::string text;
  while (text.size() < 300'000) text += "{\"ph\": \"X\", \"name\": \"aten::mm\"},\n";
  const std::string plain = dir + "/t.json";
  WriteFile(plain, text);
  auto p = ByteSource::Open(plain);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->text_bytes_hint(), static_cast<int64_t>(text.size()));
  // Compressible text: the trailer's ISIZE, the decompressed size.
  const std::string gz = dir + "/t.json.gz";
  WriteGzip(gz, text);
  const int64_t gz_bytes = static_cast<int64_t>(Slurp(gz).size());
  ASSERT_LT(8 * gz_bytes, static_cast<int64_t>(text.size()));
  auto g = ByteSource::Open(gz);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)->text_bytes_hint(), static_cast<int64_t>(text.size()));
  // Incompressible bytes: at least 8x the compressed size.
  std::mt19937 rng(5);
  std::string noise(100'000, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  const std::string nz = dir + "/n.gz";
  WriteGzip(nz, noise);
  auto n = ByteSource::Open(nz);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ((*n)->text_bytes_hint(), 8 * static_cast<int64_t>(Slurp(nz).size()));
  // Reading is unchanged by the hint.
  Status status;
  EXPECT_EQ(ReadAll(gz, 4096, &status), text);
  EXPECT_TRUE(status.ok()) << status.message();
}

}  // namespace
}  // namespace trainprof::importers
