"""A host memory leak: every step keeps a 1 MiB tensor in a Python list (kept "for later
analysis", never freed). Each step also waits 15 ms (a slow I/O call), so the leak is spread
over a few seconds."""

import time

import torch
from _common import CLASSES, FEATURES, make_model, train_step

kept = []


def leak():
    kept.append(torch.randn(256 * 1024))
    time.sleep(0.015)


model, opt = make_model()
x = torch.randn(64, FEATURES)
y = torch.randint(0, CLASSES, (64,))
for _ in range(250):
    train_step(model, opt, x, y, between=leak)
print(f"kept {len(kept)} tensors")
