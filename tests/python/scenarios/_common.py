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


def hidden_for_step_seconds(target_s, batch):
    """The hidden width whose training step takes about `target_s` here, so that a scenario
    lasts long enough for its rules on a fast machine as on a slow one. Timed with bare
    matmuls (forward ~1/3 of a step), which the automatic instrumentation does not see."""
    import time

    x = torch.randn(batch, FEATURES)

    def step_s(h):
        w1, w2 = torch.randn(FEATURES, h), torch.randn(h, h)
        (x @ w1).relu() @ w2  # warm-up
        t0 = time.perf_counter()
        for _ in range(5):
            (x @ w1).relu() @ w2
        return 3 * (time.perf_counter() - t0) / 5

    h = 1024
    scale = target_s / max(step_s(h), 1e-6)
    return max(256, min(4096, int(h * scale**0.5)))


def train_step(model, opt, x, y, between=None):
    """One optimizer step; `between` runs after backward, inside the step."""
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    if between is not None:
        between()
    opt.step()
    return loss
