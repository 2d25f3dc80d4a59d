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
  loss_nan     the learning rate is multiplied by 1e6: the loss becomes inf, then NaN, within
               steps (training health: LossNaN, sampled every 10 steps by the instrumentation)
  loss_flat    the learning rate is set to 0: the loss stops falling (LossNotDecreasing)

It stops after `--seconds` in all, or as soon as the file `--stop-file` exists (the bench
creates it once the finding arrived). The automatic instrumentation of `trainprof record`
marks the steps; the script itself does not import trainprof.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

FEATURES, HIDDEN, CLASSES, BATCH = 64, 256, 10, 64


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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True, choices=["healthy", "leak", "starvation", "outliers",
                                                         "loss_nan", "loss_flat"])
    p.add_argument("--seconds", type=float, default=60, help="the job's whole length at most")
    p.add_argument("--onset", type=float, default=8, help="healthy seconds after the first step")
    p.add_argument("--onset-file", required=True)
    p.add_argument("--stop-file", required=True)
    a = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, CLASSES))
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
    while time.time() - start < a.seconds and not os.path.exists(a.stop_file):
        now = time.time()
        if first_step is not None and not planted and a.mode != "healthy" and \
                now - first_step >= a.onset:
            planted = True
            if a.mode in ("loss_nan", "loss_flat"):  # training health: lr x 1e6 (diverges) / 0
                for group in opt.param_groups:
                    group["lr"] = group["lr"] * 1e6 if a.mode == "loss_nan" else 0.0
            if a.mode == "starvation":
                loader = torch.utils.data.DataLoader(SlowDataset(BATCH * 10_000, 0.002),
                                                     batch_size=BATCH, num_workers=0)
                loader_iter = iter(loader)
            with open(a.onset_file, "w") as f:
                json.dump({"mode": a.mode, "onset_unix_s": time.time(), "step": step}, f)
        x, y = next(loader_iter) if loader_iter is not None else batches[step % len(batches)]
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        time.sleep(0.04)  # the rest of a step: an accelerator's share of it
        if planted and a.mode == "outliers" and step % 20 == 0:
            time.sleep(0.4)  # inside the step (which ends at optimizer.step)
        loss.backward()
        opt.step()
        if planted and a.mode == "leak":
            kept.append(torch.randn(1024 * 1024))  # 4 MiB kept "for later"
        if first_step is None:
            first_step = time.time()
        step += 1
    print(f"{a.mode}: {step} steps, {len(kept)} tensors kept", flush=True)


if __name__ == "__main__":
    main()
