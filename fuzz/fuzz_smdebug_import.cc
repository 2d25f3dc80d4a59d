// libFuzzer target: the smdebug importer on an arbitrary system-metrics file, an arbitrary
// framework timeline and an arbitrary cProfile dump (the same bytes placed at all three paths
// of a profiler-output folder).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "importers/smdebug/smdebug_importer.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string dir = [] {
    // tmpfs when there is one, as fuzz_horovod_import: every input is a store written.
    std::string tmpl = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    tmpl += "/tp_fuzz_smdebug_XXXXXX";
    static std::string made = mkdtemp(tmpl.data());
    std::atexit([] {  // leave nothing behind (tmpfs is memory)
      std::error_code ec;
      std::filesystem::remove_all(made, ec);
    });
    return made;
  }();
  std::error_code ec;
  fs::remove_all(dir + "/in", ec);
  fs::remove_all(dir + "/run", ec);
  fs::create_directories(dir + "/in/system/incremental/2020060314", ec);
  fs::create_directories(dir + "/in/framework/pevents/2020060314", ec);
  const std::string cprofile =
      "/in/framework/tensorflow/cProfile/1591160699000000.0_1591160700000000.0_1-host_1";
  fs::create_directories(dir + cprofile, ec);
  const std::string stats = cprofile + "/python_stats";
  for (const char* rel : {"/in/system/incremental/2020060314/1591160699.algo-1.json",
                          "/in/framework/pevents/2020060314/1591160699000000_1-host_"
                          "pythontimeline.json",
                          stats.c_str()}) {
    FILE* f = std::fopen((dir + rel).c_str(), "wb");
    if (f == nullptr) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  trainprof::importers::smdebug::SmdebugImportOptions o;
  o.dir = dir + "/in";
  o.out = dir + "/run";
  (void)trainprof::importers::smdebug::ImportSmdebug(o);
  return 0;
}
