#!/usr/bin/env bash
# The GPU check: one short script for a machine with an NVIDIA GPU (CI has none; the NVML code
# paths run there against tests/nvml_replay). It builds trainprof with that machine's compiler and
# Python, then checks what only real hardware can show:
#   1. real NVML readings: an idle recording, and a training recording next to two independent
#      readers over the same time (nvidia-smi, and nvidia-ml-py through nvml_dump.py, whose dump
#      is also a replay file for CI);
#   2. CUDA step timing (gpu_step spans from CUDA events) and operator detail with CUDA kernels;
#   3. a short GPU training run under `trainprof record`, healthy and starved of data, and the
#      rules, cost and report on each.
# Usage: bash bench/gpu/gpu_check.sh [OUT_DIR]   (with .devdeps/*.deb carried when the machine
# lacks the -dev packages: they are unpacked under /tmp/dev and the build points there).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-${OUT:-/tmp/gpu-check}}
mkdir -p "$OUT"
W=/tmp/gpu-check-work
rm -rf "$W" && mkdir -p "$W/runs"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
step() { printf '\n== %s (t=%ss)\n' "$*" "$SECONDS"; }
PY=${PYTHON:-python3}

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv
echo "cores: $(nproc)"
$PY -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())'
g++ --version | head -1
cmake --version | head -1

DEFINES=()
if compgen -G ".devdeps/*.deb" >/dev/null; then
  step "unpacking carried -dev packages under /tmp/dev"
  DEV=/tmp/dev
  mkdir -p "$DEV"
  for f in .devdeps/*.deb; do dpkg -x "$f" "$DEV"; done
  LIB=$DEV/usr/lib/x86_64-linux-gnu
  cp -a "$DEV"/lib/x86_64-linux-gnu/libz.so.1* "$LIB"/ 2>/dev/null
  ln -sf libz.so.1 "$LIB/libz.so"
  # Link against the machine's own runtime libraries wherever it has them; the carried ones are
  # used only for what it lacks (cpp-httplib). Older carried copies of libz, libzstd or OpenSSL
  # loaded first by trainprof._core broke later imports of torch and pyarrow in the same process
  # ("free(): invalid pointer"), so they must never shadow the system's.
  for so in "$LIB"/lib*.so; do
    soname=$(objdump -p "$so" 2>/dev/null | awk '/SONAME/ {print $2}')
    [[ -n "$soname" ]] || continue
    sys=$(ldconfig -p | awk -v s="$soname" '$1 == s && /x86-64/ {print $NF; exit}')
    if [[ -n "$sys" ]]; then
      rm -f "$LIB/$soname"*
      ln -sf "$sys" "$so"
      echo "  $soname: the system's ($sys)"
    else
      echo "  $soname: carried"
    fi
  done
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$LIB" "$DEV/usr/bin/pkgconf" >"$DEV/pkg-config"
  chmod +x "$DEV/pkg-config"
  # the environment's CMAKE_PREFIX_PATH adds to scikit-build-core's own, which a define would replace
  export PKG_CONFIG_LIBDIR=$LIB/pkgconfig:$DEV/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$DEV \
         CMAKE_PREFIX_PATH=$DEV/usr
  DEFINES+=(-Ccmake.define.PKG_CONFIG_EXECUTABLE="$DEV/pkg-config"
            -Ccmake.define.CMAKE_INSTALL_RPATH="$LIB"
            -Ccmake.define.CMAKE_BUILD_WITH_INSTALL_RPATH=ON
            "-Ccmake.define.CMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags"
            "-Ccmake.define.CMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags"
            "-Ccmake.define.CMAKE_MODULE_LINKER_FLAGS=-Wl,--disable-new-dtags")
fi

step "build (no tests)"
export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
if ! $PY -m pip install -q --no-build-isolation --no-deps -Cbuild-dir=/tmp/tpbuild \
    -Ccmake.build-type=Release "${DEFINES[@]}" . ; then
  echo "BUILD FAILED"; exit 1
fi
TP=$($PY -c 'import trainprof, os; print(os.path.join(os.path.dirname(trainprof.__file__), "bin", "trainprof"))')
[[ -x "$TP" ]] || TP=trainprof
echo "trainprof: $TP"; ldd "$TP" | grep -E "not found|sqlite|zstd|httplib" || true
echo "symbols _core exports: $(nm -D --defined-only "$(dirname "$TP")"/../_core*.so | wc -l) (PyInit__core and nothing from static archives)"

step "1a. real NVML, idle GPU (3 s at 100 ms)"
timeout 60 "$TP" record --interval 100ms --name gpu-idle --out "$W/runs/idle" -- sleep 3
"$TP" show "$W/runs/idle"

step "1b+3. healthy GPU training under record, with nvidia-smi and nvidia-ml-py beside it"
nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,temperature.gpu,clocks.sm,clocks.mem \
  --format=csv -lms 200 >"$W/smi_train.csv" &
SMI=$!
timeout 120 $PY bench/gpu/nvml_dump.py --seconds 45 --interval 0.2 --out "$W/nvml_h200_train.json" &
DUMP=$!
timeout 150 "$TP" record --interval 100ms --name resnet-gpu --instance-type ml.p5en.48xlarge \
  --detail-steps 50-52 --out "$W/runs/train" -- \
  $PY examples/train_resnet_synthetic.py --device cuda --steps 400 --batch-size 256 --width 64 \
  --data-work 0 --workers 4 --timings "$W/timings_train.json"
echo "record exit: $?"
kill $SMI 2>/dev/null
wait $DUMP
$PY bench/gpu/summarize.py "$W/runs/train" --smi "$W/smi_train.csv" --dump "$W/nvml_h200_train.json"
$PY - "$W/runs/train" "$W/timings_train.json" <<'PYEOF'
import json, sys, trainprof
run = trainprof.open(sys.argv[1])
ev = run.events().to_pandas()
cat = ev["category"].astype(str)
gpu = ev[cat == "gpu_step"]                       # CUDA-event time of each step, on the device
host = ev[(cat == "step") & (ev["mode"].astype(str) == "train")].sort_values("start_ns")
t = json.load(open(sys.argv[2]))["steps"]
import statistics as st
gaps = (host["start_ns"].values[1:] - (host["start_ns"].values[:-1] + host["duration_ns"].values[:-1]))
print(f"gpu_step spans: {len(gpu)}, median {gpu['duration_ns'].median() / 1e6:.3f} ms on the GPU; host step"
      f" median {host['duration_ns'].median() / 1e6:.3f} ms, gap between steps median {st.median(gaps) / 1e6:.3f} ms;"
      f" the script's own step timer median {st.median(s['step_ns'] for s in t) / 1e6:.3f} ms")
PYEOF
"$TP" rules "$W/runs/train" || true
"$TP" cost "$W/runs/train" --price-usd-per-hour 7.912 || true   # one H200's share of p5en.48xlarge
"$TP" analyze "$W/runs/train" 2>&1 | head -40 || true

step "3b. GPU starved of data (heavy CPU work per sample, no workers)"
timeout 120 "$TP" record --interval 100ms --name resnet-gpu-starved --instance-type ml.p5en.48xlarge \
  --out "$W/runs/starved" -- \
  $PY examples/train_resnet_synthetic.py --device cuda --steps 40 --batch-size 64 --width 64 \
  --data-work 300 --workers 0
echo "record exit: $?"
$PY bench/gpu/summarize.py "$W/runs/starved"
"$TP" rules "$W/runs/starved" || true
"$TP" cost "$W/runs/starved" --price-usd-per-hour 7.912 || true

step "results"
cp "$W/nvml_h200_train.json" "$W/smi_train.csv" "$OUT/" 2>/dev/null
tar -C "$W" -czf "$OUT/runs.tar.gz" runs timings_train.json 2>/dev/null
ls -la "$OUT"
echo "done in ${SECONDS}s"
