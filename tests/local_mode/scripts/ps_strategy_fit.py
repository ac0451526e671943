"""A parameter-server training script in the pattern of TensorFlow's parameter-server tutorial: it starts from
``tf.distribute.cluster_resolver.TFConfigClusterResolver()`` and branches on the task type; the workers serve
(``smddp_compat.parameter_server.serve`` in place of the tutorial's ``server.join()``, which never returns, so that
a worker ends when the coordinator is done), and the coordinator (SageMaker's ``master``) trains with Keras ``fit``
under ``ParameterServerStrategy`` over the kit's resolver (TF 2.21's strategy refuses the job name ``master``), then
evaluates with ``evaluate`` (scheduled on the workers) and ``predict``. Unchanged on Keras 3 (a dataset function)
and on tf-keras (``TF_USE_LEGACY_KERAS=1``: its ``DatasetCreator``). Prints, on the coordinator,
``keras=<flavour>; accuracy=<held-out accuracy by predict>; evaluated=<accuracy by evaluate>;``."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from smddp_compat import parameter_server as ps

keras = tf.keras
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
print(f"task={resolver.task_type}:{resolver.task_id}", flush=True)
config = ps.read_tf_config()
if resolver.task_type in ("worker", "ps"):
    ps.serve(config, start_timeout=300, timeout_field="the script's start timeout")
else:
    ps.wait_for_tasks(config, timeout=300, timeout_field="the script's start timeout")
    strategy = tf.distribute.ParameterServerStrategy(ps.cluster_resolver(config))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1200, 8)).astype("float32")
    y = (x.sum(axis=1) > 0).astype("int32")

    def dataset_fn(_context: object) -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices((x[:1000], y[:1000])).shuffle(1000).repeat().batch(50)

    def held_out_fn(_context: object) -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices((x[1000:], y[1000:])).repeat().batch(50)

    creator = getattr(getattr(keras.utils, "experimental", None), "DatasetCreator", None)  # tf-keras only
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(2, activation="softmax")])
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    model.fit(creator(dataset_fn) if creator else dataset_fn, epochs=3, steps_per_epoch=20, verbose=2)
    evaluated = model.evaluate(creator(held_out_fn) if creator else held_out_fn, steps=4, return_dict=True)
    correct = np.argmax(model.predict(x[1000:], verbose=0), axis=1) == y[1000:]
    flavour = "tf-keras" if keras.__name__.startswith("tf_keras") else "keras-3"
    print(f"keras={flavour}; accuracy={correct.mean():.4f}; evaluated={evaluated['accuracy']:.4f};", flush=True)
