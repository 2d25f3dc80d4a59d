#pragma once
// The few NVML types and functions trainprof uses, declared here so the build needs no NVIDIA
// SDK. Layouts and values follow NVIDIA's nvml.h (stable C ABI since CUDA 10); only what the
// collector calls is declared. NvmlApi resolves them with dlopen/dlsym at run time; a symbol
// the driver lacks stays nullptr and its metrics are absent.

#include <cstdint>
#include <string>

#include "base/status.h"

namespace trainprof::collect::nvml {

// ---- from nvml.h -----------------------------------------------------------------------
using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
inline constexpr nvmlReturn_t NVML_ERROR_RESET_REQUIRED = 16;
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;

struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;  // includes the memory the driver reserves for itself
};
// nvmlDeviceGetMemoryInfo_v2 (driver 510+): adds the driver/firmware reservation, which
// nvidia-smi leaves out of "used". Versioned struct: sizeof | (2 << 24).
struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
inline constexpr unsigned int kNvmlMemoryV2Version =
    static_cast<unsigned int>(sizeof(nvmlMemory_v2_t)) | (2u << 24);
// nvmlProcessInfo_v2_t, used by the _v2 and _v3 process queries.
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;

union nvmlValue_t {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  int siVal;
};
enum nvmlValueType_t : int {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
};
struct nvmlFieldValue_t {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  nvmlValueType_t valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};
static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t layout must match nvml.h");

inline constexpr unsigned int NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138;  // KiB, cumulative
inline constexpr unsigned int NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139;  // KiB, cumulative
inline constexpr unsigned int NVML_FI_DEV_PCIE_COUNT_TX_BYTES = 197;        // bytes, cumulative
inline constexpr unsigned int NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 198;        // bytes, cumulative

inline constexpr int NVML_TEMPERATURE_GPU = 0;
inline constexpr int NVML_CLOCK_SM = 1;
inline constexpr int NVML_CLOCK_MEM = 2;
inline constexpr int NVML_MEMORY_ERROR_TYPE_CORRECTED = 0;
inline constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
inline constexpr int NVML_VOLATILE_ECC = 0;

// Clock event (throttle) reason bits.
inline constexpr unsigned long long kReasonSwPowerCap = 0x4;
inline constexpr unsigned long long kReasonHwSlowdown = 0x8;
inline constexpr unsigned long long kReasonSwThermal = 0x20;
inline constexpr unsigned long long kReasonHwThermal = 0x40;
inline constexpr unsigned long long kReasonHwPowerBrake = 0x80;

inline constexpr unsigned int NVML_DEVICE_NAME_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_DEVICE_UUID_BUFFER_SIZE = 96;

// ---- the function table ----------------------------------------------------------------
struct NvmlApi {
  void* handle = nullptr;  // from dlopen; closed by Unload
  nvmlReturn_t (*Init)() = nullptr;
  nvmlReturn_t (*Shutdown)() = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*DeviceGetCount)(unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*DeviceGetMemoryInfoV2)(nvmlDevice_t, nvmlMemory_v2_t*) = nullptr;  // optional
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetTotalEnergyConsumption)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetClockInfo)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetCurrentClocksEventReasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*DeviceGetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*DeviceGetFieldValues)(nvmlDevice_t, int, nvmlFieldValue_t*) = nullptr;
  nvmlReturn_t (*DeviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned int*,
                                                   nvmlProcessInfo_t*) = nullptr;
  nvmlReturn_t (*DeviceGetMigMode)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int,
                                                  nvmlDevice_t*) = nullptr;

  // dlopen `library` and resolve the table. Unavailable (with dlerror's text) when the library
  // or one of the required entry points (init, count, handle) is missing.
  static StatusOr<NvmlApi> Load(const std::string& library);
  void Unload();
  std::string Error(nvmlReturn_t r) const;
};

}  // namespace trainprof::collect::nvml
