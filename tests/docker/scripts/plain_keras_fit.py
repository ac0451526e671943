"""Test entry point: a user's plain Keras script under MultiWorkerMirroredStrategy (``TF_CONFIG`` from the job), as
TensorFlow's guide writes one: ``fit`` with validation data and the callbacks people use with it, then ``evaluate``
and ``predict``. Unchanged on Keras 3 and on tf-keras (``TF_USE_LEGACY_KERAS=1``).

Writes ``fit-<task>.json`` to ``SM_OUTPUT_DATA_DIR``: the Keras it ran, the history, the evaluation, the weights'
sums, and which of the callbacks' files this host holds (only the chief writes them)."""

import json
import os

import numpy as np
import tensorflow as tf

keras = tf.keras
strategy = tf.distribute.MultiWorkerMirroredStrategy()
task = strategy.cluster_resolver.task_id
model_dir, data_dir = os.environ.get("SM_MODEL_DIR", "model"), os.environ.get("SM_OUTPUT_DATA_DIR", "data")

rng = np.random.default_rng(0)
x = rng.normal(size=(1024, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int32")
with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
callbacks = [
    keras.callbacks.ModelCheckpoint(os.path.join(model_dir, "checkpoint.keras")),
    keras.callbacks.BackupAndRestore(os.path.join(data_dir, "backup")),
    keras.callbacks.TensorBoard(os.path.join(data_dir, "tensorboard")),
    keras.callbacks.EarlyStopping(monitor="val_loss", patience=2),
    keras.callbacks.LearningRateScheduler(lambda epoch, rate: rate * 0.9),
]
history = model.fit(x, y, batch_size=64, epochs=3, validation_data=(x[:256], y[:256]), callbacks=callbacks, verbose=2)
evaluation = model.evaluate(x[:256], y[:256], verbose=0)
predictions = model.predict(x[:10], verbose=0)
weights = np.concatenate([np.asarray(v).ravel() for v in model.get_weights()])
record = {
    "task": task, "keras": "tf-keras" if keras.__name__.startswith("tf_keras") else "keras-3",
    "history": {name: [round(float(v), 6) for v in values] for name, values in history.history.items()},
    "evaluation": [round(float(v), 6) for v in evaluation], "predictions": list(predictions.shape),
    "weights": [float(weights.sum()), float((weights * weights).sum())],
    "files": sorted(os.path.relpath(os.path.join(folder, name), base) for base in (model_dir, data_dir)
                    for folder, _, names in os.walk(base) for name in names),
}
os.makedirs(data_dir, exist_ok=True)
with open(os.path.join(data_dir, f"fit-{task}.json"), "w", encoding="utf-8") as handle:
    json.dump(record, handle)
print(f"fit done loss={history.history['loss'][-1]:.4f}")
