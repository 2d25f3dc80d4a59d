"""Periodic slow steps: every 25th step does 200 ms of extra work inside the step (e.g. a
synchronous metric upload); the other steps take a few milliseconds."""

import time

import torch
from _common import CLASSES, FEATURES, make_model, train_step

model, opt = make_model()
x = torch.randn(64, FEATURES)
y = torch.randint(0, CLASSES, (64,))
for step in range(400):
    slow = step % 25 == 24
    train_step(model, opt, x, y, between=(lambda: time.sleep(0.2)) if slow else None)
