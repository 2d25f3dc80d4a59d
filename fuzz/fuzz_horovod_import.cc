// libFuzzer target: a whole Horovod timeline import (raw or closed Chrome-trace array, B/E
// pairing, instants, store writes) on arbitrary bytes. It must never crash: bad input is an
// error Status or counted (issue 20).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "importers/horovod/horovod_importer.h"

namespace {

std::string Scratch() {
  static std::string dir = [] {
    // tmpfs when there is one: every input is a SQLite write or two, and their fsyncs
    // on a disk would bound the fuzzer to a few dozen inputs a second.
    std::string tmpl = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    tmpl += "/tp_fuzz_horovod_XXXXXX";
    static std::string made = mkdtemp(tmpl.data());
    std::atexit([] {  // tmpfs is memory: leave nothing behind
      std::error_code ec;
      std::filesystem::remove_all(made, ec);
    });
    return made;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string dir = Scratch();
  std::string timeline = dir + "/horovod_timeline.json";
  FILE* f = std::fopen(timeline.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  std::error_code ec;
  std::filesystem::remove_all(dir + "/run", ec);
  trainprof::importers::horovod::HorovodImportOptions o;
  o.timelines = {timeline};
  o.out = dir + "/run";
  // Half the inputs with a base time (the raw timeline's microseconds since Horovod's start are
  // shifted by it), so that hostile timestamps meet the addition.
  if (size % 2 == 0) o.base_time_ns = 1'600'000'000'000'000'000;
  (void)trainprof::importers::horovod::ImportHorovod(o);
  return 0;
}
