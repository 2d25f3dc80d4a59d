"""Hugging Face transformers: ``Trainer(..., callbacks=[TrainprofCallback()])``.

Steps and their parts come from the PyTorch instrumentation (the Trainer steps a torch
optimizer once per ``gradient_accumulation_steps`` micro-batches); the callback starts the
recorder when needed, records the phases and annotates the training arguments."""

from __future__ import annotations

from transformers import TrainerCallback

from trainprof import _recorder as R
from trainprof.integrations._common import Phases, ensure_started

_ARGS = ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps",
         "max_steps", "num_train_epochs", "learning_rate", "bf16", "fp16", "dataloader_num_workers",
         "dataloader_pin_memory", "gradient_checkpointing", "torch_compile")


class TrainprofCallback(TrainerCallback):
    def __init__(self, out: str | None = None):
        self._out = out
        self._phases = Phases()

    def on_init_end(self, args, state, control, **kwargs):
        ensure_started(self._out)

    def on_train_begin(self, args, state, control, **kwargs):
        ensure_started(self._out)
        R.annotate(**{"transformers.args": {k: getattr(args, k, None) for k in _ARGS}})
        self._phases.begin("training")

    def on_train_end(self, args, state, control, **kwargs):
        self._phases.end("training")

    def on_evaluate(self, args, state, control, **kwargs):
        R.mark("evaluate", global_step=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs:
            R.mark("log", global_step=state.global_step, **{k: v for k, v in logs.items()
                                                            if isinstance(v, (int, float))})

    def on_save(self, args, state, control, **kwargs):
        R.mark("checkpoint", global_step=state.global_step)
