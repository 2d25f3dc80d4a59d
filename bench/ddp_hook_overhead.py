"""What timing DDP's gradient all-reduces costs a training step (issue 20): the same
DistributedDataParallel training (gloo, CPU, WORLD ranks on this host, BUCKETS buckets a step)
run in three ways, interleaved REPEAT times:
    plain   no trainprof at all (DDP's own C++ path)
    pyhook  no trainprof, torch's own Python allreduce_hook registered (what any Python
            communication hook costs: a Python call per bucket and a callback on gloo's thread)
    off     recorded by trainprof, DDP capture off (TRAINPROF_DDP_COLLECTIVES=0)
    on      recorded by trainprof with its communication hook on every bucket
Each rank times its own steps (perf_counter around forward, backward and optimizer step) after
WARMUP steps; the figure is the median step of rank 0, and on - off per step and per bucket.
The final parameters of every mode must be bitwise equal (printed: the hook changes nothing).

Usage: python bench/ddp_hook_overhead.py [--steps 300] [--repeat 3] [--world 2]"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

JOB = """
import hashlib, json, sys, time, torch, torch.distributed as dist
from torch import nn
torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(0)
layers = []
for _ in range(8):
    layers += [nn.Linear(128, 128), nn.ReLU()]
model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers, nn.Linear(128, 4)),
                                            bucket_cap_mb=0.07)  # about one bucket a layer
if sys.argv[2] == "pyhook":  # torch's own Python allreduce hook: what any Python hook costs
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    model.register_comm_hook(None, default_hooks.allreduce_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
g = torch.Generator().manual_seed(dist.get_rank())
times = []
for step in range(int(sys.argv[1])):
    x, y = torch.randn(16, 128, generator=g), torch.randint(0, 4, (16,), generator=g)
    t = time.perf_counter()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()
    times.append(time.perf_counter() - t)
h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
try:
    buckets = len(model.reducer._get_zeros_like_grad_buckets())
except Exception:
    buckets = None
print(json.dumps({"rank": dist.get_rank(), "times": times, "digest": h.hexdigest(),
                  "buckets": buckets}))
dist.destroy_process_group()
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_mode(mode: str, script: Path, tmp: Path, steps: int, world: int) -> list[dict]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF")}
    port = str(_port())
    procs = []
    for rank in range(world):
        env = dict(base, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE=str(world),
                   RANK=str(rank), LOCAL_RANK=str(rank), OMP_NUM_THREADS="1")
        if mode not in ("plain", "pyhook"):
            import trainprof
            from trainprof import _core

            env.update(_core.child_environment(
                str(tmp / f"run-{mode}-{port}"), node="bench",
                package_dir=str(Path(trainprof.__file__).resolve().parent), parent=env))
            if mode == "off":
                env["TRAINPROF_DDP_COLLECTIVES"] = "0"
        procs.append(subprocess.Popen([sys.executable, str(script), str(steps), mode], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"{mode}: exit {p.returncode}: {err[-1500:]}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return sorted(outs, key=lambda o: o["rank"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--world", type=int, default=2)
    a = ap.parse_args()
    buckets = None
    with tempfile.TemporaryDirectory(prefix="ddp-hook-") as d:
        tmp = Path(d)
        script = tmp / "job.py"
        script.write_text(JOB)
        medians = {"plain": [], "pyhook": [], "off": [], "on": []}
        digests, pyhook_digests = set(), set()
        for _ in range(a.repeat):
            for mode in medians:
                outs = run_mode(mode, script, tmp, a.steps, a.world)
                medians[mode].append(statistics.median(outs[0]["times"][a.warmup:]) * 1e3)
                if mode == "pyhook":
                    pyhook_digests.add(tuple(o["digest"] for o in outs))
                else:
                    digests.add(tuple(o["digest"] for o in outs))
                buckets = outs[0]["buckets"] or buckets
    pyhook_equal = pyhook_digests <= digests
    for mode, ms in medians.items():
        print(f"  {mode:5s} median step {statistics.median(ms):.3f} ms (repeats: "
              f"{', '.join(f'{m:.3f}' for m in ms)})")
    on, off = statistics.median(medians["on"]), statistics.median(medians["off"])
    print(f"DDP capture costs {(on - off) * 1e3:+.0f} us per step ({(on - off) / off * 100:+.1f} %), "
          f"{(on - off) * 1e3 / (buckets or 1):+.1f} us per bucket ({buckets} buckets, {a.world} gloo "
          f"ranks); final parameters bitwise equal with and without trainprof: {len(digests) == 1}")
    pyhook, plain = statistics.median(medians["pyhook"]), statistics.median(medians["plain"])
    print(f"torch's own Python allreduce_hook costs {(pyhook - plain) * 1e3:+.0f} us per step over "
          f"DDP's C++ path; it divides (x / world) where DDP multiplies (x * (1 / world)): equal "
          f"to DDP's parameters bitwise: {pyhook_equal}")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
