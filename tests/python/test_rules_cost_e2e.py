"""A real (CPU) PyTorch training run under `trainprof record` whose data loader is made slow
(a sleep in __getitem__, num_workers=0): DataLoaderStarvation fires, and its finding carries its
cost impact in dollars, priced from the shipped catalog — in `record`'s end-of-run summary and in
`trainprof rules RUN --json`, checked by hand from the finding's evidence and the catalog price.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")  # installed by scripts/setup.sh; absent only off-setup

SCRIPT = """
import time
import torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 4 * 70
    def __getitem__(self, i):
        time.sleep(0.005)  # the planted problem: 20 ms of loading per batch of 4
        return torch.randn(8), torch.randn(1)

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in DataLoader(Slow(), batch_size=4, num_workers=0):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
"""

# ml.p3.2xlarge in data/catalog/instances.csv: 3.825 $/h (sagemaker training on-demand), EBS-only,
# so the default 30 GB ML storage volume at 0.14 $/GB-month over 730 h is billed too.
P3_2XL_PER_HOUR = 3.825 + 30 * 0.14 / 730


@pytest.fixture(scope="module")
def trainprof_bin():
    from conftest import trainprof_command

    return trainprof_command()[0]


def test_slow_loader_finding_is_priced(trainprof_bin, tmp_path):
    run = tmp_path / "run"
    proc = subprocess.run(
        [trainprof_bin, "record", "--out", str(run), "--no-gpu", "--instance-type", "ml.p3.2xlarge",
         "--", sys.executable, "-c", textwrap.dedent(SCRIPT)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    summary = proc.stdout + proc.stderr
    assert "rule DataLoaderStarvation fired" in summary, summary
    assert "cost impact ≈ $" in summary, summary

    out = subprocess.run([trainprof_bin, "rules", str(run), "--json"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    rules = {r["name"]: r for r in json.loads(out)["rules"]}
    findings = rules["DataLoaderStarvation"]["findings"]
    assert findings, out
    f = findings[0]
    ev = f["evidence"]
    assert ev["data_wait_share"] > 0.2
    # By hand: the window's steps x their mean wait, at the whole instance's rate (one training
    # process on the node): steps x ms / 1000 x 3.82575 $/h / 3600.
    expected = ev["steps"] * ev["mean_data_wait_ms"] / 1000 * P3_2XL_PER_HOUR / 3600
    assert f["cost_usd"] == pytest.approx(expected, rel=1e-9)
    assert "ml.p3.2xlarge at $3.825/h" in f["cost_basis"]
    assert "as of 20" in f["cost_basis"]  # the price's date
    # Rules with no cost model for what they found say so instead of a number.
    for name in ("HostMemoryGrowth", "GPUMemoryIncrease"):
        for g in rules[name]["findings"]:
            assert g["cost_usd"] is None and g["cost_basis"]

    # Without a price (an unknown instance type), no figure, and why.
    out = subprocess.run([trainprof_bin, "rules", str(run), "--json", "--instance-type", "ml.nope"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    f = {r["name"]: r for r in json.loads(out)["rules"]}["DataLoaderStarvation"]["findings"][0]
    assert f["cost_usd"] is None
    assert "not in the catalog" in f["cost_basis"]
