// libFuzzer target: the recorder's control-socket messages (src/agent/control_channel.h), the
// one input a recorder takes from other processes while it runs. Each input is one request
// line: it is parsed, validated against a run, and an accepted request must survive a round
// trip through its JSON form unchanged (a mismatch aborts, so the fuzzer reports it).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/control_channel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace agent = trainprof::agent;
  std::string line(reinterpret_cast<const char*>(data), size);
  auto request = agent::ParseControlRequest(line);
  if (!request.ok()) return 0;
  // A run that started at an arbitrary but fixed time and has lasted an hour.
  const int64_t start = 1'764'000'000'000'000'000;
  const int64_t now = start + 3'600'000'000'000;
  (void)agent::ValidateControlRequest(*request, start, now);
  (void)agent::ValidateControlRequest(*request, INT64_MIN, INT64_MAX);
  (void)agent::ValidateControlRequest(*request, INT64_MAX, INT64_MIN);
  auto again = agent::ParseControlRequest(agent::ControlRequestToJson(*request));
  if (!again.ok() || again->type != request->type || again->name != request->name ||
      again->ts_ns != request->ts_ns || again->start_ns != request->start_ns ||
      again->end_ns != request->end_ns) {
    std::abort();
  }
  return 0;
}
