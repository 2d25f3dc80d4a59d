// libFuzzer target: a whole Kineto import (streamer, event parser, importer, store writes) on
// arbitrary bytes, as a plain file and as the content of a gzip stream. It must never crash:
// bad input is an error Status or counted. Each input is imported twice, with the parse on a
// second thread and on the importing one: the two must agree (the same kind of error, or the
// same summary of every file), or the target aborts with both.
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

namespace kineto = trainprof::importers::kineto;

// What one import gives, in one comparable value (its error, or every file's summary).
std::string Outcome(const trainprof::StatusOr<kineto::KinetoImportResult>& r) {
  // An input with two faults may be refused for either, whichever each parse meets first (a
  // gzip checksum, checked at the end of the stream, against a JSON error early in it): the
  // kind of error is compared, not its message.
  if (!r.ok()) return "error " + std::to_string(static_cast<int>(r.status().code()));
  std::string out = "ok " + std::to_string(r->events_stored) + " events";
  for (const auto& f : r->files) {
    out += "\nfile " + f.node + " rank " + std::to_string(f.rank) + "/" +
           std::to_string(f.world_size) + " " + f.timestamp_format + " base " +
           std::to_string(f.base_time_ns) + " elements " + std::to_string(f.elements) + " stored " +
           std::to_string(f.events_stored) + " steps " + std::to_string(f.steps) + " flows " +
           std::to_string(f.flows) + " samples " + std::to_string(f.metric_samples) + " metadata " +
           std::to_string(f.metadata_events) + " gpus " + std::to_string(f.gpus) + " span " +
           std::to_string(f.start_ns) + ".." + std::to_string(f.end_ns);
    for (const auto& [k, v] : f.categories) out += " cat:" + k + "=" + std::to_string(v);
    for (const auto& [k, v] : f.problems) out += " problem:" + k + "=" + std::to_string(v);
  }
  return out;
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
  kineto::KinetoImportOptions o;
  o.traces = {trace};
  o.out = dir + "/run";
  o.flush_events = 64;
  // A small read window that varies with the input, so that events straddle refills and the
  // fast path's "need more" and the window's growth are fuzzed too.
  o.read_buffer_bytes = 16 + size % 241;
  // Both parses: on a second thread, then on this one, into the same run directory path (the
  // messages name it).
  o.parse_threads = 2;
  const std::string two = Outcome(kineto::ImportKineto(o));
  std::filesystem::remove_all(dir + "/run", ec);
  o.parse_threads = 1;
  const std::string one = Outcome(kineto::ImportKineto(o));
  if (two != one) {
    std::fprintf(stderr,
                 "the two parses disagree\n-- parse on a second thread:\n%s\n"
                 "-- parse on the importing thread:\n%s\n",
                 two.c_str(), one.c_str());
    std::abort();
  }
  return 0;
}
