// A stand-in for libnvidia-ml.so that serves recorded values, so the NVML collector's real
// dlopen/dlsym path runs in CI without a GPU. It exports the NVML C functions the collector
// uses; nvmlInit reads the JSON file named by $TRAINPROF_NVML_REPLAY (format in README.md).
//
// Each device answers the k-th call of a given function with its k-th recorded sample (the
// last one once the list runs out): the collector calls each function at most once per GPU
// per tick, so sample k is tick k (memory is also read once at init: its list starts one call
// earlier); a device with "cycle": true starts its list over instead. A key missing from a sample
// means NOT_SUPPORTED. A device with "lost_at": K answers GPU_IS_LOST from the K-th call of each
// function on; "hang_ms" (with "hang_from": K) makes the utilisation query sleep that long from its
// K-th call on (a wedged driver). "onset_file" with "onset_samples" plants a problem when a job
// decides: once that file exists, each function answers the onset samples, from the first call that
// saw it.

#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"

namespace {

using json = nlohmann::json;

constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNotFound = 6;
constexpr int kInsufficientSize = 7;
constexpr int kDriverNotLoaded = 9;
constexpr int kGpuIsLost = 15;
constexpr int kArgumentVersionMismatch = 25;

struct Device {
  json spec;                              // the device's JSON object
  std::map<std::string, int> calls;       // per function: how many times it was called
  std::map<std::string, int> onset_call;  // per function: the call that first saw onset_file
  std::vector<std::unique_ptr<Device>> migs;
  bool is_mig = false;
};

struct State {
  std::mutex mu;
  int init_count = 0;  // NVML reference-counts init/shutdown; so does the replay
  std::vector<std::unique_ptr<Device>> devices;
  // Devices of earlier inits: a thread stuck in a call may still use their handles.
  std::vector<std::unique_ptr<Device>> retired;
};

State& GetState() {
  static State* state = new State();  // never destroyed: threads may still be inside
  return *state;
}

// The sample for this call of `fn` on `dev`, or nullptr with *ret set.
const json* Sample(Device* dev, const char* fn, int* ret) {
  const int k = dev->calls[fn]++;
  const json& spec = dev->spec;
  if (spec.contains("hang_ms") && std::strcmp(fn, "utilization") == 0 &&
      k >= spec.value("hang_from", 0)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(spec["hang_ms"].get<int>()));
  }
  if (spec.contains("lost_at") && k >= spec["lost_at"].get<int>()) {
    *ret = kGpuIsLost;
    return nullptr;
  }
  // A problem planted at a moment the job chooses: once the file "onset_file" exists, the
  // calls answer "onset_samples" instead, counted from the first call that saw the file.
  if (spec.contains("onset_file") && spec.contains("onset_samples")) {
    auto first = dev->onset_call.find(fn);
    if (first == dev->onset_call.end() &&
        access(spec["onset_file"].get<std::string>().c_str(), F_OK) == 0) {
      first = dev->onset_call.emplace(fn, k).first;
    }
    if (first != dev->onset_call.end()) {
      const json& after = spec["onset_samples"];
      if (!after.is_array() || after.empty()) {
        *ret = kNotSupported;
        return nullptr;
      }
      *ret = kSuccess;
      return &after[std::min<size_t>(static_cast<size_t>(k - first->second), after.size() - 1)];
    }
  }
  const json& samples = spec["samples"];
  if (!samples.is_array() || samples.empty()) {
    *ret = kNotSupported;
    return nullptr;
  }
  // "cycle": true starts the list over once it runs out (a long generated recording).
  const size_t n = samples.size();
  const json& s = spec.value("cycle", false)
                      ? samples[static_cast<size_t>(k) % n]
                      : samples[std::min<size_t>(static_cast<size_t>(k), n - 1)];
  *ret = kSuccess;
  return &s;
}

// Looks up `key` in this call's sample: NOT_SUPPORTED when absent.
const json* Field(void* handle, const char* fn, const char* key, int* ret) {
  if (handle == nullptr) {
    *ret = kInvalidArgument;
    return nullptr;
  }
  const json* s = Sample(static_cast<Device*>(handle), fn, ret);
  if (s == nullptr) return nullptr;
  if (!s->contains(key)) {
    *ret = kNotSupported;
    return nullptr;
  }
  return &(*s)[key];
}

std::unique_ptr<Device> MakeDevice(const json& spec, bool is_mig) {
  auto dev = std::make_unique<Device>();
  dev->spec = spec;
  dev->is_mig = is_mig;
  if (spec.contains("mig")) {
    for (const json& m : spec["mig"]) dev->migs.push_back(MakeDevice(m, true));
  }
  return dev;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
  State& st = GetState();
  std::lock_guard lock(st.mu);
  const char* path = std::getenv("TRAINPROF_NVML_REPLAY");
  if (path == nullptr) return kDriverNotLoaded;
  std::ifstream in(path);
  if (!in) return kDriverNotLoaded;
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return kDriverNotLoaded;
  if (doc.contains("init_error")) return doc["init_error"].get<int>();
  for (auto& d : st.devices) st.retired.push_back(std::move(d));
  st.devices.clear();
  for (const json& d : doc["devices"]) st.devices.push_back(MakeDevice(d, false));
  ++st.init_count;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlShutdown() {
  State& st = GetState();
  std::lock_guard lock(st.mu);
  if (st.init_count == 0) return kUninitialized;
  --st.init_count;
  return kSuccess;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(int r) {
  switch (r) {
    case kSuccess:
      return "Success";
    case kNotSupported:
      return "Not Supported";
    case kGpuIsLost:
      return "GPU is lost";
    default:
      return "Replay error";
  }
}

__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned int* count) {
  State& st = GetState();
  if (st.init_count == 0) return kUninitialized;
  *count = static_cast<unsigned int>(st.devices.size());
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned int i,
                                                                         void** handle) {
  State& st = GetState();
  if (st.init_count == 0) return kUninitialized;
  if (i >= st.devices.size()) return kInvalidArgument;
  *handle = st.devices[i].get();
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetName(void* handle, char* buf,
                                                             unsigned int len) {
  auto* dev = static_cast<Device*>(handle);
  std::string name = dev->spec.value("name", "Replayed GPU");
  if (name.size() + 1 > len) return kInsufficientSize;
  std::memcpy(buf, name.c_str(), name.size() + 1);
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void* handle, char* buf,
                                                             unsigned int len) {
  auto* dev = static_cast<Device*>(handle);
  std::string uuid = dev->spec.value("uuid", "GPU-replay");
  if (uuid.size() + 1 > len) return kInsufficientSize;
  std::memcpy(buf, uuid.c_str(), uuid.size() + 1);
  return kSuccess;
}

struct Memory {
  unsigned long long total, free, used;
};
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* handle, Memory* m) {
  int ret;
  const json* v = Field(handle, "memory", "memory", &ret);
  if (v == nullptr) return ret;
  m->used = (*v)[0].get<unsigned long long>();
  m->total = (*v)[1].get<unsigned long long>();
  m->free = m->total - m->used;
  return kSuccess;
}

// The v2 query, only for devices whose JSON has "memory_reserved" (bytes the driver keeps for
// itself); other devices answer NOT_SUPPORTED without using up a sample, so the collector falls
// back to v1. It shares v1's "memory" samples: [used including reserved, total]. Checks the
// versioned-struct header like the real library.
struct MemoryV2 {
  unsigned int version;
  unsigned long long total, reserved, free, used;
};
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo_v2(void* handle, MemoryV2* m) {
  if (handle == nullptr || m == nullptr) return kInvalidArgument;
  const json& spec = static_cast<Device*>(handle)->spec;
  if (!spec.contains("memory_reserved")) return kNotSupported;
  if (m->version != (static_cast<unsigned int>(sizeof(MemoryV2)) | (2u << 24))) {
    return kArgumentVersionMismatch;
  }
  int ret;
  const json* v = Field(handle, "memory", "memory", &ret);
  if (v == nullptr) return ret;
  m->used = (*v)[0].get<unsigned long long>();
  m->total = (*v)[1].get<unsigned long long>();
  m->reserved = spec["memory_reserved"].get<unsigned long long>();
  m->free = m->total - m->used;
  return kSuccess;
}

struct Utilization {
  unsigned int gpu, memory;
};
__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(void* handle,
                                                                         Utilization* u) {
  int ret;
  const json* v = Field(handle, "utilization", "utilization", &ret);
  if (v == nullptr) return ret;
  u->gpu = (*v)[0].get<unsigned int>();
  u->memory = (*v)[1].get<unsigned int>();
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetPowerUsage(void* handle, unsigned int* mw) {
  int ret;
  const json* v = Field(handle, "power", "power_mw", &ret);
  if (v == nullptr) return ret;
  *mw = v->get<unsigned int>();
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetTotalEnergyConsumption(
    void* handle, unsigned long long* mj) {
  int ret;
  const json* v = Field(handle, "energy", "energy_mj", &ret);
  if (v == nullptr) return ret;
  *mj = v->get<unsigned long long>();
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetTemperature(void* handle, int sensor,
                                                                    unsigned int* c) {
  if (sensor != 0) return kInvalidArgument;
  int ret;
  const json* v = Field(handle, "temperature", "temperature_c", &ret);
  if (v == nullptr) return ret;
  *c = v->get<unsigned int>();
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetClockInfo(void* handle, int type,
                                                                  unsigned int* mhz) {
  int ret;
  const char* key = type == 1 ? "clock_sm_mhz" : type == 2 ? "clock_mem_mhz" : "clock_other";
  const json* v = Field(handle, key, key, &ret);
  if (v == nullptr) return ret;
  *mhz = v->get<unsigned int>();
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetCurrentClocksEventReasons(
    void* handle, unsigned long long* reasons) {
  int ret;
  const json* v = Field(handle, "reasons", "clock_event_reasons", &ret);
  if (v == nullptr) return ret;
  *reasons = v->get<unsigned long long>();
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetTotalEccErrors(void* handle, int error_type,
                                                                       int counter_type,
                                                                       unsigned long long* n) {
  if (counter_type != 0) return kInvalidArgument;  // only volatile counters are recorded
  int ret;
  const char* key = error_type == 0 ? "ecc_corrected" : "ecc_uncorrected";
  const json* v = Field(handle, key, key, &ret);
  if (v == nullptr) return ret;
  *n = v->get<unsigned long long>();
  return kSuccess;
}

struct FieldValue {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  int nvmlReturn;
  unsigned long long value;  // the union, as unsigned long long
};
static_assert(sizeof(FieldValue) == 40);

__attribute__((visibility("default"))) int nvmlDeviceGetFieldValues(void* handle, int count,
                                                                    FieldValue* values) {
  int ret;
  const json* fields = Field(handle, "fields", "fields", &ret);
  if (fields == nullptr) return ret;
  for (int i = 0; i < count; ++i) {
    const std::string key = std::to_string(values[i].fieldId);
    if (fields->contains(key)) {
      values[i].valueType = 3;  // unsigned long long
      values[i].value = (*fields)[key].get<unsigned long long>();
      values[i].nvmlReturn = kSuccess;
    } else {
      values[i].nvmlReturn = kNotSupported;
    }
  }
  return kSuccess;
}

struct ProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v3(
    void* handle, unsigned int* count, ProcessInfo* infos) {
  int ret;
  const json* procs = Field(handle, "processes", "processes", &ret);
  if (procs == nullptr) return ret;
  if (procs->size() > *count) {
    *count = static_cast<unsigned int>(procs->size());
    return kInsufficientSize;
  }
  *count = static_cast<unsigned int>(procs->size());
  for (size_t i = 0; i < procs->size(); ++i) {
    infos[i] = ProcessInfo{(*procs)[i][0].get<unsigned int>(),
                           (*procs)[i][1].get<unsigned long long>(), 0xFFFFFFFF, 0xFFFFFFFF};
  }
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMigMode(void* handle, unsigned int* current,
                                                                unsigned int* pending) {
  auto* dev = static_cast<Device*>(handle);
  if (dev->is_mig || !dev->spec.contains("mig")) return kNotSupported;
  *current = *pending = 1;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMaxMigDeviceCount(void* handle,
                                                                          unsigned int* n) {
  auto* dev = static_cast<Device*>(handle);
  if (!dev->spec.contains("mig")) return kNotSupported;
  *n = 7;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMigDeviceHandleByIndex(void* handle,
                                                                               unsigned int i,
                                                                               void** mig) {
  auto* dev = static_cast<Device*>(handle);
  if (i >= dev->migs.size()) return kNotFound;
  *mig = dev->migs[i].get();
  return kSuccess;
}

}  // extern "C"
