"""A small real PyTorch (CPU) training job with one planted problem, for bench/time_to_finding.py.

It trains an MLP on in-memory batches (no DataLoader, so that nothing but the planted problem
is wrong: SageMaker's Dataloader rule asks for loader processes on 70 % of the cores), healthy
for `--onset` seconds after its first step, then plants the problem and writes the wall time
at which it did to `--onset-file` (the independent truth the bench measures from):

  healthy      nothing planted (no onset)
  leak         keeps a 4 MiB tensor per step in a list (host memory leak)
  starvation   batches from then on come from a DataLoader (num_workers=0) whose Dataset
               sleeps 2 ms per sample in __getitem__ (the loop waits for its data)
  outliers     every 20th step sleeps 400 ms more (step-time outliers)
  slow_init    "initialises" (sleeps) for --init-seconds before its first step; the onset is
               the moment initialisation passed --init-threshold seconds
  cpu_bound    each step also runs CPU-heavy preprocessing on every core (matrix products in
               torch's threads, one per core); the job creates --onset-file's twin the replayed
               GPU reads (the GPU idles while the CPU works)
  io_bound     batches come from a DataLoader (num_workers=0) whose Dataset reads each sample
               from a file it wrote, after dropping it from the page cache (posix_fadvise
               DONTNEED) and syncing a write (real disk I/O); the replayed GPU idles
  low_gpu      nothing changes in the job; the replayed GPU's utilisation drops (to 20-40 %)
  gpu_memory   nothing changes in the job; the replayed GPU's memory in use grows 0.6 % a sample
  straggler    two processes (torch.distributed, gloo), gradients averaged with all_reduce each
               step; rank 1 does 80 ms more work per step (one rank slower than the others)
  recompile    the model is torch.compile'd (aot_eager backend, dynamic=False); the batch size
               changes every 2 s (a new shape: dynamo recompiles)
  loss_nan     the learning rate is multiplied by 1e6: the loss becomes inf, then NaN, within
               steps (training health: LossNaN, sampled every 10 steps by the instrumentation)
  loss_flat    the learning rate is set to 0: the loss stops falling (LossNotDecreasing)

The GPU modes (cpu_bound, io_bound, low_gpu, gpu_memory) run under record with the NVML
replay library (tests/nvml_replay): the job creates --gpu-onset-file at its onset, which
switches the replayed GPU to its planted samples (the bench writes the replay file).

It stops after `--seconds` in all, or as soon as the file `--stop-file` exists (the bench
creates it once the finding arrived). The automatic instrumentation of `trainprof record`
marks the steps; the script itself does not import trainprof.
"""

from __future__ import annotations

import time

STARTED = time.time()  # before importing torch: the job's own start, for slow_init

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402

FEATURES, HIDDEN, CLASSES, BATCH = 64, 256, 10, 64
MODES = ["healthy", "leak", "starvation", "outliers", "slow_init", "cpu_bound", "io_bound",
         "low_gpu", "gpu_memory", "straggler", "recompile", "loss_nan", "loss_flat"]


class SlowDataset(torch.utils.data.Dataset):
    """Random samples, each taking `delay_s` to "decode"."""

    def __init__(self, n: int, delay_s: float):
        self.x = torch.randn(n, FEATURES)
        self.y = torch.randint(0, CLASSES, (n,))
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.delay_s)
        return self.x[i], self.y[i]


class FileDataset(torch.utils.data.Dataset):
    """Samples read from a file, each read from the disk: the file's pages are dropped from the
    page cache before the read, and a small write is synced (I/O-bound input)."""

    def __init__(self, path: str, n: int):
        self.path, self.n = path, n
        self.record = FEATURES * 4
        with open(path, "wb") as f:
            f.write(os.urandom(self.record * n))
            f.flush()
            os.fsync(f.fileno())
        self.fd = os.open(path, os.O_RDONLY)
        self.log = os.open(path + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        off = (i * 7919 % self.n) * self.record
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)
        raw = os.pread(self.fd, self.record, off)
        os.write(self.log, raw[:64])
        os.fsync(self.log)
        x = torch.frombuffer(bytearray(raw), dtype=torch.float32).nan_to_num().clamp(-10, 10)
        return x, torch.tensor(i % CLASSES)


def write_onset(a, step: int) -> None:
    for path in (a.gpu_onset_file,):
        if path:
            open(path, "w").close()  # the replayed GPU switches to its planted samples
    with open(a.onset_file, "w") as f:
        json.dump({"mode": a.mode, "onset_unix_s": time.time(), "step": step}, f)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True, choices=MODES)
    p.add_argument("--seconds", type=float, default=60, help="the job's whole length at most")
    p.add_argument("--onset", type=float, default=8, help="healthy seconds after the first step")
    p.add_argument("--onset-file", required=True)
    p.add_argument("--stop-file", required=True)
    p.add_argument("--gpu-onset-file", default="", help="created at the onset (replayed GPU)")
    p.add_argument("--init-seconds", type=float, default=40, help="slow_init: seconds")
    p.add_argument("--init-threshold", type=float, default=15,
                   help="slow_init: the MaxInitializationTime threshold the bench set, seconds")
    a = p.parse_args()

    rank, world = 0, 1
    if a.mode == "straggler":
        import torch.distributed as dist
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        if rank != 1:
            a.onset_file = a.onset_file + f".rank{rank}"  # rank 1 plants; its onset counts

    if a.mode == "slow_init":
        # The onset: the moment initialisation became slow (the threshold passed).
        with open(a.onset_file, "w") as f:
            json.dump({"mode": a.mode, "onset_unix_s": STARTED + a.init_threshold,
                       "step": 0, "job_start_unix_s": STARTED}, f)
        end = STARTED + a.init_seconds
        while time.time() < end and not os.path.exists(a.stop_file):
            time.sleep(0.2)  # "downloading the dataset"

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, CLASSES))
    run_model = model
    if a.mode == "recompile":
        run_model = torch.compile(model, backend="aot_eager", dynamic=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    batches = [(torch.randn(BATCH, FEATURES), torch.randint(0, CLASSES, (BATCH,)))
               for _ in range(16)]
    kept = []
    loader_iter = None
    start = time.time()
    first_step = None
    planted = False
    step = 0
    batch = BATCH
    last_shape_change = 0.0
    cores = os.cpu_count() or 1
    work = torch.randn(384, 384)
    while True:
        stop = time.time() - start >= a.seconds or os.path.exists(a.stop_file)
        if world > 1:  # every rank stops at the same step (a collective must not hang)
            flag = torch.tensor([1.0 if stop else 0.0])
            torch.distributed.all_reduce(flag)
            stop = flag.item() > 0
        if stop:
            break
        now = time.time()
        if first_step is not None and not planted and a.mode not in ("healthy", "slow_init") \
                and now - first_step >= a.onset and (a.mode != "straggler" or rank == 1):
            planted = True
            if a.mode in ("loss_nan", "loss_flat"):  # training health: lr x 1e6 (diverges) / 0
                for group in opt.param_groups:
                    group["lr"] = group["lr"] * 1e6 if a.mode == "loss_nan" else 0.0
            if a.mode == "starvation":
                loader = torch.utils.data.DataLoader(SlowDataset(BATCH * 10_000, 0.002),
                                                     batch_size=BATCH, num_workers=0)
                loader_iter = iter(loader)
            if a.mode == "io_bound":
                ds = FileDataset(a.onset_file + ".data", 8192)
                loader_iter = iter(torch.utils.data.DataLoader(ds, batch_size=BATCH,
                                                               num_workers=0))
            if a.mode == "cpu_bound":
                torch.set_num_threads(cores)
            last_shape_change = now
            write_onset(a, step)
        if loader_iter is not None:
            try:
                x, y = next(loader_iter)
            except StopIteration:
                loader_iter = None
                x, y = batches[step % len(batches)]
        else:
            x, y = batches[step % len(batches)]
        if a.mode == "recompile" and planted and now - last_shape_change >= 2:
            batch = max(8, batch - 4)  # a new shape: dynamo recompiles
            last_shape_change = now
        if a.mode == "recompile":
            x, y = x[:batch], y[:batch]
        opt.zero_grad()
        loss = loss_fn(run_model(x), y)
        if planted and a.mode == "cpu_bound":
            for _ in range(6):
                work = torch.tanh(work @ work) * 0.5  # preprocessing on every core
        else:
            time.sleep(0.04)  # the rest of a step: an accelerator's share of it
        if planted and a.mode == "outliers" and step % 20 == 0:
            time.sleep(0.4)  # inside the step (which ends at optimizer.step)
        if planted and a.mode == "straggler":
            time.sleep(0.08)  # this rank's extra work
        loss.backward()
        if world > 1:  # data parallel by hand: average the gradients (a gloo all_reduce)
            flat = torch.cat([q.grad.reshape(-1) for q in model.parameters()])
            torch.distributed.all_reduce(flat)
            flat /= world
            off = 0
            for q in model.parameters():
                q.grad.copy_(flat[off:off + q.numel()].view_as(q))
                off += q.numel()
        opt.step()
        if planted and a.mode == "leak":
            kept.append(torch.randn(1024 * 1024))  # 4 MiB kept "for later"
        if first_step is None:
            first_step = time.time()
        step += 1
    print(f"{a.mode} (rank {rank}): {step} steps, {len(kept)} tensors kept", flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
