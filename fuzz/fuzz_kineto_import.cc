// libFuzzer target: a whole Kineto import (streamer, event parser, importer, store writes) on
// arbitrary bytes, as a plain file and as the content of a gzip stream. It must never crash:
// bad input is an error Status or counted.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "importers/kineto/kineto_importer.h"

namespace {

std::string Scratch() {
  static std::string dir = [] {
    // tmpfs when there is one, as fuzz_horovod_import: every input is a store written.
    std::string tmpl = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    tmpl += "/tp_fuzz_kineto_XXXXXX";
    static std::string made = mkdtemp(tmpl.data());
    std::atexit([] {  // leave nothing behind (tmpfs is memory)
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
  std::string trace = dir + "/trace.json";
  FILE* f = std::fopen(trace.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  std::error_code ec;
  std::filesystem::remove_all(dir + "/run", ec);
  trainprof::importers::kineto::KinetoImportOptions o;
  o.traces = {trace};
  o.out = dir + "/run";
  o.flush_events = 64;
  // A small read window that varies with the input, so that events straddle refills and the
  // fast path's "need more" and the window's growth are fuzzed too.
  o.read_buffer_bytes = 16 + size % 241;
  // Both parses: on a second thread (the default) and on this one.
  o.parse_threads = 1 + static_cast<int>(size % 2);
  (void)trainprof::importers::kineto::ImportKineto(o);
  return 0;
}
