#include "base/strings.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <string_view>

namespace trainprof {
namespace {

TEST(StrFormatTest, FormatsShortAndLongResultsWhole) {
  EXPECT_EQ(StrFormat("%.2f %s", 1.005, "x"), "1.00 x");
  EXPECT_EQ(StrFormat("%s", ""), "");
  // Longer than the 128-byte first attempt (and the old fixed buffers of 64-512 bytes): whole.
  const std::string long_text(5000, 'k');
  const std::string got = StrFormat("[%s] %d", long_text.c_str(), 42);
  EXPECT_EQ(got.size(), long_text.size() + 5);
  EXPECT_EQ(got, "[" + long_text + "] 42");
  // Exactly at the boundary: 127 and 128 characters.
  for (size_t n : {127u, 128u, 129u}) {
    EXPECT_EQ(StrFormat("%s", std::string(n, 'a').c_str()).size(), n);
  }
  // The same as snprintf for what fits.
  char buf[64];
  std::snprintf(buf, sizeof buf, "%08.3f|%-5d|%x", 3.14159, 7, 255);
  EXPECT_EQ(StrFormat("%08.3f|%-5d|%x", 3.14159, 7, 255), buf);
}

// FindSubstring against std::string_view::find: texts of every length around the 16-byte blocks,
// needles of 1 to 20 bytes, present (at every position), absent, or almost present (first and
// last bytes right, a middle one wrong), over a small alphabet so that partial matches abound.
TEST(StringsTest, FindSubstringEqualsFind) {
  std::mt19937 rng(20261203);
  auto random_text = [&](size_t len, const char* alphabet, size_t k) {
    std::string out(len, ' ');
    for (char& c : out) c = alphabet[rng() % k];
    return out;
  };
  int checked = 0;
  for (size_t len = 0; len <= 70; ++len) {
    for (size_t n = 0; n <= 20; ++n) {
      for (int trial = 0; trial < 6; ++trial) {
        const std::string text = random_text(len, "ab\"c:", 5);
        std::string needle = random_text(n, "ab\"c:", 5);
        if (trial % 3 == 1 && n <= len && len > 0) {  // taken from the text
          needle = text.substr(rng() % (len - n + 1), n);
        } else if (trial % 3 == 2 && n >= 3 && n <= len) {  // first and last right, not a middle
          const size_t at = rng() % (len - n + 1);
          needle = text.substr(at, n);
          needle[1 + rng() % (n - 2)] = 'z';
        }
        ASSERT_EQ(FindSubstring(text, needle), std::string_view(text).find(needle))
            << "text '" << text << "' needle '" << needle << "'";
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 71 * 21 * 6);
  // A JSON args text as a trace has it.
  const std::string args =
      "{\"External id\": 12, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, "
      "\"correlation\": 160584, \"registers per thread\": 32}";
  EXPECT_EQ(FindSubstring(args, "\"correlation\""), args.find("\"correlation\""));
  EXPECT_EQ(FindSubstring(args, "\"stream\""), args.find("\"stream\""));
  EXPECT_EQ(FindSubstring(args, "\"absent\""), std::string_view::npos);
}

}  // namespace
}  // namespace trainprof
