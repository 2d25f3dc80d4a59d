"""Automatic TensorFlow instrumentation (TensorFlow 2.x, Keras 3 on the TensorFlow backend):
steps of Keras ``fit``/``evaluate``/``predict`` and of custom training loops, without a code
change. Installed when the job imports tensorflow (an import hook, like PyTorch's); trainprof
never imports tensorflow itself.

Step model, the same as PyTorch's: a training step ends with an optimizer update.

- Keras on TensorFlow: each call of the model's ``train_function`` (one batch, or
  ``steps_per_execution`` batches) is one "train" step, each ``test_function`` call an "eval"
  step, each ``predict_function`` call a "predict" step; ``fit`` and ``evaluate``/``predict``
  are the phases "training" and "evaluation".
- A ``tf.function`` whose trace applied an optimizer update (Keras 3 ``Optimizer.apply`` /
  ``apply_gradients``, ``tf.compat.v1.train.Optimizer.apply_gradients``) is a training step
  function: each call of it from eager code is one "train" step. Its first call is the one that
  traced it; it becomes step 0 once the call returns. The batch wait before the call (an eager
  ``for batch in dataset`` loop) opens the step.
- Eager loops (no ``tf.function``): the step opens at the first training activity after the
  previous one closed (batch wait, entering a ``GradientTape``, ``tape.gradient``) and closes
  when the optimizer's update returns; parts: ``forward`` (the outermost tape's recording
  region), ``backward`` (``tape.gradient``), ``optimizer`` (the update).

Inside a compiled function TensorFlow runs one graph: its forward, backward, update and the
batch it reads from a tf.data iterator are not separable from Python, so such steps have no
parts (``--detail-steps`` gives their operators). Every hook returns straight to TensorFlow when
recording is off, and any failure of trainprof's own is one warning; the job is never changed.
"""

from __future__ import annotations

import sys
import weakref

from trainprof import _recorder as R
from trainprof._recorder import S, _perf, warn_once

_installed = False
_eager = None  # tensorflow.python.eager.context.executing_eagerly, once tensorflow is loaded


class _T:
    """State of the TensorFlow instrumentation (mutated by the training thread)."""

    fn_depth = 0  # >0 inside a timed outermost tf.function call
    fn_marked = False  # that call's trace applied an optimizer update
    keras_depth = 0  # >0 inside a Keras train/test/predict function call
    hook_depth = 0  # >0 inside an eager optimizer update or gradient (timed by us)
    tape_depth = 0  # eager GradientTapes entered and not yet exited
    tape_start = 0
    step_open = False  # a step this module opened
    step_start = 0
    step_wait: tuple | None = None  # the batch wait that opened the open step
    step_args: str | None = None
    gradients = 0  # tape.gradient calls in the open eager step
    pending_wait: tuple | None = None  # (start, end) of a batch wait not yet given a step
    started = False  # the first TensorFlow step was seen (framework annotated)


T = _T()
_step_fns: weakref.WeakSet = weakref.WeakSet()  # tf.functions known to apply an optimizer update
_FN_ARGS: dict = {}  # function name -> the step args naming it


def _eagerly() -> bool:
    return _eager is None or _eager()


# ---------------------------------------------------------------------------------------------
# Steps


def _first_step() -> None:
    """At the first TensorFlow step: the run's framework, and TensorFlow's operator profiler for
    --detail-steps (in place of PyTorch's where torch was imported too but trained nothing)."""
    T.started = True
    tf = sys.modules.get("tensorflow")
    R.annotate(framework="tensorflow",
               **{"tensorflow.version": str(getattr(tf, "__version__", ""))})
    try:
        from trainprof import _detail

        torch_trained = S.next_step.get("train", 0) > 0
        for hook in S.step_hooks:
            owner = getattr(hook, "__self__", None)
            if isinstance(owner, _detail.RequestWatcher) and not torch_trained:
                owner.framework = "tensorflow"
            elif (type(owner) is _detail.TorchDetail and owner.prof is None and not owner.done
                  and not torch_trained):
                owner.__class__ = _detail.TfDetail  # same range, TensorFlow's profiler
        _detail.install_from_env("tensorflow")
    except Exception as exc:  # noqa: BLE001
        warn_once("tf_detail", f"detailed profiling is off: {exc}")


def _open(start: int, mode: str = "train", use_wait: bool = True) -> bool:
    """Opens a step at `start` (earlier: the pending batch wait's start). False when another
    step is open (the user's trainprof.step, a Keras callback's, PyTorch's)."""
    if T.step_open:
        return True
    if S.explicit_steps or S.step is not None:
        return False
    if not T.started:
        _first_step()
    wait, T.pending_wait = T.pending_wait, None
    if wait is not None and not use_wait:
        R.record_span("data_wait", "data_wait", wait[0], wait[1], step=None, mode="")
        wait = None
    T.step_wait = wait
    T.step_start = min(start, wait[0]) if wait else start
    T.step_args = None
    T.gradients = 0
    T.step_open = True
    R.begin_step(mode)
    return True


def _close(end: int) -> None:
    if not T.step_open:
        return
    T.step_open = False
    wait, T.step_wait = T.step_wait, None
    if wait is not None:
        R.record_span("data_wait", "data_wait", wait[0], wait[1])
    args = T.step_args
    if args is None and T.gradients:
        args = '{"micro_batches":%d}' % T.gradients
    R.end_step(T.step_start, end, args)


def _cancel() -> None:
    """The call that opened the step was not one (it raised, e.g. the end of a dataset): the
    step is taken back; its number is given to the next one."""
    if not T.step_open:
        return
    T.step_open = False
    n, mode = S.step, S.mode
    S.step, S.mode = None, ""
    R._rec.set_step(None, "")
    if n is not None and S.next_step.get(mode) == n + 1:
        S.next_step[mode] = n
    wait, T.step_wait = T.step_wait, None
    if wait is not None:
        R.record_span("data_wait", "data_wait", wait[0], wait[1], step=None, mode="")


def _part(name: str, category: str, t0: int, t1: int) -> None:
    """A part of the current step (ours or anyone's); before any step, nothing."""
    if S.step is not None:
        R.record_span(name, category, t0, t1)


def _owned() -> bool:
    """A step is being run by a wrapper (a tf.function or Keras function call)."""
    return bool(T.fn_depth or T.keras_depth)


def _open_eager(start: int) -> None:
    """Eager training activity outside any wrapper: opens the step if none is."""
    if not _owned() and not T.step_open and S.step is None and not S.explicit_steps:
        _open(start)


# ---------------------------------------------------------------------------------------------
# tf.function calls


def _fn_args(fn) -> str:
    name = str(getattr(fn, "_name", "") or getattr(fn, "__name__", "") or "function")
    args = _FN_ARGS.get(name)
    if args is None:
        import json

        args = _FN_ARGS[name] = json.dumps({"tf.function": name})
    return args


def _patch_function(tf) -> None:
    import importlib

    pf = importlib.import_module(
        "tensorflow.python.eager.polymorphic_function.polymorphic_function")
    Function = pf.Function
    orig = Function.__call__
    if getattr(orig, "_trainprof", False):
        return

    def __call__(self, *args, **kwds):
        if T.fn_depth or T.keras_depth or T.hook_depth or not S.active or not _eagerly():
            return orig(self, *args, **kwds)
        T.fn_depth = 1
        T.fn_marked = False
        t0 = _perf()
        opened = False
        try:
            if self in _step_fns:
                opened = _open(t0)
        except Exception as exc:  # noqa: BLE001
            warn_once("tf_function", f"tf.function instrumentation failed: {exc}")
        ok = False
        try:
            out = orig(self, *args, **kwds)
            ok = True
            return out
        finally:
            t1 = _perf()
            T.fn_depth = 0
            try:
                if T.fn_marked and self not in _step_fns:
                    _step_fns.add(self)
                    if ok:  # the call that traced it: a step, known once it returned
                        opened = _open(t0)
                if opened:
                    if ok:
                        if T.step_args is None:
                            T.step_args = _fn_args(self)
                        _close(t1)
                    else:
                        _cancel()
                elif T.pending_wait is not None and self not in _step_fns:
                    # the batch went to another function (an evaluation): no step's wait
                    w, T.pending_wait = T.pending_wait, None
                    R.record_span("data_wait", "data_wait", w[0], w[1], step=None, mode="")
            except Exception as exc:  # noqa: BLE001
                warn_once("tf_function", f"tf.function instrumentation failed: {exc}")

    __call__._trainprof = True  # type: ignore[attr-defined]
    __call__.__wrapped__ = orig  # type: ignore[attr-defined]
    Function.__call__ = __call__


# ---------------------------------------------------------------------------------------------
# Optimizer updates: a step's end (eager), or what makes a traced function a step function.


def _wrap_update(orig):
    def update(self, *args, **kwargs):
        if not S.active or T.hook_depth:
            return orig(self, *args, **kwargs)
        if not _eagerly():  # tracing: the function being traced is a training step
            if T.fn_depth:
                T.fn_marked = True
            return orig(self, *args, **kwargs)
        if T.fn_depth:  # tf.config.run_functions_eagerly(True): the function still is the step
            T.fn_marked = True
        T.hook_depth += 1
        t0 = _perf()
        try:
            return orig(self, *args, **kwargs)
        finally:
            t1 = _perf()
            T.hook_depth -= 1
            try:
                _open_eager(t0)
                _part("optimizer.step", "optimizer", t0, t1)
                if not _owned():
                    _close(t1)
            except Exception as exc:  # noqa: BLE001
                warn_once("tf_optimizer", f"optimizer instrumentation failed: {exc}")

    update._trainprof = True  # type: ignore[attr-defined]
    update.__wrapped__ = orig  # type: ignore[attr-defined]
    return update


def _patch_v1_optimizer(tf) -> None:
    import importlib

    opt = importlib.import_module("tensorflow.python.training.optimizer").Optimizer
    if not getattr(opt.apply_gradients, "_trainprof", False):
        opt.apply_gradients = _wrap_update(opt.apply_gradients)


def _patch_keras_optimizer(module) -> None:
    """Keras 3's BaseOptimizer.apply (apply_gradients calls it), on the TensorFlow backend."""
    try:
        from keras.src.backend import config

        if config.backend() != "tensorflow":
            return
        Base = module.BaseOptimizer
        if not getattr(Base.apply, "_trainprof", False):
            Base.apply = _wrap_update(Base.apply)
    except Exception as exc:  # noqa: BLE001
        warn_once("keras_optimizer", f"Keras optimizer instrumentation failed: {exc}")


# ---------------------------------------------------------------------------------------------
# GradientTape (eager): forward = the outermost tape's recording region, backward = gradient().


def _patch_tape(tf) -> None:
    import importlib

    Tape = importlib.import_module("tensorflow.python.eager.backprop").GradientTape
    if getattr(Tape.gradient, "_trainprof", False):
        return
    orig_enter, orig_exit, orig_gradient = Tape.__enter__, Tape.__exit__, Tape.gradient

    def __enter__(self):
        out = orig_enter(self)
        if S.active and not T.hook_depth and _eagerly():
            try:
                T.tape_depth += 1
                if T.tape_depth == 1:
                    T.tape_start = _perf()
                    _open_eager(T.tape_start)
            except Exception as exc:  # noqa: BLE001
                warn_once("tf_tape", f"GradientTape instrumentation failed: {exc}")
        return out

    def __exit__(self, typ, value, traceback):
        try:
            return orig_exit(self, typ, value, traceback)
        finally:
            # the tape entered in the same (eager, untimed) context it exits in
            if T.tape_depth and not T.hook_depth and _eagerly():
                try:
                    T.tape_depth -= 1
                    if T.tape_depth == 0 and S.active:
                        _part("forward", "forward", T.tape_start, _perf())
                except Exception as exc:  # noqa: BLE001
                    warn_once("tf_tape", f"GradientTape instrumentation failed: {exc}")

    def gradient(self, *args, **kwargs):
        if not S.active or T.hook_depth or not _eagerly():
            return orig_gradient(self, *args, **kwargs)
        T.hook_depth += 1
        t0 = _perf()
        try:
            return orig_gradient(self, *args, **kwargs)
        finally:
            t1 = _perf()
            T.hook_depth -= 1
            try:
                _open_eager(t0)
                if T.step_open:
                    T.gradients += 1
                _part("backward", "backward", t0, t1)
            except Exception as exc:  # noqa: BLE001
                warn_once("tf_gradient", f"gradient instrumentation failed: {exc}")

    gradient._trainprof = True  # type: ignore[attr-defined]
    Tape.__enter__, Tape.__exit__, Tape.gradient = __enter__, __exit__, gradient


# ---------------------------------------------------------------------------------------------
# Batch wait: eager iteration of a tf.data dataset (OwnedIterator.__next__).


def _patch_iterator(tf) -> None:
    import importlib

    Owned = importlib.import_module("tensorflow.python.data.ops.iterator_ops").OwnedIterator
    orig = Owned.__next__
    if getattr(orig, "_trainprof", False):
        return

    def __next__(self):
        if not S.active or _owned() or T.hook_depth or not _eagerly():
            return orig(self)
        t0 = _perf()
        try:
            return orig(self)
        except StopIteration:
            # the end of an epoch: not a batch wait of any step
            try:
                R.record_span("data_wait", "data_wait", t0, _perf(), step=None, mode="")
            except Exception as exc:  # noqa: BLE001 - the job must still see StopIteration
                warn_once("tf_data_wait", f"data-wait instrumentation failed: {exc}")
            t0 = None
            raise
        finally:
            if t0 is not None:
                t1 = _perf()
                try:
                    if S.step is not None:  # inside a step: its next micro-batch
                        R.record_span("data_wait", "data_wait", t0, t1)
                    else:
                        w = T.pending_wait
                        if w is not None:  # two fetches without a step in between
                            R.record_span("data_wait", "data_wait", w[0], w[1], step=None,
                                          mode="")
                        T.pending_wait = (t0, t1)
                except Exception as exc:  # noqa: BLE001
                    warn_once("tf_data_wait", f"data-wait instrumentation failed: {exc}")

    __next__._trainprof = True  # type: ignore[attr-defined]
    Owned.__next__ = __next__


# ---------------------------------------------------------------------------------------------
# Keras 3 on TensorFlow: train/test/predict functions and the fit/evaluate/predict phases.

_KERAS_FUNCTIONS = (("make_train_function", "train_function", "train"),
                    ("make_test_function", "test_function", "eval"),
                    ("make_predict_function", "predict_function", "predict"))


def _wrap_keras_function(fn, mode: str, batches: int = 1):
    args_json = '{"steps_per_execution":%d}' % batches if batches > 1 else None

    def function(*args, **kwargs):
        if not S.active or T.keras_depth or T.fn_depth:
            return fn(*args, **kwargs)
        T.keras_depth = 1
        t0 = _perf()
        opened = False
        try:
            opened = _open(t0, mode, use_wait=False)
            if opened:
                T.step_args = args_json
        except Exception as exc:  # noqa: BLE001
            warn_once("keras_step", f"Keras step instrumentation failed: {exc}")
        ok = False
        try:
            out = fn(*args, **kwargs)
            ok = True
            return out
        finally:
            t1 = _perf()
            T.keras_depth = 0
            if opened:
                try:
                    _close(t1) if ok else _cancel()  # raised: the end of the data, no step
                except Exception as exc:  # noqa: BLE001
                    warn_once("keras_step", f"Keras step instrumentation failed: {exc}")

    function._trainprof = True  # type: ignore[attr-defined]
    function.__wrapped__ = fn  # type: ignore[attr-defined]
    return function


def _wrap_make(orig, attr: str, mode: str):
    def make(self, *args, **kwargs):
        out = orig(self, *args, **kwargs)
        try:
            fn = getattr(self, attr, None)
            if fn is not None and not getattr(fn, "_trainprof", False):
                # steps_per_execution batches per call (fixed when the model is compiled)
                batches = getattr(self, "steps_per_execution", 1)
                wrapped = _wrap_keras_function(fn, mode, batches if isinstance(batches, int) else 1)
                setattr(self, attr, wrapped)
                if out is fn:
                    out = wrapped
        except Exception as exc:  # noqa: BLE001
            warn_once("keras_make", f"Keras step instrumentation is off: {exc}")
        return out

    make._trainprof = True  # type: ignore[attr-defined]
    make.__wrapped__ = orig  # type: ignore[attr-defined]
    return make


def _has_trainprof_callback(args, kwargs, position: int) -> bool:
    """`callbacks` of fit/evaluate/predict (a keyword, or the argument at `position`) holds a
    TrainprofCallback."""
    value = kwargs.get("callbacks", args[position] if len(args) > position else None)
    if value is not None:
        items = getattr(value, "callbacks", value)  # a keras CallbackList, or a list
        if isinstance(items, (list, tuple)):
            for cb in items:
                cls = type(cb)
                if (cls.__name__ == "TrainprofCallback" and
                        cls.__module__ == "trainprof.integrations.keras"):
                    return True
    return False


def _wrap_phase(orig, phase: str, position: int):
    def run(self, *args, **kwargs):
        if not S.active:
            return orig(self, *args, **kwargs)
        t0 = _perf()
        try:
            return orig(self, *args, **kwargs)
        finally:
            try:
                # a TrainprofCallback in the call records its own phases (and steps)
                if not _has_trainprof_callback(args, kwargs, position):
                    R.record_span(phase, "phase", t0, _perf(), step=None, mode="")
            except Exception as exc:  # noqa: BLE001
                warn_once("keras_phase", f"Keras phase instrumentation failed: {exc}")

    run._trainprof = True  # type: ignore[attr-defined]
    run.__wrapped__ = orig  # type: ignore[attr-defined]
    return run


def _patch_keras_trainer(module) -> None:
    try:
        Trainer = module.TensorFlowTrainer
        if getattr(Trainer.make_train_function, "_trainprof", False):
            return
        for make, attr, mode in _KERAS_FUNCTIONS:
            setattr(Trainer, make, _wrap_make(getattr(Trainer, make), attr, mode))
        # (method, phase, position of its `callbacks` argument)
        for name, phase, position in (("fit", "training", 5), ("evaluate", "evaluation", 6),
                                      ("predict", "evaluation", 4)):
            setattr(Trainer, name, _wrap_phase(getattr(Trainer, name), phase, position))
        R.annotate(**{"keras.backend": "tensorflow"})
    except Exception as exc:  # noqa: BLE001
        warn_once("keras_trainer", f"Keras step instrumentation is off: {exc}")


# ---------------------------------------------------------------------------------------------
# Installation


def install(tf) -> None:
    global _installed, _eager
    if _installed:
        return
    _installed = True
    try:
        import importlib

        _eager = importlib.import_module("tensorflow.python.eager.context").executing_eagerly
    except Exception as exc:  # noqa: BLE001
        warn_once("tf_install", f"TensorFlow instrumentation is off: {exc}")
        return
    for part in (_patch_function, _patch_v1_optimizer, _patch_tape, _patch_iterator):
        try:
            part(tf)
        except Exception as exc:  # noqa: BLE001 - one part failing leaves the others working
            warn_once(part.__name__, f"{part.__name__} failed on TensorFlow "
                                     f"{getattr(tf, '__version__', '?')}: {exc}")
    R.when_imported("keras.src.optimizers.base_optimizer", _patch_keras_optimizer)
    R.when_imported("keras.src.backend.tensorflow.trainer", _patch_keras_trainer)


def install_when_imported() -> None:
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "function"):
        install(tf)
        return
    R.when_imported("tensorflow", install)
