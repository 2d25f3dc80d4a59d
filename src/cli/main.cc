// The native `trainprof` executable; the Python package's console script enters the same Main.
#include <cstring>

#include "base/platform.h"
#include "cli/cli.h"

int main(int argc, char** argv) {
  // The commands that read a whole run into tables and exit: the allocator keeps what they free
  // for their next table instead of unmapping it and faulting fresh zeroed pages in (analyze of
  // a 1 M-event run: a third less system time). Only in this executable: the same commands run
  // inside a user's Python process (trainprof.run_cli) keep that process's allocator as it is.
  if (argc > 1) {
    for (const char* batch : {"analyze", "report", "rules"}) {
      if (std::strcmp(argv[1], batch) == 0) trainprof::platform::KeepFreedMemoryForReuse();
    }
  }
  return trainprof::cli::Main(argc, argv);
}
