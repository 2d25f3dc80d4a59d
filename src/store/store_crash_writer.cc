// Test helper for the SIGKILL durability test: appends samples and events as fast as a real
// sampler would (every 10 ms) with auto-flush every 200 ms, and after each flush that it runs
// itself prints "flushed <values> <events>": counts that are durable from then on.

#include <cstdio>
#include <thread>

#include "base/time.h"
#include "model/run_metadata.h"
#include "store/node_store_writer.h"

int main(int argc, char** argv) {
  using namespace trainprof;
  if (argc != 2) {
    std::fprintf(stderr, "usage: store_crash_writer STORE_PATH\n");
    return 2;
  }
  model::NodeInfo node;
  node.node = "n0";
  store::WriterOptions opts;
  opts.seal_values = 50;
  auto writer = store::NodeStoreWriter::Open(argv[1], node, opts);
  if (!writer.ok()) {
    std::fprintf(stderr, "%s\n", writer.status().ToString().c_str());
    return 1;
  }
  store::SeriesId series[4];
  for (int i = 0; i < 4; ++i) series[i] = (*writer)->Series("metric" + std::to_string(i), "");
  long long values = 0, events = 0;
  int64_t last_flush = MonotonicNowNs();
  for (int64_t tick = 0;; ++tick) {
    int64_t ts = WallNowNs();
    for (auto s : series) {
      (*writer)->Append(s, ts, static_cast<double>(tick));
      ++values;
    }
    model::Event e;
    e.name = "tick";
    e.category = "test";
    e.start_ns = ts;
    e.duration_ns = 1000;
    e.step = tick;
    (*writer)->AppendEvent(e);
    ++events;
    if (MonotonicNowNs() - last_flush >= 200 * kNanosPerMilli) {
      if ((*writer)->Flush().ok()) {
        std::printf("flushed %lld %lld\n", values, events);
        std::fflush(stdout);
      }
      last_flush = MonotonicNowNs();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}
