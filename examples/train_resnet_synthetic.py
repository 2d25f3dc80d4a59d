"""A real small ResNet trained on generated images (CPU, or CUDA with --device), with its own timers.

Run it bare, or under trainprof with no code change:

    trainprof record -- python examples/train_resnet_synthetic.py --steps 30
    TRAINPROF_RUN_DIR=runs/r1 PYTHONPATH=$(python -c 'import trainprof,os;print(os.path.dirname(trainprof.__file__))')/_hook \
        python examples/train_resnet_synthetic.py

The script never imports trainprof. It measures per training step the time waiting for the
batch, forward (model + loss), backward, optimizer step and the whole step with
time.perf_counter_ns and writes them to --timings (JSON) so tests can compare them with what
trainprof stored.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SyntheticImages(Dataset):
    """Random images and labels made on the fly (a bit of CPU work per item, like decoding)."""

    def __init__(self, n: int, size: int, classes: int, work: int):
        self.n, self.size, self.classes, self.work = n, size, classes, work

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(3, self.size, self.size, generator=g)
        for _ in range(self.work):  # stand-in for decoding/augmentation cost
            x = torch.tanh(x * 1.01)
        return x, int(i % self.classes)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class SmallResNet(nn.Module):
    def __init__(self, classes: int = 10, width: int = 16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.layers = nn.Sequential(
            BasicBlock(width, width, 1), BasicBlock(width, width, 1),
            BasicBlock(width, 2 * width, 2), BasicBlock(2 * width, 2 * width, 1),
            BasicBlock(2 * width, 4 * width, 2), BasicBlock(4 * width, 4 * width, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * width, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--data-work", type=int, default=20, help="CPU work per sample")
    p.add_argument("--accumulate", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--eval-batches", type=int, default=3)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--amp", action="store_true", help="bfloat16 autocast")
    p.add_argument("--timings", help="write the script's own timers here (JSON)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, or auto (cuda when available)")
    p.add_argument("--width", type=int, default=16, help="channels of the first stage")
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model = SmallResNet(width=args.width).to(device)
    run_model = torch.compile(model) if args.compile else model
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    n = args.steps * args.accumulate * args.batch_size
    loader = DataLoader(SyntheticImages(n, args.image_size, 10, args.data_work), batch_size=args.batch_size,
                        shuffle=False, num_workers=args.workers, pin_memory=device == "cuda",
                        drop_last=True)
    perf = time.perf_counter_ns
    steps = []
    it = iter(loader)
    model.train()
    for _ in range(args.steps):
        rec = {"data_wait_ns": 0, "forward_ns": 0, "backward_ns": 0}
        t_start = perf()
        for _micro in range(args.accumulate):
            t0 = perf()
            x, y = next(it)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            t1 = perf()
            with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=args.amp):
                out = run_model(x)
                loss = criterion(out, y) / args.accumulate
            t2 = perf()
            loss.backward()
            t3 = perf()
            rec["data_wait_ns"] += t1 - t0
            rec["forward_ns"] += t2 - t1
            rec["backward_ns"] += t3 - t2
        t4 = perf()
        opt.step()
        t5 = perf()
        opt.zero_grad(set_to_none=True)  # between steps: timed by neither side
        rec["optimizer_ns"] = t5 - t4
        rec["step_ns"] = t5 - t_start
        rec["loss"] = float(loss)
        steps.append(rec)

    model.eval()
    evals = []
    with torch.no_grad():
        eval_it = iter(DataLoader(SyntheticImages(args.eval_batches * args.batch_size, args.image_size, 10, 0),
                                  batch_size=args.batch_size))
        for x, _y in eval_it:
            t0 = perf()
            run_model(x.to(device))
            evals.append({"forward_ns": perf() - t0})

    summary = {"steps": steps, "eval": evals}
    if args.timings:
        with open(args.timings, "w") as f:
            json.dump(summary, f)
    print(f"trained {len(steps)} steps, last loss {steps[-1]['loss']:.3f}")


if __name__ == "__main__":
    main()
