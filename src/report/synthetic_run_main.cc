// report_synthetic_run DIR [duration_s [interval_ms [cores [gpus]]]]: writes the report's
// synthetic test run (see synthetic_run.h).
#include <cstdlib>
#include <iostream>

#include "report/synthetic_run.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: report_synthetic_run DIR [duration_s [interval_ms [cores [gpus]]]]\n";
    return 2;
  }
  trainprof::report::SyntheticRunOptions o;
  if (argc > 2) o.duration_s = std::atoll(argv[2]);
  if (argc > 3) o.interval_ms = std::atoll(argv[3]);
  if (argc > 4) o.cores = std::atoi(argv[4]);
  if (argc > 5) o.gpus = std::atoi(argv[5]);
  auto status = trainprof::report::WriteSyntheticRun(argv[1], o);
  if (!status.ok()) {
    std::cerr << "error: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
