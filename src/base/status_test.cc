#include "base/status.h"

#include <gtest/gtest.h>

namespace trainprof {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  TP_ASSIGN_OR_RETURN(int half, Half(x));
  TP_ASSIGN_OR_RETURN(*out, Half(half));
  return OkStatus();
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(OkStatus().ok());
  Status s = NotFound("run.json");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "not found: run.json");
  EXPECT_EQ(s.WithContext("open").message(), "open: run.json");
}

TEST(StatusTest, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}

}  // namespace
}  // namespace trainprof
