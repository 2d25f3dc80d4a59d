#include "base/strings.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

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

}  // namespace
}  // namespace trainprof
