#include "collect/nvml/nvml_api.h"

#include <dlfcn.h>

namespace trainprof::collect::nvml {
namespace {

// Looks up the first of `names` the library exports (versioned names first).
template <typename Fn>
void Resolve(void* handle, Fn* fn, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* sym = ::dlsym(handle, name)) {
      *fn = reinterpret_cast<Fn>(sym);
      return;
    }
  }
}

}  // namespace

StatusOr<NvmlApi> NvmlApi::Load(const std::string& library) {
  NvmlApi api;
  api.handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api.handle == nullptr) {
    const char* err = ::dlerror();
    return Unavailable("cannot load NVML (" + library + "): " + (err ? err : "dlopen failed"));
  }
  void* h = api.handle;
  Resolve(h, &api.Init, {"nvmlInit_v2", "nvmlInit"});
  Resolve(h, &api.Shutdown, {"nvmlShutdown"});
  Resolve(h, &api.ErrorString, {"nvmlErrorString"});
  Resolve(h, &api.DeviceGetCount, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  Resolve(h, &api.DeviceGetHandleByIndex,
          {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  Resolve(h, &api.DeviceGetName, {"nvmlDeviceGetName"});
  Resolve(h, &api.DeviceGetUUID, {"nvmlDeviceGetUUID"});
  Resolve(h, &api.DeviceGetMemoryInfo, {"nvmlDeviceGetMemoryInfo"});
  Resolve(h, &api.DeviceGetMemoryInfoV2, {"nvmlDeviceGetMemoryInfo_v2"});
  Resolve(h, &api.DeviceGetUtilizationRates, {"nvmlDeviceGetUtilizationRates"});
  Resolve(h, &api.DeviceGetPowerUsage, {"nvmlDeviceGetPowerUsage"});
  Resolve(h, &api.DeviceGetTotalEnergyConsumption, {"nvmlDeviceGetTotalEnergyConsumption"});
  Resolve(h, &api.DeviceGetTemperature, {"nvmlDeviceGetTemperature"});
  Resolve(h, &api.DeviceGetClockInfo, {"nvmlDeviceGetClockInfo"});
  // Renamed in CUDA 12.2 ("throttle" -> "clocks event"); same signature and bits.
  Resolve(h, &api.DeviceGetCurrentClocksEventReasons,
          {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  Resolve(h, &api.DeviceGetTotalEccErrors, {"nvmlDeviceGetTotalEccErrors"});
  Resolve(h, &api.DeviceGetFieldValues, {"nvmlDeviceGetFieldValues"});
  // _v3 and _v2 take nvmlProcessInfo_v2_t; the unversioned v1 struct differs, so not used.
  Resolve(h, &api.DeviceGetComputeRunningProcesses,
          {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  Resolve(h, &api.DeviceGetMigMode, {"nvmlDeviceGetMigMode"});
  Resolve(h, &api.DeviceGetMaxMigDeviceCount, {"nvmlDeviceGetMaxMigDeviceCount"});
  Resolve(h, &api.DeviceGetMigDeviceHandleByIndex, {"nvmlDeviceGetMigDeviceHandleByIndex"});
  if (api.Init == nullptr || api.DeviceGetCount == nullptr ||
      api.DeviceGetHandleByIndex == nullptr) {
    api.Unload();
    return Unavailable(library +
                       " does not export nvmlInit/nvmlDeviceGetCount/"
                       "nvmlDeviceGetHandleByIndex: not an NVML library");
  }
  return api;
}

void NvmlApi::Unload() {
  if (handle != nullptr) ::dlclose(handle);
  *this = NvmlApi();
}

std::string NvmlApi::Error(nvmlReturn_t r) const {
  const char* text = ErrorString ? ErrorString(r) : nullptr;
  return "NVML error " + std::to_string(r) + (text ? std::string(" (") + text + ")" : "");
}

}  // namespace trainprof::collect::nvml
