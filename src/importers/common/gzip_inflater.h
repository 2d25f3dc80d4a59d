#pragma once
// Inflates gzip with ISA-L's igzip (about 3x zlib's speed: a .json.gz imports nearly as fast
// as the plain file) when libisal.so.2 can be loaded at run time, else with zlib (linked
// statically). ISA-L is never a link-time dependency: it is dlopen'ed once per process and
// used only after a self-test inflated a known stream correctly through it.
// TRAINPROF_NO_ISAL=1 in the environment forces zlib.
// Threads: IsalAvailable() may be called from any thread; one GzipInflater per thread.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace trainprof::importers {

enum class GzipBackend { kAuto, kIsal, kZlib };

// Whether ISA-L was loaded (and passed its self-test); false under TRAINPROF_NO_ISAL=1.
bool IsalAvailable();
// "isal" or "zlib": what kAuto uses in this process.
const char* AutoGzipBackendName();

// One gzip stream (concatenated members included), fed by the caller's input buffer.
class GzipInflater {
 public:
  enum class Result { kOk, kMemberEnd, kError };
  // kIsal when ISA-L is not available is an error from Create (nullptr, with `error` set).
  static std::unique_ptr<GzipInflater> Create(GzipBackend backend, std::string* error);
  virtual ~GzipInflater() = default;

  // Input and output windows, like zlib's z_stream.
  virtual void SetInput(const uint8_t* in, uint32_t n) = 0;
  virtual uint32_t avail_in() const = 0;
  virtual void SetOutput(uint8_t* out, uint32_t n) = 0;
  virtual uint32_t avail_out() const = 0;
  // Inflates as much as the windows allow. kMemberEnd once a member's trailer was checked;
  // kError with a short reason (e.g. "incorrect checksum") in `error`.
  virtual Result Inflate(std::string* error) = 0;
  // Starts the next member, keeping the unread input.
  virtual void ResetKeepingInput() = 0;
  virtual const char* name() const = 0;
};

}  // namespace trainprof::importers
