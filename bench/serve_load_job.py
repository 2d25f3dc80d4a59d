"""The training job bench/serve_load.py watches: a small torch loop (a DataLoader over in-memory
tensors, an MLP, SGD, one thread) whose steps take a few milliseconds, trained for --seconds;
it writes the wall-clock start and the duration of every step to --out, so the bench can take
the steps of any time window (the one its clients ran in).

    python bench/serve_load_job.py --seconds 40 --out steps.json
"""

import argparse
import json
import time
from pathlib import Path

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=40)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--out", required=True)
    p.add_argument("--stop-file", default=None, help="end early once this file exists")
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    n = 256 * 64
    data = torch.utils.data.TensorDataset(torch.randn(n, a.width), torch.randint(0, 10, (n,)))
    model = torch.nn.Sequential(torch.nn.Linear(a.width, a.width), torch.nn.ReLU(),
                                torch.nn.Linear(a.width, a.width), torch.nn.ReLU(),
                                torch.nn.Linear(a.width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    starts, durations = [], []
    end = time.time() + a.seconds
    stop = Path(a.stop_file) if a.stop_file else None
    while time.time() < end and not (stop and stop.exists()):
        loader = torch.utils.data.DataLoader(data, batch_size=256, shuffle=True, num_workers=0)
        for x, y in loader:
            t0 = time.perf_counter()
            wall = time.time()
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            durations.append(time.perf_counter() - t0)
            starts.append(wall)
            if wall > end or (stop and len(starts) % 64 == 0 and stop.exists()):
                break
    with open(a.out, "w") as f:
        json.dump({"start_s": starts, "duration_s": durations}, f)


if __name__ == "__main__":
    main()
