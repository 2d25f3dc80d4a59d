#include "collect/nvml/nvml_collector.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <system_error>
#include <thread>

#include "base/logging.h"
#include "collect/metric_catalog.h"
#include "collect/nvml/nvml_api.h"

namespace trainprof::collect::nvml {
namespace {

// Queries that can be unsupported, one bit each in Gpu::unsupported.
enum Field {
  kUtilization,
  kMemory,
  kPower,
  kEnergy,
  kTemperature,
  kSmClock,
  kMemClock,
  kReasons,
  kEccCorrected,
  kEccUncorrected,
  kPcieTx,
  kPcieRx,
  kNvlinkTx,
  kNvlinkRx,
  kProcesses,
  kMig,
  kNumFields,
};

// The cumulative counters read through nvmlDeviceGetFieldValues, turned into rates.
struct CounterField {
  Field field;
  unsigned int field_id;
  double bytes_per_unit;
  std::string_view metric;
};
constexpr CounterField kCounterFields[] = {
    {kPcieTx, NVML_FI_DEV_PCIE_COUNT_TX_BYTES, 1.0, metric::kGpuPcieTx},
    {kPcieRx, NVML_FI_DEV_PCIE_COUNT_RX_BYTES, 1.0, metric::kGpuPcieRx},
    {kNvlinkTx, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 1024.0, metric::kGpuNvlinkTx},
    {kNvlinkRx, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 1024.0, metric::kGpuNvlinkRx},
};
constexpr int kNumCounterFields = 4;

double FieldValueAsDouble(const nvmlFieldValue_t& v) {
  switch (v.valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
      return v.value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      return static_cast<double>(v.value.uiVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return static_cast<double>(v.value.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return static_cast<double>(v.value.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      return static_cast<double>(v.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT:
      return static_cast<double>(v.value.siVal);
  }
  return -1;
}

struct Reading {
  std::string_view metric;
  std::string device;
  double value = 0;
};

struct Gpu {
  nvmlDevice_t handle = nullptr;
  std::string label;  // "gpuN"
  model::GpuInfo info;
  bool lost = false;
  bool memory_v2 = false;  // nvmlDeviceGetMemoryInfo_v2 answered at init: used excludes reserved
  uint32_t unsupported = 0;
  double prev_counter[kNumCounterFields] = {};
  int64_t prev_mono_ns[kNumCounterFields] = {};
  bool have_prev[kNumCounterFields] = {};
  std::vector<nvmlProcessInfo_t> processes = std::vector<nvmlProcessInfo_t>(64);

  bool Supported(Field f) const { return (unsupported & (1u << f)) == 0; }
};

enum class Job { kNone, kInit, kSample, kStop };

}  // namespace

struct NvmlCollector::Shared {
  std::string library;
  NvmlApi api;
  bool initialized = false;
  Status init_status;
  std::vector<Gpu> gpus;

  std::mutex mu;
  std::condition_variable cv;
  Job job = Job::kNone;
  bool busy = false;
  Tick tick;
  // Results of the last sampling round: written by the worker while busy, read by Sample.
  std::vector<Reading> readings;
  size_t num_readings = 0;
  int64_t errors = 0;
  int64_t newly_lost = 0;

  ~Shared() {
    if (initialized && api.Shutdown != nullptr) api.Shutdown();
    api.Unload();
  }

  void Emit(std::string_view metric, std::string_view device, double value) {
    if (num_readings == readings.size()) readings.emplace_back();
    Reading& r = readings[num_readings++];
    r.metric = metric;
    r.device.assign(device);  // reuses the string's capacity from earlier rounds
    r.value = value;
  }

  // Memory as nvidia-smi shows it: with the v2 query, "used" leaves out what the driver and
  // firmware reserve (about 615 MiB on an idle H200, where v1 reports it as used). Computed as
  // total - free - reserved, since drivers differ on whether v2's own "used" includes reserved.
  nvmlReturn_t ReadMemory(const Gpu& g, nvmlMemory_t* out) {
    if (!g.memory_v2) return api.DeviceGetMemoryInfo(g.handle, out);
    nvmlMemory_v2_t m2{};
    m2.version = kNvmlMemoryV2Version;
    const nvmlReturn_t r = api.DeviceGetMemoryInfoV2(g.handle, &m2);
    if (r != NVML_SUCCESS) return r;
    const unsigned long long taken = m2.total - std::min(m2.total, m2.free);
    out->total = m2.total;
    out->free = m2.free;
    out->used = taken - std::min(taken, m2.reserved);
    return NVML_SUCCESS;
  }

  void EmitMemory(std::string_view device, const nvmlMemory_t& m) {
    Emit(metric::kGpuMemoryUsed, device, static_cast<double>(m.used));
    Emit(metric::kGpuMemoryTotal, device, static_cast<double>(m.total));
    if (m.total > 0) {
      Emit(metric::kGpuMemoryUsedRatio, device,
           static_cast<double>(m.used) / static_cast<double>(m.total));
    }
  }

  // True when the call succeeded; otherwise records why (unsupported, lost, error).
  bool Check(Gpu& gpu, nvmlReturn_t r, Field field) {
    if (r == NVML_SUCCESS) return true;
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_NO_PERMISSION) {
      gpu.unsupported |= 1u << field;
    } else if (r == NVML_ERROR_GPU_IS_LOST) {
      if (!gpu.lost) {
        gpu.lost = true;
        ++newly_lost;
        TP_LOG_WARNING("GPU " + std::to_string(gpu.info.index) + " (" + gpu.info.uuid +
                       ") fell off the bus (NVML GPU_IS_LOST): no more metrics from it");
      }
    } else {
      ++errors;
    }
    return false;
  }

  void DoInit();
  void DoSample();
  void SampleGpu(Gpu& gpu);
};

void NvmlCollector::Shared::DoInit() {
  StatusOr<NvmlApi> api_or = NvmlApi::Load(library);
  if (!api_or.ok()) {
    init_status = api_or.status();
    return;
  }
  api = *api_or;
  nvmlReturn_t r = api.Init();
  if (r != NVML_SUCCESS) {
    init_status = Unavailable("nvmlInit failed (" + library + "): " + api.Error(r));
    return;
  }
  initialized = true;
  unsigned int count = 0;
  r = api.DeviceGetCount(&count);
  if (r != NVML_SUCCESS) {
    init_status = Unavailable("nvmlDeviceGetCount failed: " + api.Error(r));
    return;
  }
  for (unsigned int i = 0; i < count; ++i) {
    Gpu gpu;
    gpu.info.index = static_cast<int>(i);
    gpu.label = "gpu" + std::to_string(i);
    r = api.DeviceGetHandleByIndex(i, &gpu.handle);
    if (r != NVML_SUCCESS) {
      // Keep the slot so labels stay gpuN = NVML index N; the GPU is reported as lost.
      gpu.lost = true;
      ++errors;
      TP_LOG_WARNING("NVML cannot open GPU " + std::to_string(i) + ": " + api.Error(r));
      gpus.push_back(std::move(gpu));
      continue;
    }
    char buf[NVML_DEVICE_NAME_BUFFER_SIZE];
    if (api.DeviceGetName && api.DeviceGetName(gpu.handle, buf, sizeof(buf)) == NVML_SUCCESS) {
      gpu.info.name = buf;
    }
    if (api.DeviceGetUUID && api.DeviceGetUUID(gpu.handle, buf, sizeof(buf)) == NVML_SUCCESS) {
      gpu.info.uuid = buf;
    }
    // One memory query at init: v2 when the library has it and the GPU answers, else v1.
    if (api.DeviceGetMemoryInfoV2) {
      nvmlMemory_v2_t m2{};
      m2.version = kNvmlMemoryV2Version;
      if (api.DeviceGetMemoryInfoV2(gpu.handle, &m2) == NVML_SUCCESS) {
        gpu.memory_v2 = true;
        gpu.info.memory_total_bytes = static_cast<int64_t>(m2.total);
      }
    }
    nvmlMemory_t mem;
    if (!gpu.memory_v2 && api.DeviceGetMemoryInfo &&
        api.DeviceGetMemoryInfo(gpu.handle, &mem) == NVML_SUCCESS) {
      gpu.info.memory_total_bytes = static_cast<int64_t>(mem.total);
    }
    gpus.push_back(std::move(gpu));
  }
  readings.reserve(gpus.size() * 24);
}

void NvmlCollector::Shared::SampleGpu(Gpu& g) {
  const std::string_view dev = g.label;
  // Each block: skip when unsupported or absent from the library; stop when the GPU is lost.
  if (g.Supported(kUtilization) && api.DeviceGetUtilizationRates) {
    nvmlUtilization_t u;
    if (Check(g, api.DeviceGetUtilizationRates(g.handle, &u), kUtilization)) {
      Emit(metric::kGpuUtilization, dev, u.gpu / 100.0);
      Emit(metric::kGpuMemoryUtilization, dev, u.memory / 100.0);
    }
    if (g.lost) return;
  }
  if (g.Supported(kMemory) && api.DeviceGetMemoryInfo) {
    nvmlMemory_t m;
    if (Check(g, ReadMemory(g, &m), kMemory)) {
      EmitMemory(dev, m);
    }
    if (g.lost) return;
  }
  if (g.Supported(kPower) && api.DeviceGetPowerUsage) {
    unsigned int mw = 0;
    if (Check(g, api.DeviceGetPowerUsage(g.handle, &mw), kPower)) {
      Emit(metric::kGpuPower, dev, mw / 1000.0);
    }
    if (g.lost) return;
  }
  if (g.Supported(kEnergy) && api.DeviceGetTotalEnergyConsumption) {
    unsigned long long mj = 0;
    if (Check(g, api.DeviceGetTotalEnergyConsumption(g.handle, &mj), kEnergy)) {
      Emit(metric::kGpuEnergy, dev, static_cast<double>(mj) / 1000.0);
    }
    if (g.lost) return;
  }
  if (g.Supported(kTemperature) && api.DeviceGetTemperature) {
    unsigned int c = 0;
    if (Check(g, api.DeviceGetTemperature(g.handle, NVML_TEMPERATURE_GPU, &c), kTemperature)) {
      Emit(metric::kGpuTemperature, dev, c);
    }
    if (g.lost) return;
  }
  for (auto [field, clock, name] : {std::tuple{kSmClock, NVML_CLOCK_SM, metric::kGpuSmClock},
                                    std::tuple{kMemClock, NVML_CLOCK_MEM, metric::kGpuMemClock}}) {
    if (!g.Supported(field) || !api.DeviceGetClockInfo) continue;
    unsigned int mhz = 0;
    if (Check(g, api.DeviceGetClockInfo(g.handle, clock, &mhz), field)) {
      Emit(name, dev, mhz * 1e6);
    }
    if (g.lost) return;
  }
  if (g.Supported(kReasons) && api.DeviceGetCurrentClocksEventReasons) {
    unsigned long long reasons = 0;
    if (Check(g, api.DeviceGetCurrentClocksEventReasons(g.handle, &reasons), kReasons)) {
      Emit(metric::kGpuClockEventReasons, dev, static_cast<double>(reasons));
      Emit(metric::kGpuThrottlePower, dev,
           (reasons & (kReasonSwPowerCap | kReasonHwPowerBrake)) ? 1.0 : 0.0);
      Emit(metric::kGpuThrottleThermal, dev,
           (reasons & (kReasonSwThermal | kReasonHwThermal)) ? 1.0 : 0.0);
    }
    if (g.lost) return;
  }
  for (auto [field, type, name] :
       {std::tuple{kEccCorrected, NVML_MEMORY_ERROR_TYPE_CORRECTED, metric::kGpuEccCorrected},
        std::tuple{kEccUncorrected, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                   metric::kGpuEccUncorrected}}) {
    if (!g.Supported(field) || !api.DeviceGetTotalEccErrors) continue;
    unsigned long long n = 0;
    if (Check(g, api.DeviceGetTotalEccErrors(g.handle, type, NVML_VOLATILE_ECC, &n), field)) {
      Emit(name, dev, static_cast<double>(n));
    }
    if (g.lost) return;
  }
  // Cumulative PCIe and NVLink counters in one call. (nvmlDeviceGetPcieThroughput is not used:
  // it samples for ~20 ms per direction inside the call.)
  if (api.DeviceGetFieldValues) {
    nvmlFieldValue_t values[kNumCounterFields];
    int which[kNumCounterFields];
    int n = 0;
    for (int i = 0; i < kNumCounterFields; ++i) {
      if (!g.Supported(kCounterFields[i].field)) continue;
      values[n] = nvmlFieldValue_t{};
      values[n].fieldId = kCounterFields[i].field_id;
      // NVLink throughput fields are GPU-wide totals whatever the scope; 0 = first link.
      values[n].scopeId = 0;
      which[n++] = i;
    }
    if (n > 0) {
      nvmlReturn_t r = api.DeviceGetFieldValues(g.handle, n, values);
      if (r != NVML_SUCCESS) {
        if (r == NVML_ERROR_NOT_SUPPORTED) {
          for (int j = 0; j < n; ++j) g.unsupported |= 1u << kCounterFields[which[j]].field;
        } else {
          Check(g, r, kPcieTx);
        }
        if (g.lost) return;
      } else {
        for (int j = 0; j < n; ++j) {
          const int i = which[j];
          const CounterField& cf = kCounterFields[i];
          if (values[j].nvmlReturn != NVML_SUCCESS) {
            // A field the driver rejects for this GPU will not start working: stop asking.
            if (values[j].nvmlReturn == NVML_ERROR_GPU_IS_LOST) {
              Check(g, values[j].nvmlReturn, cf.field);
              return;
            }
            g.unsupported |= 1u << cf.field;
            continue;
          }
          const double now = FieldValueAsDouble(values[j]) * cf.bytes_per_unit;
          if (g.have_prev[i] && tick.mono_ns > g.prev_mono_ns[i] && now >= g.prev_counter[i]) {
            Emit(cf.metric, dev,
                 (now - g.prev_counter[i]) * 1e9 /
                     static_cast<double>(tick.mono_ns - g.prev_mono_ns[i]));
          }
          g.prev_counter[i] = now;
          g.prev_mono_ns[i] = tick.mono_ns;
          g.have_prev[i] = true;
        }
      }
    }
  }
  if (g.Supported(kProcesses) && api.DeviceGetComputeRunningProcesses) {
    unsigned int count = static_cast<unsigned int>(g.processes.size());
    nvmlReturn_t r = api.DeviceGetComputeRunningProcesses(g.handle, &count, g.processes.data());
    if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
      g.processes.resize(count + 16);  // more processes than ever before: grow once
      count = static_cast<unsigned int>(g.processes.size());
      r = api.DeviceGetComputeRunningProcesses(g.handle, &count, g.processes.data());
    }
    if (Check(g, r, kProcesses)) {
      char label[48];
      for (unsigned int i = 0; i < count && i < g.processes.size(); ++i) {
        const nvmlProcessInfo_t& p = g.processes[i];
        if (p.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE) continue;  // e.g. under MIG/no perms
        std::snprintf(label, sizeof(label), "%s/pid%u", g.label.c_str(), p.pid);
        Emit(metric::kGpuProcessMemory, label, static_cast<double>(p.usedGpuMemory));
      }
    }
    if (g.lost) return;
  }
  if (g.Supported(kMig) && api.DeviceGetMigMode && api.DeviceGetMaxMigDeviceCount &&
      api.DeviceGetMigDeviceHandleByIndex) {
    unsigned int current = 0, pending = 0;
    if (!Check(g, api.DeviceGetMigMode(g.handle, &current, &pending), kMig)) return;
    if (current != 1) return;
    unsigned int max = 0;
    if (!Check(g, api.DeviceGetMaxMigDeviceCount(g.handle, &max), kMig)) return;
    char label[48];
    for (unsigned int i = 0; i < max; ++i) {
      nvmlDevice_t mig = nullptr;
      nvmlReturn_t r = api.DeviceGetMigDeviceHandleByIndex(g.handle, i, &mig);
      if (r == NVML_ERROR_NOT_FOUND) continue;  // an empty MIG slot
      if (r != NVML_SUCCESS) {
        Check(g, r, kMig);
        return;
      }
      nvmlMemory_t m;
      if (api.DeviceGetMemoryInfo && api.DeviceGetMemoryInfo(mig, &m) == NVML_SUCCESS) {
        std::snprintf(label, sizeof(label), "%s/mig%u", g.label.c_str(), i);
        EmitMemory(label, m);
      }
    }
  }
}

void NvmlCollector::Shared::DoSample() {
  num_readings = 0;
  errors = 0;
  newly_lost = 0;
  for (Gpu& gpu : gpus) {
    if (!gpu.lost) SampleGpu(gpu);
  }
}

namespace {

void WorkerMain(std::shared_ptr<NvmlCollector::Shared> s) {
  std::unique_lock lock(s->mu);
  for (;;) {
    s->cv.wait(lock, [&] { return s->job != Job::kNone; });
    const Job job = s->job;
    s->job = Job::kNone;
    if (job == Job::kStop) return;
    lock.unlock();
    if (job == Job::kInit) {
      s->DoInit();
    } else {
      s->DoSample();
    }
    lock.lock();
    s->busy = false;
    s->cv.notify_all();
  }
}

}  // namespace

NvmlCollector::NvmlCollector(std::shared_ptr<Shared> shared, std::thread worker, Options options)
    : shared_(std::move(shared)), worker_(std::move(worker)), options_(std::move(options)) {}

StatusOr<std::unique_ptr<NvmlCollector>> NvmlCollector::Create(const Options& options) {
  auto shared = std::make_shared<Shared>();
  shared->library = options.library;
  std::thread worker;
  try {
    worker = std::thread(WorkerMain, shared);
  } catch (const std::system_error& e) {
    return Unavailable(std::string("NVML: cannot start the thread that calls it: ") + e.what());
  }
  std::unique_lock lock(shared->mu);
  shared->busy = true;
  shared->job = Job::kInit;
  shared->cv.notify_all();
  const bool finished =
      shared->cv.wait_for(lock, options.call_timeout * 10, [&] { return !shared->busy; });
  if (!finished || !shared->init_status.ok()) {
    shared->job = Job::kStop;
    shared->cv.notify_all();
    lock.unlock();
    if (finished) {
      worker.join();
      return shared->init_status;
    }
    // The init call hangs: leave the thread to it; it exits once the call returns.
    worker.detach();
    return Unavailable("NVML initialisation did not return within " +
                       std::to_string((options.call_timeout * 10).count()) + " ms");
  }
  lock.unlock();
  // The collector owns the thread from now on; it joins or detaches it when destroyed.
  return std::unique_ptr<NvmlCollector>(new NvmlCollector(shared, std::move(worker), options));
}

NvmlCollector::~NvmlCollector() {
  std::unique_lock lock(shared_->mu);
  shared_->job = Job::kStop;
  shared_->cv.notify_all();
  const bool stuck = shared_->busy;
  lock.unlock();
  if (stuck) {
    // The worker is inside an NVML call that does not return. It holds its own reference to
    // the shared state and leaves once the call returns; NVML is shut down by the last owner.
    worker_.detach();
  } else {
    worker_.join();
  }
}

void NvmlCollector::Sample(const Tick& tick, SampleSink& sink) {
  Shared& s = *shared_;
  std::unique_lock lock(s.mu);
  if (s.busy) {
    // The previous round is still stuck in NVML: no GPU values for this tick either.
    sink.Count(kNvmlTimeoutsCounter, 1);
    return;
  }
  s.busy = true;
  s.tick = tick;
  s.job = Job::kSample;
  s.cv.notify_all();
  if (!s.cv.wait_for(lock, options_.call_timeout, [&] { return !s.busy; })) {
    sink.Count(kNvmlTimeoutsCounter, 1);
    TP_LOG_ONCE(LogLevel::kWarning, "NVML calls did not return within " +
                                        std::to_string(options_.call_timeout.count()) +
                                        " ms: GPU values of such ticks are left out (counted)");
    return;
  }
  for (size_t i = 0; i < s.num_readings; ++i) {
    const Reading& r = s.readings[i];
    sink.Add(r.metric, r.device, r.value);
  }
  if (s.errors > 0) sink.Count(kNvmlErrorsCounter, s.errors);
  if (s.newly_lost > 0) sink.Count(kGpuLostCounter, s.newly_lost);
}

void NvmlCollector::Describe(model::NodeInfo* node) const {
  // The GPU list and each GpuInfo are fixed after init; the worker only touches other fields.
  for (const Gpu& gpu : shared_->gpus) node->gpus.push_back(gpu.info);
}

size_t NvmlCollector::gpu_count() const {
  std::lock_guard lock(shared_->mu);
  return shared_->gpus.size();
}

}  // namespace trainprof::collect::nvml
