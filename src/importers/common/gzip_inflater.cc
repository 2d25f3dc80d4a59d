#include "importers/common/gzip_inflater.h"

#include <dlfcn.h>
#include <isa-l/igzip_lib.h>  // declarations only (third_party/isa-l): never linked
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace trainprof::importers {
namespace {

struct IsalApi {
  decltype(&isal_inflate_init) init = nullptr;
  decltype(&isal_inflate_reset) reset = nullptr;
  decltype(&isal_inflate) inflate = nullptr;
};

// ISA-L's state, with room to spare in case a newer libisal.so.2 appends fields (the fields we
// touch sit at the front and have kept their places since 2.26).
struct IsalState {
  inflate_state s;
  unsigned char slack[1 << 14];
};

const char* IsalError(int rc) {
  switch (rc) {
    case ISAL_INVALID_BLOCK:
      return "invalid deflate block";
    case ISAL_INVALID_SYMBOL:
      return "invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK:
      return "invalid back-reference distance";
    case ISAL_INVALID_WRAPPER:
      return "invalid gzip header";
    case ISAL_UNSUPPORTED_METHOD:
      return "unsupported compression method";
    case ISAL_INCORRECT_CHECKSUM:
      return "incorrect checksum";
    case ISAL_NEED_DICT:
      return "needs a preset dictionary";
    default:
      return "inflate error";
  }
}

class IsalInflater final : public GzipInflater {
 public:
  explicit IsalInflater(const IsalApi& api) : api_(api), st_(std::make_unique<IsalState>()) {
    api_.init(&st_->s);
    st_->s.crc_flag = ISAL_GZIP;
  }
  void SetInput(const uint8_t* in, uint32_t n) override {
    st_->s.next_in = const_cast<uint8_t*>(in);
    st_->s.avail_in = n;
  }
  uint32_t avail_in() const override { return st_->s.avail_in; }
  void SetOutput(uint8_t* out, uint32_t n) override {
    st_->s.next_out = out;
    st_->s.avail_out = n;
  }
  uint32_t avail_out() const override { return st_->s.avail_out; }
  Result Inflate(std::string* error) override {
    int rc = api_.inflate(&st_->s);
    if (rc < 0 || rc == ISAL_NEED_DICT) {
      *error = IsalError(rc);
      return Result::kError;
    }
    return st_->s.block_state == ISAL_BLOCK_FINISH ? Result::kMemberEnd : Result::kOk;
  }
  void ResetKeepingInput() override {
    inflate_state& z = st_->s;
    uint8_t* next_in = z.next_in;
    uint8_t* next_out = z.next_out;
    const uint32_t avail_in = z.avail_in, avail_out = z.avail_out;
    api_.reset(&z);
    z.crc_flag = ISAL_GZIP;
    z.next_in = next_in;
    z.avail_in = avail_in;
    z.next_out = next_out;
    z.avail_out = avail_out;
  }
  const char* name() const override { return "isal"; }

 private:
  IsalApi api_;
  std::unique_ptr<IsalState> st_;
};

class ZlibInflater final : public GzipInflater {
 public:
  ZlibInflater() {
    std::memset(&z_, 0, sizeof z_);
    ok_ = inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK;  // gzip wrapper only
  }
  ~ZlibInflater() override {
    if (ok_) inflateEnd(&z_);
  }
  bool ok() const { return ok_; }
  void SetInput(const uint8_t* in, uint32_t n) override {
    z_.next_in = const_cast<Bytef*>(in);
    z_.avail_in = n;
  }
  uint32_t avail_in() const override { return z_.avail_in; }
  void SetOutput(uint8_t* out, uint32_t n) override {
    z_.next_out = out;
    z_.avail_out = n;
  }
  uint32_t avail_out() const override { return z_.avail_out; }
  Result Inflate(std::string* error) override {
    int rc = inflate(&z_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) return Result::kMemberEnd;
    if (rc == Z_OK || rc == Z_BUF_ERROR) return Result::kOk;  // no progress: the caller sees it
    if (rc == Z_DATA_ERROR && z_.msg != nullptr &&
        (std::strcmp(z_.msg, "incorrect data check") == 0 ||
         std::strcmp(z_.msg, "incorrect length check") == 0)) {
      *error = "incorrect checksum";
    } else if (rc == Z_NEED_DICT) {
      *error = "needs a preset dictionary";
    } else {
      *error = z_.msg != nullptr ? z_.msg : "inflate error";
    }
    return Result::kError;
  }
  void ResetKeepingInput() override { inflateReset(&z_); }  // keeps next_in/avail_in
  const char* name() const override { return "zlib"; }

 private:
  z_stream z_;
  bool ok_ = false;
};

// Inflates a known two-member stream through `api` in small output steps and checks the bytes
// and that a damaged checksum is refused: a libisal.so.2 whose layout we misread fails here and
// zlib is used instead. 24 KiB deflated at level 1 (dynamic Huffman blocks, several output
// windows per member): about 0.2 ms, paid once per process that inflates a large file (a
// 200 KiB level-6 stream cost 4 ms, a quarter of a small trace's whole import).
bool SelfTest(const IsalApi& api) {
  std::string text;
  for (int i = 0; text.size() < (24u << 10); ++i) {
    text += "{\"ph\":\"X\",\"ts\":" + std::to_string((i * 7919) % 100003) + ",\"name\":\"op" +
            std::to_string(i % 97) + "\"},\n";
  }
  std::vector<uint8_t> gz(compressBound(static_cast<uLong>(text.size())) + 64);
  z_stream d;
  std::memset(&d, 0, sizeof d);
  if (deflateInit2(&d, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  d.next_in = reinterpret_cast<Bytef*>(text.data());
  d.avail_in = static_cast<uInt>(text.size());
  d.next_out = gz.data();
  d.avail_out = static_cast<uInt>(gz.size());
  const int drc = deflate(&d, Z_FINISH);
  const size_t gz_size = d.total_out;
  deflateEnd(&d);
  if (drc != Z_STREAM_END) return false;
  std::vector<uint8_t> two(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz_size));
  two.insert(two.end(), two.begin(), two.end());

  auto run = [&](const std::vector<uint8_t>& in, std::string* out) {
    IsalInflater inf(api);
    inf.SetInput(in.data(), static_cast<uint32_t>(in.size()));
    std::vector<uint8_t> buf(4093);
    std::string error;
    for (int guard = 0; guard < 100000; ++guard) {
      inf.SetOutput(buf.data(), static_cast<uint32_t>(buf.size()));
      auto r = inf.Inflate(&error);
      out->append(reinterpret_cast<char*>(buf.data()), buf.size() - inf.avail_out());
      if (r == GzipInflater::Result::kError) return false;
      if (r == GzipInflater::Result::kMemberEnd) {
        if (inf.avail_in() == 0) return true;
        inf.ResetKeepingInput();
      }
    }
    return false;
  };
  std::string out;
  if (!run(two, &out) || out != text + text) return false;
  std::vector<uint8_t> bad(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz_size));
  bad[bad.size() - 6] ^= 1;  // the CRC32 trailer
  std::string ignored;
  return !run(bad, &ignored);
}

const IsalApi* LoadIsal() {
  const char* off = std::getenv("TRAINPROF_NO_ISAL");
  if (off != nullptr && *off != '\0' && std::strcmp(off, "0") != 0) return nullptr;
  void* lib = nullptr;
  for (const char* name : {"libisal.so.2", "libisal.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
  }
  if (lib == nullptr) return nullptr;
  static IsalApi api;
  api.init = reinterpret_cast<decltype(api.init)>(dlsym(lib, "isal_inflate_init"));
  api.reset = reinterpret_cast<decltype(api.reset)>(dlsym(lib, "isal_inflate_reset"));
  api.inflate = reinterpret_cast<decltype(api.inflate)>(dlsym(lib, "isal_inflate"));
  if (api.init == nullptr || api.reset == nullptr || api.inflate == nullptr || !SelfTest(api)) {
    dlclose(lib);
    return nullptr;
  }
  return &api;  // the library stays loaded for the process's life
}

const IsalApi* Isal() {
  static const IsalApi* api = LoadIsal();
  return api;
}

}  // namespace

bool IsalAvailable() { return Isal() != nullptr; }

const char* AutoGzipBackendName() { return IsalAvailable() ? "isal" : "zlib"; }

std::unique_ptr<GzipInflater> GzipInflater::Create(GzipBackend backend, std::string* error) {
  if (backend != GzipBackend::kZlib && Isal() != nullptr) {
    return std::make_unique<IsalInflater>(*Isal());
  }
  if (backend == GzipBackend::kIsal) {
    *error = "ISA-L (libisal.so.2) is not available" +
             std::string(std::getenv("TRAINPROF_NO_ISAL") ? " (TRAINPROF_NO_ISAL is set)" : "");
    return nullptr;
  }
  auto z = std::make_unique<ZlibInflater>();
  if (!z->ok()) {
    *error = "zlib could not be initialised";
    return nullptr;
  }
  return z;
}

}  // namespace trainprof::importers
