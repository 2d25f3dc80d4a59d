"""A slow start: the job spends seconds before its first step (e.g. downloading the data);
the training itself is healthy."""

import time

import torch
from _common import CLASSES, FEATURES, make_model, train_step

time.sleep(5.0)
model, opt = make_model()
x = torch.randn(64, FEATURES)
y = torch.randint(0, CLASSES, (64,))
for _ in range(50):
    train_step(model, opt, x, y)
