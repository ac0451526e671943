"""A parameter-server training script in the pattern of TensorFlow's parameter-server tutorial: it starts from
``tf.distribute.cluster_resolver.TFConfigClusterResolver()`` and branches on the task type; the workers serve
(``smddp_compat.parameter_server.serve`` in place of the tutorial's ``server.join()``, which never returns, so that
a worker ends when the coordinator is done), and the coordinator (SageMaker's ``master``) trains with Keras ``fit``
under ``ParameterServerStrategy`` over the kit's resolver (TF 2.21's strategy refuses the job name ``master``).
Keras ``fit`` under this strategy needs tf-keras. Prints ``accuracy=<held-out accuracy>;`` on the coordinator."""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from smddp_compat import parameter_server as ps  # noqa: E402

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

    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)),
                                     tf.keras.layers.Dense(2, activation="softmax")])
        model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    model.fit(tf.keras.utils.experimental.DatasetCreator(dataset_fn), epochs=3, steps_per_epoch=20, verbose=2)
    correct = np.argmax(model.predict(x[1000:], verbose=0), axis=1) == y[1000:]
    print(f"accuracy={correct.mean():.4f};", flush=True)
