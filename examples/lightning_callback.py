"""PyTorch Lightning with trainprof's callback: steps (optimizer steps of accumulated
micro-batches), forward / backward / optimizer parts, validation, phases and the trainer's
configuration, recorded without `trainprof record`.

    python examples/lightning_callback.py [RUN_DIR]     # then: trainprof report RUN_DIR
"""

import sys

import pytorch_lightning as pl
import torch
from torch import nn

from trainprof.integrations.lightning import TrainprofCallback


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))

    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, i):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main(run_dir: str) -> None:
    ds = torch.utils.data.TensorDataset(torch.randn(96, 16), torch.randint(0, 2, (96,)))
    dl = torch.utils.data.DataLoader(ds, batch_size=8)
    trainer = pl.Trainer(max_steps=6, accumulate_grad_batches=2, accelerator="cpu", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, limit_val_batches=2, val_check_interval=4,
                         num_sanity_val_steps=0, callbacks=[TrainprofCallback(out=run_dir)])
    trainer.fit(Model(), dl, dl)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "trainprof-runs/lightning-example")
