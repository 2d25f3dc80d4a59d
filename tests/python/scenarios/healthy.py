"""Healthy job: the data fits in memory and is batched there (no DataLoader, so no loader
process to count), compute-bound steps, nothing between the steps."""

import torch
from _common import CLASSES, FEATURES, make_model, train_step

STEPS, BATCH = 200, 64

xs = torch.randn(STEPS, BATCH, FEATURES)
ys = torch.randint(0, CLASSES, (STEPS, BATCH))
model, opt = make_model(hidden=1024)
for x, y in zip(xs, ys):
    train_step(model, opt, x, y)
