#include "model/run_metadata.h"

#include <gtest/gtest.h>

namespace trainprof::model {
namespace {

TEST(RunMetadataTest, RoundTripsThroughJson) {
  RunMetadata m;
  m.run_id = "20261130T000000Z-demo-abcd";
  m.name = "demo";
  m.command = {"python", "train.py", "--epochs", "3"};
  m.start_ns = 1'700'000'000'000'000'000;
  m.end_ns = m.start_ns + 5;
  m.exit_status = 0;
  m.tags["team"] = "vision";
  auto back = RunMetadataFromJson(RunMetadataToJson(m), "run.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->command, m.command);
  EXPECT_EQ(back->end_ns, m.end_ns);
  EXPECT_EQ(back->exit_status, 0);
  EXPECT_EQ(back->tags.at("team"), "vision");
  EXPECT_FALSE(back->instance_count.has_value());
}

TEST(RunMetadataTest, NewerFormatIsRefusedWithAClearMessage) {
  auto r = RunMetadataFromJson(R"({"format_version": 99, "run_id": "x", "start_ns": 1})",
                               "/runs/a/run.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("/runs/a/run.json"), std::string::npos);
  EXPECT_NE(r.status().message().find("99"), std::string::npos);
}

TEST(RunMetadataTest, BadJsonAndWrongTypesAreDataLoss) {
  EXPECT_EQ(RunMetadataFromJson("{not json", "f").status().code(), StatusCode::kDataLoss);
  auto r = RunMetadataFromJson(R"({"format_version": 1, "run_id": 5, "start_ns": 1})", "f");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("run_id"), std::string::npos);
}

TEST(RunMetadataTest, NodeInfoKeepsAbsentAsAbsent) {
  NodeInfo n;
  n.node = "algo-1";
  n.gpus.push_back({0, "NVIDIA H200", "GPU-1", std::nullopt});
  auto back = NodeInfoFromJson(NodeInfoToJson(n), "meta");
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->cpu_cores.has_value());
  ASSERT_EQ(back->gpus.size(), 1u);
  EXPECT_FALSE(back->gpus[0].memory_total_bytes.has_value());
}

TEST(RunMetadataTest, DetectsThisMachine) {
  NodeInfo n = DetectLocalNode("");
  EXPECT_FALSE(n.hostname.empty());
  EXPECT_EQ(n.node, n.hostname);
  ASSERT_TRUE(n.cpu_cores.has_value());
  EXPECT_GT(*n.cpu_cores, 0);
}

}  // namespace
}  // namespace trainprof::model

namespace trainprof::model {
namespace {

// Issue 20, item 6: run.json (and the report, which shows it) held the full command line,
// secrets included. Well-known secret shapes are redacted before it is written; the rest of
// the command stays as typed.
TEST(RunMetadataTest, SecretsInTheCommandLineAreRedacted) {
  RunMetadata m;
  m.run_id = "r";
  m.start_ns = 1;
  const std::string key = "AKIA" + std::string("IOSFODNN7EXAMPLE");
  m.command = {"env",
               "WANDB_API_KEY=abc123",
               "HF_TOKEN=hf_xyz",
               "DB_PASSWORD=hunter2",
               "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI",
               "EPOCHS=3",
               "python",
               "train.py",
               "--api-key=k-123",
               "--token",
               "t-456",
               "--hf_token=t-789",
               "--password",
               "p@ss",
               "--client-secret=s-1",
               "--epochs",
               "3",
               "--data=s3://user:pw123@bucket/x",
               "--aws-key-id=" + key,
               "--lr=0.1"};
  auto back = RunMetadataFromJson(RunMetadataToJson(m), "run.json");
  ASSERT_TRUE(back.ok());
  const std::vector<std::string> expected = {"env",
                                             "WANDB_API_KEY=<redacted>",
                                             "HF_TOKEN=<redacted>",
                                             "DB_PASSWORD=<redacted>",
                                             "AWS_SECRET_ACCESS_KEY=<redacted>",
                                             "EPOCHS=3",
                                             "python",
                                             "train.py",
                                             "--api-key=<redacted>",
                                             "--token",
                                             "<redacted>",
                                             "--hf_token=<redacted>",
                                             "--password",
                                             "<redacted>",
                                             "--client-secret=<redacted>",
                                             "--epochs",
                                             "3",
                                             "--data=s3://user:<redacted>@bucket/x",
                                             "--aws-key-id=<redacted>",
                                             "--lr=0.1"};
  EXPECT_EQ(back->command, expected);
  const std::string text = RunMetadataToJson(m);
  for (const char* secret : {"abc123", "hf_xyz", "hunter2", "wJalrXUtnFEMI", "k-123", "t-456",
                             "t-789", "p@ss", "s-1", "pw123", "IOSFODNN7EXAMPLE"}) {
    EXPECT_EQ(text.find(secret), std::string::npos) << secret;
  }
}

}  // namespace
}  // namespace trainprof::model
