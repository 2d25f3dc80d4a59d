"""A slow data loader: every sample sleeps in __getitem__, loaded in the training process
(num_workers=0), so the training loop waits for each batch."""

import time

import torch
from _common import CLASSES, FEATURES, make_model, train_step


class SlowDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 80 * 8

    def __getitem__(self, i):
        time.sleep(0.004)  # e.g. a remote read per sample
        return torch.randn(FEATURES), i % CLASSES


loader = torch.utils.data.DataLoader(SlowDataset(), batch_size=8, num_workers=0)
model, opt = make_model()
for x, y in loader:
    train_step(model, opt, x, y)
