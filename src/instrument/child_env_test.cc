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

}  // namespace
}  // namespace trainprof::instrument
