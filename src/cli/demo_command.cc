// `trainprof demo`: the embedded default job until the recorder exists. It writes a run with
// synthetic, clearly labelled data (source "demo"): two minutes of one node with 8 cores and
// 2 GPUs at 500 ms, and training steps whose data loading slows down halfway; then reads the
// run back through the same reader users get and prints what it holds.

#include <algorithm>
#include <cmath>
#include <random>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include "base/files.h"
#include "base/time.h"

#include "cli/command.h"
#include "cli/commands.h"
#include "model/run_metadata.h"
#include "store/run_directory.h"
#include "trainprof/version.h"

namespace trainprof::cli {

Status RunDemo(const DemoOptions& options, std::ostream& out) {
  const int64_t start = WallNowNs() - options.duration_s * kNanosPerSecond;
  model::RunMetadata m;
  m.name = "demo";
  m.run_id = model::NewRunId(m.name, start);
  m.command = {"trainprof", "demo"};
  m.start_ns = start;
  m.source = "demo";
  m.trainprof_version = kVersion;
  m.tags["synthetic"] = "true";
  std::string dir = options.out.empty() ? JoinPath("trainprof-runs", m.run_id) : options.out;
  TP_RETURN_IF_ERROR(store::WriteRunMetadata(dir, m));

  model::NodeInfo node = model::DetectLocalNode("demo-node");
  node.cpu_cores = 8;
  node.gpus = {{0, "Demo GPU", "GPU-demo-0", 16LL << 30},
               {1, "Demo GPU", "GPU-demo-1", 16LL << 30}};
  TP_ASSIGN_OR_RETURN(auto writer, store::OpenNodeWriter(dir, node));

  std::mt19937 rng(42);
  std::normal_distribution<double> noise(0.0, 0.03);
  auto ratio = [&](double mean) {
    double v = std::clamp(mean + noise(rng), 0.0, 1.0);
    return std::round(v * 10000) / 10000;  // the samplers' 1e-4 resolution
  };
  const int64_t interval = 500 * kNanosPerMilli;
  const int64_t ticks = options.duration_s * kNanosPerSecond / interval;
  std::vector<store::SeriesId> cores;
  for (int c = 0; c < 8; ++c) {
    cores.push_back(writer->Series("cpu_utilization_ratio", "cpu" + std::to_string(c)));
  }
  auto cpu_total = writer->Series("cpu_utilization_ratio", "total");
  auto mem = writer->Series("memory_used_bytes", "");
  auto gpu0 = writer->Series("gpu_utilization_ratio", "gpu0");
  auto gpu1 = writer->Series("gpu_utilization_ratio", "gpu1");
  for (int64_t t = 0; t < ticks; ++t) {
    int64_t ts = start + t * interval;
    bool slow = t > ticks / 2;  // the data loader falls behind in the second half
    double total = 0;
    for (int c = 0; c < 8; ++c) {
      double v = ratio(c == 0 && slow ? 0.98 : 0.35);
      total += v;
      writer->Append(cores[static_cast<size_t>(c)], ts, v);
    }
    writer->Append(cpu_total, ts, std::round(total / 8 * 10000) / 10000);
    writer->Append(mem, ts, static_cast<double>((12LL << 30) + t * 4096));
    writer->Append(gpu0, ts, ratio(slow ? 0.3 : 0.9));
    writer->Append(gpu1, ts, ratio(slow ? 0.3 : 0.9));
  }
  int64_t ts = start + 5 * kNanosPerSecond;
  for (int64_t s = 0; ts < start + options.duration_s * kNanosPerSecond - kNanosPerSecond; ++s) {
    bool slow = ts > start + options.duration_s * kNanosPerSecond / 2;
    int64_t wait = (slow ? 180 : 10) * kNanosPerMilli;
    int64_t fwd = 60 * kNanosPerMilli, bwd = 110 * kNanosPerMilli, opt = 20 * kNanosPerMilli;
    auto span = [&](const char* cat, int64_t begin, int64_t dur) {
      model::Event e;
      e.name = cat;
      e.category = cat;
      e.mode = "train";
      e.step = s;
      e.start_ns = begin;
      e.duration_ns = dur;
      e.pid = 1000;
      e.tid = 1000;
      e.rank = 0;
      writer->AppendEvent(std::move(e));
    };
    span("step", ts, wait + fwd + bwd + opt);
    span("data_wait", ts, wait);
    span("forward", ts + wait, fwd);
    span("backward", ts + wait + fwd, bwd);
    span("optimizer", ts + wait + fwd + bwd, opt);
    ts += wait + fwd + bwd + opt;
  }
  TP_RETURN_IF_ERROR(writer->Close());
  m.end_ns = start + options.duration_s * kNanosPerSecond;
  m.exit_status = 0;
  TP_RETURN_IF_ERROR(store::WriteRunMetadata(dir, m));

  out << "demo run written to " << dir << " (synthetic data, source=demo); reading it back:\n\n";
  ShowOptions show;
  show.run = dir;
  return RunShow(show, out);
}

void AddDemoCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<DemoOptions>();
  auto* cmd = app.add_subcommand(
      "demo", "Write a demo run with synthetic data and read it back (the embedded default job)");
  cmd->add_option("--out", opts->out, "Run directory to write");
  cmd->add_option("--duration", opts->duration_s, "Seconds of synthetic data")
      ->check(CLI::Range(10, 86400));
  cmd->callback([opts, action] { action->run = [opts] { return RunDemo(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
