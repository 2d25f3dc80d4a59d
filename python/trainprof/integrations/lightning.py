"""PyTorch Lightning: ``Trainer(callbacks=[trainprof.integrations.lightning.TrainprofCallback()])``.

Steps and their parts come from the PyTorch instrumentation the recorder installs (a step is an
optimizer step, so ``accumulate_grad_batches`` is handled); the callback starts the recorder
when the job was not started under ``trainprof record``, records the phases (training,
evaluation) and annotates the trainer's configuration."""

from __future__ import annotations

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the standalone "pytorch_lightning" distribution
    from pytorch_lightning.callbacks import Callback

from trainprof import _recorder as R
from trainprof.integrations._common import Phases, ensure_started


class TrainprofCallback(Callback):
    def __init__(self, out: str | None = None):
        super().__init__()
        self._out = out
        self._phases = Phases()

    def setup(self, trainer, pl_module, stage=None):
        ensure_started(self._out)
        R.annotate(**{
            "lightning.stage": str(stage),
            "lightning.config": {
                "max_epochs": trainer.max_epochs, "max_steps": trainer.max_steps,
                "accumulate_grad_batches": trainer.accumulate_grad_batches,
                "precision": str(trainer.precision), "strategy": type(trainer.strategy).__name__,
                "num_devices": trainer.num_devices, "world_size": trainer.world_size,
            },
        })

    def on_train_start(self, trainer, pl_module):
        self._phases.begin("training")

    def on_train_end(self, trainer, pl_module):
        self._phases.end("training")

    def on_validation_start(self, trainer, pl_module):
        self._phases.begin("evaluation")

    def on_validation_end(self, trainer, pl_module):
        self._phases.end("evaluation")

    def on_test_start(self, trainer, pl_module):
        self._phases.begin("evaluation")

    def on_test_end(self, trainer, pl_module):
        self._phases.end("evaluation")

    def on_exception(self, trainer, pl_module, exception):
        R.mark("exception", type=type(exception).__name__, message=str(exception))
        R.flush()
