"""A training loop made of almost nothing but the parts the automatic instrumentation hooks:
a DataLoader over in-memory tensors, a two-layer model, SGD. Its steps take ~100 µs, so the
instrumentation's own cost per step is a large, measurable share of them (bench/
instrument_overhead.py runs it bare and instrumented and reports the difference per step).

    python bench/tiny_train.py --steps 5000 --out timings.json
"""

import argparse
import json
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--out", required=True, help="write {'loop_s', 'steps'} here")
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = torch.utils.data.TensorDataset(torch.randn(a.steps * 4, 16), torch.randint(0, 4, (a.steps * 4,)))
    loader = torch.utils.data.DataLoader(data, batch_size=4, num_workers=0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    it = iter(loader)
    for _ in range(50):  # warm-up: allocator, autograd graph caches
        x, y = next(it)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    n = 0
    t0 = time.perf_counter()
    for x, y in it:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        n += 1
    loop_s = time.perf_counter() - t0
    with open(a.out, "w") as f:
        json.dump({"loop_s": loop_s, "steps": n}, f)


if __name__ == "__main__":
    main()
