"""Keras 3 (any backend: torch, TensorFlow, JAX): ``model.fit(..., callbacks=[TrainprofCallback()])``.

Keras drives its own optimizer, so steps come from this callback: each training batch is a
"train" step, each evaluation batch an "eval" step, each prediction batch a "predict" step;
fit/evaluate/predict are the phases training/evaluation/evaluation."""

from __future__ import annotations

import keras

from trainprof import _recorder as R
from trainprof.integrations._common import Phases, ensure_started


class TrainprofCallback(keras.callbacks.Callback):
    def __init__(self, out: str | None = None):
        super().__init__()
        self._out = out
        self._phases = Phases()
        self._t0 = None
        self._epoch = 0
        self._train_batches = 0

    # steps
    def _begin(self, mode):
        if R.S.step is not None:  # a user step is open: ours would nest
            self._t0 = None
            return
        R.S.explicit_steps = True
        R.begin_step(mode)
        self._t0 = R._perf()

    def _end(self):
        if self._t0 is not None:
            R.end_step(self._t0, R._perf())
            self._t0 = None

    def on_train_batch_begin(self, batch, logs=None):
        self._begin("train")

    def on_train_batch_end(self, batch, logs=None):
        self._end()

    def on_test_batch_begin(self, batch, logs=None):
        self._begin("eval")

    def on_test_batch_end(self, batch, logs=None):
        self._end()

    def on_predict_batch_begin(self, batch, logs=None):
        self._begin("predict")

    def on_predict_batch_end(self, batch, logs=None):
        self._end()

    # phases
    def on_train_begin(self, logs=None):
        ensure_started(self._out)
        # --detail-steps / --python-profile: with the TensorFlow backend the operator profiler
        # is tf.profiler (with torch, the automatic instrumentation installed Kineto's).
        try:
            from trainprof import _detail

            backend = keras.backend.backend()
            _detail.install_from_env("tensorflow" if backend == "tensorflow" else "torch")
        except Exception as exc:  # noqa: BLE001 - detail off, training goes on
            R.warn_once("keras_detail", f"detailed profiling is off: {exc}")
        R.annotate(**{"keras.backend": keras.backend.backend(),
                      "keras.params": {k: v for k, v in (self.params or {}).items()
                                       if isinstance(v, (int, float, str, bool, type(None)))}})
        self._phases.begin("training")

    def on_train_end(self, logs=None):
        self._phases.end("training")

    def on_test_begin(self, logs=None):
        ensure_started(self._out)
        self._phases.begin("evaluation")

    def on_test_end(self, logs=None):
        self._phases.end("evaluation")

    def on_predict_begin(self, logs=None):
        ensure_started(self._out)
        self._phases.begin("evaluation")

    def on_predict_end(self, logs=None):
        self._phases.end("evaluation")
