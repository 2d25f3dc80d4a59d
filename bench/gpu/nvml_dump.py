"""Samples the real NVML through nvidia-ml-py (an independent reader) and writes what it saw in
the replay library's JSON format (tests/nvml_replay/README.md), so a recording from real hardware
can be replayed in CI, and so the collector's figures can be checked against a second reader.

    python bench/gpu/nvml_dump.py --seconds 20 --interval 0.2 --out h200.json

A query the GPU or driver does not support leaves its key out of the sample (the replay library
then answers NOT_SUPPORTED), exactly as the collector must record it: absent, not 0.
"""

from __future__ import annotations

import argparse
import json
import time

import pynvml as N


def _try(fn, *a):
    try:
        return fn(*a)
    except N.NVMLError:
        return None


def sample(h) -> dict:
    s: dict = {"t": time.time()}
    u = _try(N.nvmlDeviceGetUtilizationRates, h)
    if u is not None:
        s["utilization"] = [u.gpu, u.memory]
    m = _try(N.nvmlDeviceGetMemoryInfo, h)
    if m is not None:
        s["memory"] = [m.used, m.total]
    for key, fn, args in (
        ("power_mw", N.nvmlDeviceGetPowerUsage, ()),
        ("energy_mj", N.nvmlDeviceGetTotalEnergyConsumption, ()),
        ("temperature_c", N.nvmlDeviceGetTemperature, (N.NVML_TEMPERATURE_GPU,)),
        ("clock_sm_mhz", N.nvmlDeviceGetClockInfo, (N.NVML_CLOCK_SM,)),
        ("clock_mem_mhz", N.nvmlDeviceGetClockInfo, (N.NVML_CLOCK_MEM,)),
        ("clock_event_reasons", N.nvmlDeviceGetCurrentClocksThrottleReasons, ()),
        ("ecc_corrected", N.nvmlDeviceGetTotalEccErrors,
         (N.NVML_MEMORY_ERROR_TYPE_CORRECTED, N.NVML_VOLATILE_ECC)),
        ("ecc_uncorrected", N.nvmlDeviceGetTotalEccErrors,
         (N.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, N.NVML_VOLATILE_ECC)),
    ):
        v = _try(fn, h, *args)
        if v is not None:
            s[key] = int(v)
    ids = [197, 198, 138, 139]
    vals = _try(N.nvmlDeviceGetFieldValues, h, ids)
    if vals is not None:
        fields = {}
        for fid, v in zip(ids, vals):
            if v.nvmlReturn == 0:
                fields[str(fid)] = int(v.value.ullVal)
        if fields:
            s["fields"] = fields
    procs = _try(N.nvmlDeviceGetComputeRunningProcesses, h)
    if procs is not None:
        s["processes"] = [[p.pid, int(p.usedGpuMemory or 0)] for p in procs]
    return s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    N.nvmlInit()
    n = N.nvmlDeviceGetCount()
    handles = [N.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
    devices = []
    for h in handles:
        name = N.nvmlDeviceGetName(h)
        uuid = N.nvmlDeviceGetUUID(h)
        devices.append({"name": name if isinstance(name, str) else name.decode(),
                        "uuid": uuid if isinstance(uuid, str) else uuid.decode(), "samples": []})
    constants = {k: getattr(N, k, None) for k in (
        "NVML_FI_DEV_PCIE_COUNT_TX_BYTES", "NVML_FI_DEV_PCIE_COUNT_RX_BYTES",
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX")}
    end = time.time() + args.seconds
    while time.time() < end:
        t0 = time.time()
        for d, h in zip(devices, handles):
            d["samples"].append(sample(h))
        time.sleep(max(0.0, args.interval - (time.time() - t0)))
    meta = {"driver": N.nvmlSystemGetDriverVersion(), "nvml": N.nvmlSystemGetNVMLVersion(),
            "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "field_ids_in_nvml_py": constants, "interval_s": args.interval}
    with open(args.out, "w") as f:
        json.dump({"recorded_with": meta, "devices": devices}, f)
    N.nvmlShutdown()


if __name__ == "__main__":
    main()
