"""Heavy CPU preprocessing: each sample is "augmented" by a CPU-bound transform in DataLoader
workers (one per core); the training thread waits for the batches."""

import os
import time

import torch
from _common import CLASSES, FEATURES, make_model, train_step


class AugmentedDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 240 * 8  # batches: the loop also stops after LOADING_S

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        image = torch.randn(96, 96, generator=g)
        for _ in range(120):  # a CPU-heavy augmentation pipeline (~30 batches/s on 2 cores)
            image = torch.fft.irfft2(torch.fft.rfft2(image), s=image.shape).tanh()
        return image.flatten()[:FEATURES], i % CLASSES


# About 8 s of loading, at most: the first and last seconds, partial (a worker starting late,
# the last batches), stay a small minority of the seconds whose median the Dataloader rule
# takes (with 20 rounds, 240 batches took 3 s here: two partial seconds of four, and the rule
# fired on a loaded machine); and few steps, so that the loss of this random data has too few
# values for LossNotDecreasing.
LOADING_S = 9.0
workers = os.cpu_count() or 1  # the cores the Dataloader rule compares with
loader = torch.utils.data.DataLoader(AugmentedDataset(), batch_size=8, num_workers=workers)
model, opt = make_model()
start = time.monotonic()
for x, y in loader:
    train_step(model, opt, x, y)
    if time.monotonic() - start >= LOADING_S:
        break
