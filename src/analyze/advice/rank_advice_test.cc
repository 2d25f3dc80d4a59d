// Generated jobs with a known truth, written through the real store writer and read back:
// what `trainprof analyze` averages and advises must come out exactly as planted.

#include "analyze/advice/rank_advice.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "base/test_dir.h"
#include "model/event.h"
#include "store/run_directory.h"

namespace trainprof::analyze::advice {
namespace {

namespace tr = trace;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'796'040'000LL * 1'000'000'000LL;

std::string TempDir() { return MakeTestDir("advice_test"); }

struct Job {
  int cores = 8;
  int gpus = 0;
  int64_t steps = 45;
  std::vector<int64_t> traced = {10, 11};  // steps with an operator trace
  int64_t data_wait_ms = 10, forward_ms = 60, backward_ms = 110, optimizer_ms = 10;  // + 1 other
  int64_t conv_ms = 150;  // the traced steps' aten::conv2d
  int64_t torch_threads = 2;
  int64_t num_workers = 0;
  double cpu_util = 0.25;
};

// A CPU job as `trainprof record` stores it: every step has its instrumented parts (191 ms:
// 10 data_wait + 60 forward + 110 backward + 10 optimizer + 1 unattributed); two steps also
// carry an operator trace in which, of the 191 ms, 150 ms are one aten::conv2d (with its
// nested aten::convolution), 30 ms one aten::addmm, 5 ms aten::relu, and 6 ms run outside any
// operator.
std::string WriteJob(const Job& j) {
  std::string dir = TempDir();
  model::RunMetadata meta;
  meta.run_id = "advice-test";
  meta.name = "advice";
  meta.start_ns = kT0;
  meta.end_ns = kT0 + 60'000 * kMs;
  meta.source = "record";
  EXPECT_TRUE(store::WriteRunMetadata(dir, meta).ok());
  model::NodeInfo info;
  info.node = "host";
  info.hostname = "host";
  info.cpu_model = "Test CPU";
  info.cpu_cores = j.cores;
  for (int g = 0; g < j.gpus; ++g) info.gpus.push_back({g, "Test GPU", "GPU-x", 80LL << 30});
  auto w = store::OpenNodeWriter(dir, info);
  EXPECT_TRUE(w.ok());
  auto& writer = **w;
  auto span = [&](const std::string& name, const std::string& cat, int64_t start, int64_t dur,
                  int64_t step) {
    model::Event e;
    e.name = name;
    e.category = cat;
    e.start_ns = start;
    e.duration_ns = dur;
    e.pid = 100;
    e.tid = 100;
    if (step >= 0) {
      e.step = step;
      e.mode = "train";
    }
    writer.AppendEvent(std::move(e));
  };
  const int64_t step_ms = j.data_wait_ms + j.forward_ms + j.backward_ms + j.optimizer_ms + 1;
  for (int64_t s = 0; s < j.steps; ++s) {
    const int64_t t = kT0 + 1000 * kMs + s * (step_ms + 9) * kMs;
    span("step", model::kCategoryStep, t, step_ms * kMs, s);
    span("data_wait", model::kCategoryDataWait, t, j.data_wait_ms * kMs, s);
    span("forward", model::kCategoryForward, t + j.data_wait_ms * kMs, j.forward_ms * kMs, s);
    span("backward", model::kCategoryBackward, t + (j.data_wait_ms + j.forward_ms) * kMs,
         j.backward_ms * kMs, s);
    span("optimizer", model::kCategoryOptimizer,
         t + (j.data_wait_ms + j.forward_ms + j.backward_ms) * kMs, j.optimizer_ms * kMs, s);
    if (std::find(j.traced.begin(), j.traced.end(), s) == j.traced.end()) continue;
    const int64_t c = j.conv_ms;
    span("aten::conv2d", "cpu_op", t + 2 * kMs, c * kMs, -1);
    span("aten::convolution", "cpu_op", t + 3 * kMs, (c - 2) * kMs, -1);
    span("aten::addmm", "cpu_op", t + (2 + c) * kMs, 30 * kMs, -1);
    span("aten::relu", "cpu_op", t + (32 + c) * kMs, 5 * kMs, -1);
  }
  for (int64_t i = 0; i < 100; ++i) {
    const int64_t ts = kT0 + i * 500 * kMs;
    writer.Append(writer.Series("cpu_utilization_ratio", "total"), ts, j.cpu_util);
    for (int g = 0; g < j.gpus; ++g) {
      writer.Append(writer.Series("gpu_utilization_ratio", "gpu" + std::to_string(g)), ts, 0.0);
    }
  }
  writer.Annotate(kT0 + 1000 * kMs, "torch.num_threads", std::to_string(j.torch_threads));
  writer.Annotate(kT0 + 1000 * kMs, "dataloader.0",
                  R"({"num_workers": )" + std::to_string(j.num_workers) + "}");
  EXPECT_TRUE(writer.Close().ok());
  return dir;
}

struct Analyzed {
  std::unique_ptr<store::RunReader> reader;
  store::EventTable events;
  std::vector<tr::RankTrace> traces;
  std::vector<tr::RankAnalysis> analyses;
  std::vector<RankSummary> summaries;
};

std::unique_ptr<Analyzed> Analyze(const std::string& dir) {
  auto a = std::make_unique<Analyzed>();
  auto reader = store::RunReader::Open(dir);
  EXPECT_TRUE(reader.ok());
  a->reader = std::move(reader).value();
  auto events = a->reader->Events({});
  EXPECT_TRUE(events.ok());
  a->events = std::move(events).value();
  a->traces = tr::SplitByRank(a->events);
  for (const auto& t : a->traces) a->analyses.push_back(tr::AnalyzeRank(t, {}));
  auto steps = a->reader->Steps();
  EXPECT_TRUE(steps.ok());
  auto s = SummarizeRun(*a->reader, *steps, a->traces, a->analyses);
  EXPECT_TRUE(s.ok()) << s.status().message();
  a->summaries = std::move(s).value();
  return a;
}

const Advice* Find(const RankSummary& s, const std::string& id) {
  for (const Advice& a : s.advice) {
    if (a.id == id) return &a;
  }
  return nullptr;
}

TEST(RankAdviceTest, CpuJobAveragesTracedStepsAndAdvisesForTheCpu) {
  auto a = Analyze(WriteJob({}));
  ASSERT_EQ(a->summaries.size(), 1u);
  const RankSummary& s = a->summaries[0];
  EXPECT_EQ(s.steps_total, 45);
  EXPECT_EQ(s.steps_with_operators, 2);
  // The operator average is over the 2 traced steps: the operators cover 2..187 ms of each
  // 191 ms step (conv 150 + addmm 30 + relu 5 = 185 ms cpu_exec), 6 ms outside them.
  ASSERT_TRUE(s.operator_average.has_value());
  EXPECT_EQ(s.operator_average->step_ns, 191 * kMs);
  EXPECT_EQ(s.operator_average->cpu_exec_ns, 185 * kMs);
  EXPECT_EQ(s.operator_average->other_ns, 6 * kMs);
  // The instrumented parts, over all 45 steps.
  ASSERT_TRUE(s.phase_average.has_value());
  EXPECT_EQ(s.phase_average->steps, 45);
  EXPECT_EQ(s.phase_average->data_wait_ns, 10 * kMs);
  EXPECT_EQ(s.phase_average->forward_ns, 60 * kMs);
  EXPECT_EQ(s.phase_average->backward_ns, 110 * kMs);
  EXPECT_EQ(s.phase_average->optimizer_ns, 10 * kMs);
  EXPECT_EQ(s.phase_average->other_ns, 1 * kMs);
  // The machine: 8 cores, no GPU.
  EXPECT_FALSE(s.machine.HasGpu());
  EXPECT_EQ(s.machine.cpu_cores, 8);
  EXPECT_EQ(s.machine.torch_threads, 2);
  EXPECT_NEAR(*s.machine.cpu_utilization_mean, 0.25, 1e-12);
  EXPECT_EQ(s.mix.conv_ns, 2 * 150 * kMs);  // nested aten::convolution counted once
  EXPECT_EQ(s.mix.matmul_ns, 2 * 30 * kMs);
  EXPECT_EQ(s.mix.top_level_ops, 2 * 3);
  // No GPU advice on a machine without one.
  for (const Advice& x : s.advice) {
    EXPECT_EQ(x.text.find("GPU is idle"), std::string::npos) << x.text;
    EXPECT_EQ(x.text.find("Move work to the GPU"), std::string::npos) << x.text;
  }
  // 2 threads of 8 cores at 25 % CPU: set_num_threads(8 - 0 workers).
  const Advice* threads = Find(s, "torch_threads");
  ASSERT_NE(threads, nullptr);
  EXPECT_NE(threads->text.find("torch.set_num_threads(8)"), std::string::npos) << threads->text;
  EXPECT_EQ(threads->evidence["torch_threads"], 2);
  EXPECT_EQ(threads->evidence["cpu_cores"], 8);
  // conv 150 of 191 ms = 78.53 %: channels_last; conv + addmm 180 / 191 = 94.24 %: bf16.
  const Advice* cl = Find(s, "channels_last");
  ASSERT_NE(cl, nullptr);
  EXPECT_DOUBLE_EQ(cl->evidence["convolution_share"].get<double>(), 0.7853);
  EXPECT_DOUBLE_EQ(cl->evidence["convolution_ms_per_step"].get<double>(), 150.0);
  const Advice* bf16 = Find(s, "bf16_autocast_cpu");
  ASSERT_NE(bf16, nullptr);
  EXPECT_DOUBLE_EQ(bf16->evidence["matmul_share"].get<double>(), 0.1571);
  // 185 / 191 = 96.86 % in CPU operators: CPU-bound. 6 / 191 = 3.1 % outside operators: no
  // torch.compile on this evidence; 10 / 191 = 5.2 % data wait: no loader advice.
  const Advice* bound = Find(s, "cpu_bound");
  ASSERT_NE(bound, nullptr);
  EXPECT_DOUBLE_EQ(bound->evidence["cpu_exec_share"].get<double>(), 0.9686);
  EXPECT_EQ(Find(s, "torch_compile"), nullptr);
  EXPECT_EQ(Find(s, "data_loader_workers"), nullptr);
  // The analyses get the traced-only average and the advice as their recommendations.
  ApplyToAnalyses(a->summaries, &a->analyses);
  EXPECT_EQ(a->analyses[0].step_average->cpu_exec_ns, 185 * kMs);
  EXPECT_EQ(a->analyses[0].recommendations.size(), s.advice.size());
}

TEST(RankAdviceTest, PlantedDataLoaderStall) {
  // 80 ms of the 191 ms step waiting for data (41.9 %) with num_workers=0: loader advice with
  // the numbers; the threads already use the cores: no thread advice.
  Job j;
  j.data_wait_ms = 80;
  j.forward_ms = 30;
  j.backward_ms = 70;
  j.torch_threads = 8;
  auto a = Analyze(WriteJob(j));
  const RankSummary& s = a->summaries[0];
  const Advice* dl = Find(s, "data_loader_workers");
  ASSERT_NE(dl, nullptr);
  EXPECT_DOUBLE_EQ(dl->evidence["data_wait_share"].get<double>(), 0.4188);
  EXPECT_DOUBLE_EQ(dl->evidence["data_wait_ms"].get<double>(), 80.0);
  EXPECT_EQ(dl->evidence["steps"], 45);
  EXPECT_EQ(dl->evidence["num_workers"], 0);
  EXPECT_NE(dl->text.find("num_workers=0"), std::string::npos) << dl->text;
  EXPECT_EQ(Find(s, "torch_threads"), nullptr);
}

TEST(RankAdviceTest, PlantedPythonOverheadAndOversubscribedThreads) {
  // Operators cover 2..97 ms of the 191 ms traced step (conv 60 + addmm 30 + relu 5 = 95 ms):
  // 96 ms (50.26 %) run outside any operator, 3 top-level operators per step: torch.compile.
  // torch runs 16 threads on 8 cores: set_num_threads(8).
  Job j;
  j.conv_ms = 60;
  j.torch_threads = 16;
  auto a = Analyze(WriteJob(j));
  const RankSummary& s = a->summaries[0];
  EXPECT_EQ(s.operator_average->cpu_exec_ns, 95 * kMs);
  const Advice* tc = Find(s, "torch_compile");
  ASSERT_NE(tc, nullptr);
  EXPECT_DOUBLE_EQ(tc->evidence["outside_operators_share"].get<double>(), 0.5026);
  EXPECT_DOUBLE_EQ(tc->evidence["top_level_ops_per_step"].get<double>(), 3.0);
  const Advice* th = Find(s, "torch_threads");
  ASSERT_NE(th, nullptr);
  EXPECT_NE(th->text.find("16 threads but the machine has 8 cores"), std::string::npos) << th->text;
  EXPECT_NE(th->text.find("torch.set_num_threads(8)"), std::string::npos) << th->text;
  // 95 / 191 = 49.7 % in CPU operators: not CPU-bound by the 50 % rule; conv 60 / 191 =
  // 31.4 % > 30 %: channels_last; conv + addmm 90 / 191 = 47.1 %: no bf16.
  EXPECT_EQ(Find(s, "cpu_bound"), nullptr);
  ASSERT_NE(Find(s, "channels_last"), nullptr);
  EXPECT_DOUBLE_EQ(Find(s, "channels_last")->evidence["convolution_share"].get<double>(), 0.3141);
  EXPECT_EQ(Find(s, "bf16_autocast_cpu"), nullptr);
}

TEST(RankAdviceTest, GpuNodeGetsGpuAdviceNotCpuAdvice) {
  // The same CPU-heavy step on a node with 2 GPUs (idle): the GPU-idle advice applies (the
  // model runs on the CPU while GPUs sit idle), the CPU-only advice does not.
  Job j;
  j.gpus = 2;
  auto a = Analyze(WriteJob(j));
  const RankSummary& s = a->summaries[0];
  EXPECT_TRUE(s.machine.HasGpu());
  EXPECT_EQ(s.machine.gpu_devices_sampled, 2);
  const Advice* idle = Find(s, "gpu_idle_cpu_bound");
  ASSERT_NE(idle, nullptr);
  EXPECT_DOUBLE_EQ(idle->evidence["gpu_idle_share"].get<double>(), 1.0);
  EXPECT_EQ(Find(s, "channels_last"), nullptr);
  EXPECT_EQ(Find(s, "torch_threads"), nullptr);
}

}  // namespace
}  // namespace trainprof::analyze::advice
