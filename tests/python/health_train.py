"""A small real PyTorch (CPU) regression job for tests/python/test_training_health.py.

It does not import trainprof: under `trainprof record` the automatic instrumentation samples the
loss and the gradient norm. The script writes its own truth, one JSON line per step to --log:
the loss it computed (loss.item()) and the total gradient norm that
torch.nn.utils.clip_grad_norm_ returned for the gradients the optimizer is about to apply.

  healthy  learns a fixed teacher network; the loss falls throughout
  flat     the same with learning rate 0: the loss does not move
  nan      healthy until --blowup-step, then the learning rate is multiplied by 1e6: the loss
           becomes infinite, then NaN, within a few steps

--grad-scaler: the loss goes through torch.amp.GradScaler (scaler.scale(loss).backward(), the
gradients unscaled before clip_grad_norm_ and the step), as mixed-precision jobs do.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch

FEATURES, HIDDEN, BATCH, SAMPLES = 32, 64, 64, 2048
LR = 0.003


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True, choices=["healthy", "flat", "nan"])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--blowup-step", type=int, default=200)
    p.add_argument("--seconds", type=float, default=0,
                   help="keep training (the loss NaN) until this many seconds have passed")
    p.add_argument("--log", required=True)
    p.add_argument("--grad-scaler", action="store_true")
    a = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    teacher = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(),
                                  torch.nn.Linear(16, 1))
    x_all = torch.randn(SAMPLES, FEATURES)
    with torch.no_grad():
        y_all = teacher(x_all) + 0.05 * torch.randn(SAMPLES, 1)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                                torch.nn.Linear(HIDDEN, 1))
    lr = 0.0 if a.mode == "flat" else LR
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler("cpu") if a.grad_scaler else None
    start = time.time()
    step = 0
    with open(a.log, "w") as log:
        while step < a.steps or (a.seconds and time.time() - start < a.seconds):
            if a.mode == "nan" and step == a.blowup_step:
                for group in opt.param_groups:
                    group["lr"] = lr * 1e6
            idx = torch.randint(0, SAMPLES, (BATCH,))
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x_all[idx]), y_all[idx])
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
            else:
                loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=math.inf)
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            value, norm = loss.item(), norm.item()
            log.write(json.dumps({"step": step,
                                  "loss": value if math.isfinite(value) else str(value),
                                  "grad_norm": norm if math.isfinite(norm) else str(norm)})
                      + "\n")
            log.flush()
            step += 1


if __name__ == "__main__":
    main()
