"""trainprof's startup hook. `trainprof record` puts this directory first on PYTHONPATH, so
every Python process of the job runs this at startup: it starts the recorder into
$TRAINPROF_RUN_DIR (unless TRAINPROF_DISABLE=1) and, unless TRAINPROF_AUTO=0, instruments
PyTorch and TensorFlow when the job imports them. Then it runs the sitecustomize this one shadows, if any.
Nothing here may stop the user's program: every failure is a warning."""

import os
import sys


def _trainprof_start():
    if os.environ.get("TRAINPROF_DISABLE") == "1" or not os.environ.get("TRAINPROF_RUN_DIR"):
        return
    try:
        import trainprof._start as recorder

        recorder.start(os.environ["TRAINPROF_RUN_DIR"], auto=os.environ.get("TRAINPROF_AUTO", "1") != "0")
    except Exception as exc:  # noqa: BLE001
        sys.stderr.write(f"trainprof: instrumentation is off: {exc}\n")


def _chain_sitecustomize():
    """Imports the next sitecustomize on sys.path (the one ours shadows)."""
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError as exc:
        if getattr(exc, "name", None) != "sitecustomize":
            sys.stderr.write(f"trainprof: the existing sitecustomize failed: {exc}\n")
    except Exception as exc:  # noqa: BLE001
        sys.stderr.write(f"trainprof: the existing sitecustomize failed: {exc}\n")
    finally:
        sys.path[:] = saved
        chained = sys.modules.get("sitecustomize")
        if chained is None and ours is not None:
            sys.modules["sitecustomize"] = ours


_trainprof_start()
_chain_sitecustomize()
