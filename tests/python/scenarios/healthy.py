"""Healthy job: the data fits in memory and is batched there (no DataLoader, so no loader
process to count), compute-bound steps, nothing between the steps."""

import torch
from _common import CLASSES, FEATURES, hidden_for_step_seconds, make_model, train_step

STEPS, BATCH = 200, 64

xs = torch.randn(STEPS, BATCH, FEATURES)
ys = torch.randint(0, CLASSES, (STEPS, BATCH))
# ~3 s of training whatever the machine: the memory rule judges RSS from 1 s after the first step
model, opt = make_model(hidden=hidden_for_step_seconds(0.015, BATCH))
for x, y in zip(xs, ys):
    train_step(model, opt, x, y)
