"""Shared pieces of the rule scenarios: a small MLP on random data, one thread, fixed seed.

Each scenario is a real PyTorch training loop run under `trainprof record`; the automatic
instrumentation (not the script) marks the steps and their parts.
"""

import torch

torch.manual_seed(0)
torch.set_num_threads(1)

FEATURES = 64
CLASSES = 10


def make_model(hidden=256):
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, CLASSES))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train_step(model, opt, x, y, between=None):
    """One optimizer step; `between` runs after backward, inside the step."""
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    if between is not None:
        between()
    opt.step()
    return loss
