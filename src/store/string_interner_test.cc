#include "store/string_interner.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace trainprof::store {
namespace {

TEST(StringInternerTest, IdsAreDenseInFirstSeenOrderAndStable) {
  StringInterner s;
  EXPECT_EQ(s.Intern(""), 0u);
  EXPECT_EQ(s.Intern("forward"), 1u);
  EXPECT_EQ(s.Intern("backward"), 2u);
  EXPECT_EQ(s.Intern("forward"), 1u);
  EXPECT_EQ(s.size(), 2u);
  // Many more strings than the first table holds, of every length (one longer than a block
  // share gets its own block); earlier views stay valid while the table grows.
  std::string_view first = s.text(1);
  std::vector<std::string> texts;
  for (int i = 0; i < 5000; ++i) {
    texts.push_back("kernel_" + std::string(static_cast<size_t>(i % 97), 'x') + std::to_string(i));
  }
  texts.push_back(std::string(40000, 'L'));
  for (const auto& t : texts) s.Intern(t);
  EXPECT_EQ(first, "forward");
  for (size_t i = 0; i < texts.size(); ++i) {
    const uint32_t id = static_cast<uint32_t>(i + 3);
    EXPECT_EQ(s.Intern(texts[i]), id);
    EXPECT_EQ(s.text(id), texts[i]);
  }
  EXPECT_EQ(s.text(0), "");
}

TEST(StringInternerTest, AddWithIdTakesOnlyTheNextDenseId) {
  StringInterner s;
  EXPECT_TRUE(s.AddWithId(1, "a"));
  EXPECT_FALSE(s.AddWithId(3, "c"));  // a gap
  EXPECT_FALSE(s.AddWithId(2, "a"));  // already there
  EXPECT_FALSE(s.AddWithId(2, ""));
  EXPECT_TRUE(s.AddWithId(2, "b"));
  EXPECT_EQ(s.Intern("b"), 2u);
  EXPECT_EQ(s.Intern("c"), 3u);
  s.Clear();
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.Intern("c"), 1u);
}

TEST(StringInternerTest, HashSeparatesNearStrings) {
  EXPECT_NE(HashBytes("a"), HashBytes("b"));
  EXPECT_NE(HashBytes("abcdefgh"), HashBytes(std::string_view("abcdefgh\0", 9)));
  EXPECT_NE(HashBytes(""), HashBytes(std::string_view("\0", 1)));
}

}  // namespace
}  // namespace trainprof::store
