"""Keras 3 with trainprof's callback, on the backend KERAS_BACKEND names (torch or tensorflow):
training, validation and prediction steps and their phases.

    KERAS_BACKEND=tensorflow python examples/keras_callback.py [RUN_DIR]
"""

import sys

import keras
import numpy as np

from trainprof.integrations.keras import TrainprofCallback


def main(run_dir: str) -> None:
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.random.rand(64, 8).astype("float32"), np.random.rand(64, 1).astype("float32")
    cb = TrainprofCallback(out=run_dir)
    model.fit(x, y, batch_size=16, epochs=2, validation_data=(x[:32], y[:32]), verbose=0,
              callbacks=[cb])
    model.predict(x[:16], batch_size=8, verbose=0, callbacks=[cb])
    print("BACKEND", keras.backend.backend(), "torch" in sys.modules)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "trainprof-runs/keras-example")
