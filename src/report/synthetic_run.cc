#include "report/synthetic_run.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/json_dump.h"
#include "base/time.h"
#include "model/data_quality.h"
#include "model/run_metadata.h"
#include "store/run_directory.h"
#include "trainprof/version.h"

namespace trainprof::report {
namespace {

// xorshift64*: fast enough to fill a 24-hour run, reproducible across platforms.
class Noise {
 public:
  explicit Noise(uint64_t seed) : s_(seed | 1) {}
  double Uniform() {  // [0, 1)
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return static_cast<double>((s_ * 2685821657736338717ULL) >> 11) * 0x1.0p-53;
  }
  double Around(double mean, double spread) { return mean + (Uniform() - 0.5) * 2 * spread; }

 private:
  uint64_t s_;
};

double Ratio(double v) { return std::round(std::clamp(v, 0.0, 1.0) * 10000) / 10000; }

// A cProfile profile of steps 40-42 as `record --python-profile 40-42` stores it (one
// python_function instant per function, _detail.py store_pstats), with planted numbers:
// main -> train_step -> {forward -> fib (recursive), load_batch}; report_test checks them.
void WritePythonProfile(store::NodeStoreWriter& w, int64_t at_ns, const SyntheticRunOptions& o) {
  struct Caller {
    const char *function, *file;
    int line, calls, primitive;
    int64_t total_ms, cumulative_ms;
  };
  struct Fn {
    const char *function, *file;
    int line, calls, primitive;
    int64_t total_ms, cumulative_ms;
    std::vector<Caller> callers;
  };
  const std::vector<Fn> kFns = {
      {"main", "train.py", 10, 1, 1, 5, 900, {}},
      {"train_step", "train.py", 20, 30, 30, 30, 850, {{"main", "train.py", 10, 30, 30, 30, 850}}},
      {"forward",
       "model.py",
       5,
       30,
       30,
       450,
       600,
       {{"train_step", "train.py", 20, 30, 30, 450, 600}}},
      {"load_batch",
       "data.py",
       7,
       30,
       30,
       240,
       240,
       {{"train_step", "train.py", 20, 30, 30, 240, 240}}},
      {"fib",
       "util.py",
       3,
       300,
       30,
       150,
       150,
       {{"forward", "model.py", 5, 30, 30, 15, 150}, {"fib", "util.py", 3, 270, 0, 135, 135}}},
      {o.hostile_names ? "<script>alert(\"py\")</script>" : "helper",
       o.hostile_names ? "<img src=x onerror=alert(2)>.py" : "helper.py",
       1,
       2,
       2,
       3,
       3,
       {{"main", "train.py", 10, 2, 2, 3, 3}}},
  };
  for (const Fn& f : kFns) {
    nlohmann::json called_by = nlohmann::json::array();
    for (const Caller& c : f.callers) {
      called_by.push_back({{"function", c.function},
                           {"file", c.file},
                           {"line", c.line},
                           {"calls", c.calls},
                           {"primitive_calls", c.primitive},
                           {"total_ns", c.total_ms * kNanosPerMilli},
                           {"cumulative_ns", c.cumulative_ms * kNanosPerMilli}});
    }
    model::Event ev;
    ev.kind = model::EventKind::kInstant;
    ev.name = std::string(f.function) + " (" + f.file + ":" + std::to_string(f.line) + ")";
    ev.category = "python_function";
    ev.mode = "train";
    ev.step = 42;
    ev.start_ns = at_ns;
    ev.pid = 4242;
    ev.rank = 0;
    ev.args = DumpJson({{"function", f.function},
                        {"file", f.file},
                        {"line", f.line},
                        {"calls", f.calls},
                        {"primitive_calls", f.primitive},
                        {"total_ns", f.total_ms * kNanosPerMilli},
                        {"cumulative_ns", f.cumulative_ms * kNanosPerMilli},
                        {"steps", "40-42"},
                        {"callers", f.callers.size()},
                        {"called_by", called_by}});
    w.AppendEvent(std::move(ev));
  }
}

}  // namespace

Status WriteSyntheticRun(const std::string& dir, const SyntheticRunOptions& o) {
  const int64_t start = o.start_ns;
  const int64_t end = start + o.duration_s * kNanosPerSecond;
  model::RunMetadata m;
  m.name = o.hostile_names ? "resnet50 \"<b>bold</b>\"" : "resnet50";
  m.run_id = model::NewRunId("synthetic", start);
  m.command = {"python", "train.py", "--epochs", "3"};
  if (o.hostile_names) m.command.push_back("--tag=<script>alert('cmd')</script>");
  m.start_ns = start;
  m.end_ns = end;
  m.exit_status = 0;
  m.source = "synthetic";
  m.instance_type = "ml.p3.8xlarge";
  m.trainprof_version = kVersion;
  m.tags["synthetic"] = "true";
  if (o.hostile_names) m.tags["owner"] = "<img src=x onerror=alert(1)>";
  TP_RETURN_IF_ERROR(store::WriteRunMetadata(dir, m));

  model::NodeInfo node;
  node.node = "algo-1";
  node.hostname = "algo-1";
  node.cpu_model = "Synthetic Xeon";
  node.cpu_cores = o.cores;
  node.memory_total_bytes = 244LL << 30;
  node.instance_type = m.instance_type;
  for (int g = 0; g < o.gpus; ++g) {
    node.gpus.push_back(
        {g, "Tesla V100-SXM2-16GB", "GPU-synthetic-" + std::to_string(g), 16LL << 30});
  }
  TP_ASSIGN_OR_RETURN(auto w, store::OpenNodeWriter(dir, node));

  // Phases: download, initialization, training (with evaluation and checkpoints), upload,
  // finalization.
  const int64_t d = end - start;
  const int64_t train_begin = start + d * 6 / 100, train_end = start + d * 92 / 100;
  auto phase = [&](const char* name, int64_t b, int64_t e) {
    model::Event ev;
    ev.name = name;
    ev.category = "phase";
    ev.start_ns = b;
    ev.duration_ns = e - b;
    ev.pid = 4242;
    w->AppendEvent(std::move(ev));
  };
  phase("download", start, start + d * 3 / 100);
  phase("initialization", start + d * 3 / 100, train_begin);
  phase("training", train_begin, train_end);
  phase("checkpoint", start + d * 50 / 100, start + d * 51 / 100);
  phase("upload", train_end, start + d * 96 / 100);
  phase("finalization", start + d * 96 / 100, end);

  w->Annotate(train_begin, "dataloader.num_workers", "2");
  w->Annotate(train_begin, "dataloader.batch_size", "256");
  w->Annotate(train_begin, "dataloader.pin_memory", "false");
  if (o.hostile_names)
    w->Annotate(train_begin, "dataloader.dataset", "\"imagenet\" <script>x()</script>");

  // Steps first, so that GPU utilisation can follow what the loop does.
  Noise noise(7);
  const int64_t slow_from = start + d / 2;
  int64_t ts = train_begin;
  int64_t step = 0;
  const int64_t eval_every = std::max<int64_t>(50, d / kNanosPerSecond);  // steps
  auto span = [&](const char* cat, const char* mode, int64_t s, int64_t b, int64_t dur) {
    model::Event ev;
    ev.name = cat;
    ev.category = cat;
    ev.mode = mode;
    ev.step = s;
    ev.start_ns = b;
    ev.duration_ns = dur;
    ev.pid = 4242;
    ev.tid = 4242;
    ev.rank = 0;
    w->AppendEvent(std::move(ev));
  };
  int64_t ops_written = 0;
  while (ts < train_end) {
    const bool eval = step > 0 && step % eval_every < eval_every / 10;
    const char* mode = eval ? "eval" : "train";
    const double ms = static_cast<double>(kNanosPerMilli);
    const bool slow = ts > slow_from;
    auto wait = static_cast<int64_t>(noise.Around(slow ? 0.6 : 0.05, 0.03) *
                                     static_cast<double>(o.step_ms) * ms);
    auto fwd = static_cast<int64_t>(noise.Around(0.33, 0.02) * static_cast<double>(o.step_ms) * ms);
    int64_t bwd =
        eval ? 0
             : static_cast<int64_t>(noise.Around(0.5, 0.03) * static_cast<double>(o.step_ms) * ms);
    int64_t opt =
        eval ? 0
             : static_cast<int64_t>(noise.Around(0.1, 0.01) * static_cast<double>(o.step_ms) * ms);
    if (noise.Uniform() < 0.004) fwd *= 4;  // a rare slow step (a straggling batch)
    int64_t total = wait + fwd + bwd + opt;
    span("step", mode, step, ts, total);
    span("data_wait", mode, step, ts, wait);
    span("forward", mode, step, ts + wait, fwd);
    if (!eval) {
      span("backward", mode, step, ts + wait + fwd, bwd);
      span("optimizer", mode, step, ts + wait + fwd + bwd, opt);
    }
    if (o.operators && ops_written < 200 && step % 7 == 3) {
      // A detailed-profiling window: a few operators per step.
      const char* kOps[][2] = {{"aten::conv2d", "cpu_op"},
                               {"aten::batch_norm", "cpu_op"},
                               {"cudaLaunchKernel", "cuda_runtime"},
                               {"volta_sgemm_128x64_nn", "kernel"},
                               {"ncclKernel_AllReduce_RING_LL_Sum_float", "kernel"},
                               {"Memcpy HtoD (Pageable -> Device)", "gpu_memcpy"},
                               {"<script>alert(\"op\")</script>", "cpu_op"}};
      int64_t t = ts + wait;
      for (size_t k = 0; k < std::size(kOps); ++k) {
        if (!o.hostile_names && k == std::size(kOps) - 1) continue;
        model::Event ev;
        ev.name = kOps[k][0];
        ev.category = kOps[k][1];
        ev.start_ns = t;
        ev.duration_ns = static_cast<int64_t>((k + 1) * 900 * kNanosPerMicro);
        ev.pid = 4242;
        ev.tid = std::string(kOps[k][1]) == "cpu_op" ? 4242 : 7;
        ev.rank = 0;
        t += ev.duration_ns / 2;
        w->AppendEvent(std::move(ev));
        ++ops_written;
      }
    }
    ts += total;
    ++step;
  }

  if (o.operators) WritePythonProfile(*w, train_begin + (train_end - train_begin) / 4, o);

  // System metrics at the sampling interval.
  std::vector<store::SeriesId> cores, gpu_util, gpu_mem_util, gpu_mem, gpu_power;
  for (int c = 0; c < o.cores; ++c)
    cores.push_back(w->Series("cpu_utilization_ratio", "cpu" + std::to_string(c)));
  for (int g = 0; g < o.gpus; ++g) {
    std::string dev = "gpu" + std::to_string(g);
    gpu_util.push_back(w->Series("gpu_utilization_ratio", dev));
    gpu_mem_util.push_back(w->Series("gpu_memory_utilization_ratio", dev));
    gpu_mem.push_back(w->Series("gpu_memory_used_bytes", dev));
    gpu_power.push_back(w->Series("gpu_power_watts", dev));
  }
  auto cpu_total = w->Series("cpu_utilization_ratio", "total");
  auto iowait = w->Series("cpu_iowait_ratio", "total");
  auto mem = w->Series("memory_used_bytes", "");
  auto rx = w->Series("network_receive_bytes_per_second", "eth0");
  auto tx = w->Series("network_transmit_bytes_per_second", "eth0");
  auto rd = w->Series("disk_read_bytes_per_second", "nvme0n1");
  auto wr = w->Series("disk_write_bytes_per_second", "nvme0n1");
  auto proc_cpu = w->Series("process_cpu_utilization_ratio", "tree");
  auto proc_rss = w->Series("process_resident_memory_bytes", "tree");
  TP_RETURN_IF_ERROR(w->Flush());
  const int64_t interval = o.interval_ms * kNanosPerMilli;
  int64_t tick = 0;
  for (int64_t t = start; t < end; t += interval) {
    // Flushing as it goes keeps the writer's buffers (and their drop limit) small.
    if (++tick % 20000 == 0) TP_RETURN_IF_ERROR(w->Flush());
    const bool training = t >= train_begin && t < train_end;
    const bool slow = t > slow_from;
    const bool downloading = t < start + d * 3 / 100;
    double total = 0;
    for (int c = 0; c < o.cores; ++c) {
      double mean = !training ? 0.05 : (c < 2 && slow ? 0.97 : 0.30);
      double v = Ratio(noise.Around(mean, 0.04));
      total += v;
      w->Append(cores[static_cast<size_t>(c)], t, v);
    }
    w->Append(cpu_total, t, Ratio(total / o.cores));
    w->Append(iowait, t, Ratio(noise.Around(downloading ? 0.2 : 0.01, 0.01)));
    w->Append(mem, t, std::round(40e9 + (training ? 30e9 : 0) + noise.Around(0, 1e8)));
    w->Append(rx, t, std::max(0.0, noise.Around(downloading ? 900e6 : 2e6, 1e6)));
    w->Append(tx, t, std::max(0.0, noise.Around(t >= train_end ? 600e6 : 1e6, 5e5)));
    w->Append(rd, t, std::max(0.0, noise.Around(training ? 150e6 : 1e6, 2e7)));
    w->Append(wr, t, std::max(0.0, noise.Around(1e6, 5e5)));
    w->Append(proc_cpu, t, std::round(total * 100) / 100);
    w->Append(proc_rss, t, std::round(12e9 + noise.Around(0, 1e7)));
    for (int g = 0; g < o.gpus; ++g) {
      auto k = static_cast<size_t>(g);
      double u = !training ? 0.0 : (slow ? 0.35 : 0.92);
      if (g == 1 && training) u *= 0.6;  // one GPU does less: a straggler rule fires on it
      w->Append(gpu_util[k], t, Ratio(noise.Around(u, 0.05)));
      w->Append(gpu_mem_util[k], t, Ratio(noise.Around(u * 0.5, 0.03)));
      w->Append(gpu_mem[k], t, training ? std::round(noise.Around(11e9, 1e8)) : 3e8);
      w->Append(gpu_power[k], t, std::round(noise.Around(40 + 200 * u, 5)));
    }
  }

  model::Finding f;
  f.rule = "LowGPUUtilization";
  f.severity = model::Severity::kWarning;
  f.node = "algo-1";
  f.device = "gpu1";
  f.start_ns = slow_from;
  f.end_ns = slow_from + d / 10;
  f.message = "GPU gpu1 utilisation p95 was 24 % (threshold 70 %) while training";
  f.recommendation = "Raise the batch size or check for a data bottleneck.";
  f.evidence_json = R"({"p95": 0.24, "threshold_p95": 0.7, "window_s": 60})";
  w->AddFinding(f);
  model::Finding g;
  g.rule = "Dataloader";
  g.severity = model::Severity::kCritical;
  g.node = "algo-1";
  g.start_ns = slow_from;
  g.end_ns = train_end;
  g.message = "Waiting for data takes 60 % of step time; 2 loader workers for " +
              std::to_string(o.cores) + " cores";
  g.recommendation = "Increase DataLoader num_workers and enable pin_memory.";
  g.evidence_json = R"({"wait_share": 0.6, "num_workers": 2})";
  w->AddFinding(g);
  if (o.hostile_names) {
    model::Finding x = g;
    x.rule = "Custom<script>alert('rule')</script>";
    x.severity = model::Severity::kInfo;
    x.message = "a user's rule said \"hi\" <b>loudly</b>";
    x.recommendation = "nothing </td></tr></table> to do";
    x.evidence_json = R"({"note": "</script><script>alert(1)</script>"})";
    w->AddFinding(x);
  }
  w->AddCounter(model::dq::kSamplingOverruns, 3);
  w->AddCounter(model::dq::kDroppedEvents, 0);
  return w->Close();
}

}  // namespace trainprof::report
