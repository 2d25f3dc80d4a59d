"""A small PyTorch training job with a planted bottleneck, for `trainprof tune` (docs/tune.md).

Each sample goes through a slow "transform" in the Dataset's __getitem__ (standing for image
decoding or augmentation); it waits in time.sleep, which releases the GIL, so DataLoader worker
processes overlap it even on a busy machine with few cores. The job loads with num_workers=0
unless told otherwise, so the training loop waits for data most of the time: more workers make
it several times faster.

Knobs on the command line:
  --num-workers N     the DataLoader's workers (default 0: the bottleneck)
  --log-every N       how often the loss is printed: a knob that does nothing for speed
  --batch-size N      changes the mathematics; the model's activations grow with it, so a huge
                      value runs out of memory under a memory ceiling (`tune --max-memory-gib`)
  --steps N           stop after N training steps (0: run --epochs epochs)

At the end it prints its own measure of speed, independent of trainprof:
  samples_per_second=<samples after the first --warmup steps / their wall time>
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowTransformDataset(Dataset):
    def __init__(self, size: int, features: int, transform_ms: float):
        self.size = size
        self.features = features
        self.transform_s = transform_ms / 1000.0

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        time.sleep(self.transform_s)  # the planted slow transform (GIL released)
        g = torch.Generator().manual_seed(index)
        x = torch.randn(self.features, generator=g)
        y = int(x[: self.features // 2].sum() > x[self.features // 2:].sum())
        return x, y


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--warmup", type=int, default=5, help="steps left out of samples_per_second")
    p.add_argument("--transform-ms", type=float, default=2.0)
    p.add_argument("--dataset-size", type=int, default=20000)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (1: the tiny model's time stays steady on a busy machine)")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dataset = SlowTransformDataset(args.dataset_size, args.features, args.transform_ms)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers, drop_last=True)
    model = torch.nn.Sequential(torch.nn.Linear(args.features, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, 2))
    # Activation memory grows with the batch, as in a real model; allocated up front so that a
    # batch too large for the memory available fails at once.
    workspace = torch.empty(args.batch_size, args.hidden * 64)
    workspace.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.CrossEntropyLoss()

    step = 0
    t_warm = None
    for _ in range(args.epochs):
        for x, y in loader:
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step == args.warmup:
                t_warm = time.perf_counter()
            if step % args.log_every == 0:
                print(f"step {step} loss {loss.item():.4f}", flush=True)
            if args.steps and step >= args.steps:
                break
        if args.steps and step >= args.steps:
            break
    if t_warm is not None and step > args.warmup:
        rate = (step - args.warmup) * args.batch_size / (time.perf_counter() - t_warm)
        print(f"samples_per_second={rate:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
