// Hostile Kineto traces (issue 20, items 2 and 3): args nested a million levels deep, and one
// string of hundreds of MB inside a small gzip file. The import must stay small in memory,
// count or name what is wrong, and store nothing a reader cannot handle.

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <functional>
#include <iostream>
#include <random>
#include <string>

#include "base/json_dump.h"
#include "importers/common/import_counters.h"
#include "importers/common/test_util.h"
#include "importers/kineto/kineto_importer.h"
#include "store/run_reader.h"

namespace trainprof::importers::kineto {
namespace {

using testing::TempDir;
using testing::WriteFile;

std::string Nested(int depth) {
  std::string s;
  s.reserve(static_cast<size_t>(depth) * 6 + 8);
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s.append(static_cast<size_t>(depth), '}');
  return s;
}

std::string Event(const std::string& name, int64_t ts_us, const std::string& args) {
  return "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"" + name +
         "\",\"pid\":1,\"tid\":1,\"ts\":" + std::to_string(ts_us) + ",\"dur\":5,\"args\":" + args +
         "}";
}

TEST(KinetoHostileTest, ArgsNestedDeeperThanTheLimitAreCountedNotStored) {
  std::string dir = TempDir();
  const int64_t t0 = 1'700'000'000'000'000;  // µs
  // 1 M levels (6 MB), the limit exactly, and one level more; the deep one in both parse
  // paths (the second has an escaped key, which the in-place path leaves to the general one).
  std::string deep = Nested(1'000'000);
  std::string trace = "{\"traceEvents\":[" + Event("deep", t0, deep) + "," +
                      Event("at_limit", t0 + 10, Nested(kMaxArgsDepth)) + "," +
                      Event("over_limit", t0 + 20, Nested(kMaxArgsDepth + 1)) + "," +
                      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"deep2\",\"pid\":1,\"tid\":1," +
                      "\"ts\":" + std::to_string(t0 + 30) + ",\"dur\":5,\"a\\u0072gs\":1," +
                      "\"args\":" + deep + "}]}";
  WriteFile(dir + "/t.json", trace);
  KinetoImportOptions o;
  o.traces = {dir + "/t.json"};
  o.out = dir + "/run";
  auto r = ImportKineto(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->files.size(), 1u);
  EXPECT_EQ(r->files[0].events_stored, 4);
  EXPECT_EQ(r->files[0].problems.at(dq::kDeepArgs), 3);
  auto reader = store::RunReader::Open(o.out);
  ASSERT_TRUE(reader.ok());
  auto events = (*reader)->Events({});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 4u);
  for (size_t i = 0; i < events->size(); ++i) {
    const std::string& name = events->names.at(events->name[i]);
    if (name == "at_limit") {
      EXPECT_EQ(events->args[i], Nested(kMaxArgsDepth));
    } else {
      EXPECT_EQ(events->args[i], "") << name;
    }
  }
}

TEST(KinetoHostileTest, JsonNestingCheckIsIterativeAndIgnoresBracketsInStrings) {
  EXPECT_FALSE(JsonNestingExceeds("{\"a\":\"{{{{{{{{{{[[[[[[\"}", 2));
  EXPECT_FALSE(JsonNestingExceeds("{\"a\":\"\\\"{{{{\"}", 1));
  EXPECT_TRUE(JsonNestingExceeds("{\"a\":[{}]}", 2));
  EXPECT_FALSE(JsonNestingExceeds("{\"a\":[{}]}", 3));
  EXPECT_TRUE(JsonNestingExceeds(Nested(5'000'000), 64));
}

// The bracket count that settles most texts before the byte loop, against the byte loop alone
// on generated texts of brackets, quotes, escapes and other bytes (every byte value too).
TEST(KinetoHostileTest, JsonNestingCheckAgreesWithThePlainLoop) {
  auto plain = [](std::string_view text, int limit) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (c == '\\') {
          ++i;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        if (++depth > limit) return true;
      } else if (c == '}' || c == ']') {
        --depth;
      }
    }
    return false;
  };
  std::mt19937 rng(20261204);
  const std::string alphabet = "{{[[}]\"\\a:,";
  int exceeded = 0;
  for (int n = 0; n < 20000; ++n) {
    // One text in ten is long (up to 250 words of 8 bytes, several sums of the lane counts) with
    // a limit of hundreds of brackets.
    const bool long_text = n % 10 == 0;
    std::string text(rng() % (long_text ? 2000 : 200), ' ');
    const bool any_byte = n % 4 == 0;
    for (char& c : text) {
      c = any_byte ? static_cast<char>(rng()) : alphabet[rng() % alphabet.size()];
    }
    const int limit = static_cast<int>(long_text ? rng() % 800 : rng() % 12);
    const bool want = plain(text, limit);
    exceeded += want;
    ASSERT_EQ(JsonNestingExceeds(text, limit), want) << "limit " << limit << ": " << text;
  }
  // Only brackets, past where the lane counts are summed (every 64 words of 8 bytes): nested
  // exactly as deep as the text is long.
  for (size_t length : {size_t{511}, size_t{512}, size_t{513}, size_t{4100}}) {
    std::string text;
    for (size_t k = 0; k < length; ++k) text.push_back(k % 3 == 0 ? '[' : '{');
    const int depth = static_cast<int>(length);
    EXPECT_TRUE(JsonNestingExceeds(text, depth - 1)) << length;
    EXPECT_FALSE(JsonNestingExceeds(text, depth)) << length;
  }
  EXPECT_GT(exceeded, 1000);  // both answers were exercised
  EXPECT_LT(exceeded, 19000);
}

struct ChildResult {
  int exit_code = -1;
  int signal = 0;
  long max_rss_kb = 0;
  std::string message;
};

// Runs `fn` in a forked child limited to 2 GiB of address space; its peak RSS and message.
ChildResult RunInChild(const std::function<bool(std::string*)>& fn) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
#if !defined(__SANITIZE_ADDRESS__)
    rlimit lim{size_t{2} << 30, size_t{2} << 30};
    setrlimit(RLIMIT_AS, &lim);
#endif
    std::string msg;
    int code = 1;
    try {
      code = fn(&msg) ? 0 : 1;
    } catch (const std::exception& e) {
      msg = std::string("exception: ") + e.what();
      code = 2;
    }
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(code);
  }
  close(fds[1]);
  ChildResult r;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.message.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  r.max_rss_kb = ru.ru_maxrss;
  std::cout << "child: peak RSS " << r.max_rss_kb / 1024 << " MiB\n";
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

// One gzip member holding `text`.
std::string GzipMember(const std::string& text) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(KinetoHostileTest, HugeStringInASmallGzipIsRefusedInSmallMemory) {
  // A 512 MB name inside a file of ~1 MB: concatenated gzip members (valid gzip) of one 1 MiB
  // block of 'a' each, between the start and the end of an event.
  std::string dir = TempDir();
  std::string path = dir + "/bomb.json.gz";
  std::string file = GzipMember("{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"");
  const std::string block = GzipMember(std::string(size_t{1} << 20, 'a'));
  for (int i = 0; i < 512; ++i) file += block;
  file += GzipMember("\",\"ts\":1,\"dur\":1,\"pid\":1,\"tid\":1}]}");
  WriteFile(path, file);
  ASSERT_LT(file.size(), 2u << 20);
  ChildResult r = RunInChild([&](std::string* msg) {
    KinetoImportOptions o;
    o.traces = {path};
    o.out = dir + "/run";
    auto result = ImportKineto(o);
    *msg = result.ok() ? "imported" : result.status().message();
    return !result.ok();
  });
  EXPECT_EQ(r.exit_code, 0) << "signal " << r.signal << ": " << r.message;
  EXPECT_NE(r.message.find("bomb.json.gz"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("larger than 64 MiB"), std::string::npos) << r.message;
  EXPECT_LT(r.max_rss_kb, 400 * 1024) << r.message;
}

}  // namespace
}  // namespace trainprof::importers::kineto
