"""Heavy CPU preprocessing: each sample is "augmented" by a CPU-bound transform in DataLoader
workers (one per core); the training thread waits for the batches."""

import os

import torch
from _common import CLASSES, FEATURES, make_model, train_step


class AugmentedDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 240 * 8  # seconds of loading: the first and last (partial) seconds stay a minority

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        image = torch.randn(96, 96, generator=g)
        for _ in range(20):  # a CPU-heavy augmentation pipeline
            image = torch.fft.irfft2(torch.fft.rfft2(image), s=image.shape).tanh()
        return image.flatten()[:FEATURES], i % CLASSES


workers = os.cpu_count() or 1  # the cores the Dataloader rule compares with
loader = torch.utils.data.DataLoader(AugmentedDataset(), batch_size=8, num_workers=workers)
model, opt = make_model()
for x, y in loader:
    train_step(model, opt, x, y)
