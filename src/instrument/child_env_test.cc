#include "instrument/child_env.h"

#include <gtest/gtest.h>

namespace trainprof::instrument {
namespace {

TEST(ChildEnvTest, PrependsTheHookDirectoryAndSetsTheRunVariables) {
  ChildEnvOptions o;
  o.run_dir = "/runs/r1";
  o.node = "host-a";
  o.python_package_dir = "/site/trainprof";
  o.detail_steps = "10-20";
  auto env = ChildEnvironment(o, {{"PYTHONPATH", "/user/lib:/site/trainprof/_hook"}});
  EXPECT_EQ(env["PYTHONPATH"], "/site/trainprof/_hook:/user/lib");
  EXPECT_EQ(env[kEnvRunDir], "/runs/r1");
  EXPECT_EQ(env[kEnvNode], "host-a");
  EXPECT_EQ(env[kEnvAuto], "1");
  EXPECT_EQ(env[kEnvDetailSteps], "10-20");
  EXPECT_EQ(env.count(kEnvPythonProfile), 0u);
}

TEST(ChildEnvTest, NoAutoAndPackageDirFromTheParent) {
  ChildEnvOptions o;
  o.run_dir = "/runs/r2";
  o.auto_instrument = false;
  auto env = ChildEnvironment(o, {{kEnvPackageDir, "/pkg/trainprof"}});
  EXPECT_EQ(env["PYTHONPATH"], "/pkg/trainprof/_hook");
  EXPECT_EQ(env[kEnvAuto], "0");
  EXPECT_EQ(ChildEnvironment(o, {}).count("PYTHONPATH"), 0u);
}

TEST(ChildEnvTest, TimeWindowsBecomeEpochNanosecondsAndBadSpecsSayWhy) {
  const int64_t origin = 1'764'576'000'000'000'000;  // 2025-12-01 08:00 UTC
  auto w = ParseTimeWindow("--detail-time", "60+10", origin);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(
      *w, std::to_string(origin + 60'000'000'000) + "-" + std::to_string(origin + 70'000'000'000));
  w = ParseTimeWindow("--detail-time", "0.5+2.25", origin);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w,
            std::to_string(origin + 500'000'000) + "-" + std::to_string(origin + 2'750'000'000));
  // A Unix time is taken as it is.
  w = ParseTimeWindow("--detail-time", "1764576000+30", 0);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, "1764576000000000000-1764576030000000000");
  for (const char* bad : {"", "60", "60+0", "60+", "+10", "a+1", "1-2", "60+-1", "1.+2"}) {
    auto r = ParseTimeWindow("--detail-time", bad, origin);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("START+SECONDS"), std::string::npos);
    }
  }
  ChildEnvOptions o;
  o.run_dir = "/runs/r3";
  o.detail_time = "1-2";
  o.python_profile_time = "3-4";
  auto env = ChildEnvironment(o, {});
  EXPECT_EQ(env[kEnvDetailTime], "1-2");
  EXPECT_EQ(env[kEnvPythonProfileTime], "3-4");
}

TEST(ChildEnvTest, StepRangesAreCheckedBeforeTheJobStarts) {
  EXPECT_TRUE(CheckStepRange("--detail-steps", "10-20").ok());
  EXPECT_TRUE(CheckStepRange("--detail-steps", "7").ok());
  for (const char* bad : {"", "20-10", "a-b", "-3", "5-", "1.5"}) {
    Status st = CheckStepRange("--detail-steps", bad);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("--detail-steps"), std::string::npos);
  }
}

}  // namespace
}  // namespace trainprof::instrument
