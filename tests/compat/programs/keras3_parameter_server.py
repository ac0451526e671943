"""Keras 3 under ParameterServerStrategy on an in-process cluster (3 workers, 2 parameter servers, variables that a
partitioner would shard), started by hand with the one import line: the refusals of fit's and evaluate's arguments,
then fit (with validation), evaluate and predict. Prints one JSON line."""
import json
import os
import socket

import numpy as np
import tensorflow as tf

import smddp_compat.keras3  # noqa: F401 - the one line a script started by hand adds
from smddp_compat.errors import ConfigurationError

keras = tf.keras


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


os.environ["GRPC_FAIL_FAST"] = "use_caller"
cluster = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{free_port()}" for _ in range(3)],
                                "ps": [f"127.0.0.1:{free_port()}" for _ in range(2)]})
config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=4)  # in-process servers share one thread pool
for job, count in (("worker", 3), ("ps", 2)):
    for index in range(count):
        tf.distribute.Server(cluster, job_name=job, task_index=index, protocol="grpc", config=config)
strategy = tf.distribute.ParameterServerStrategy(
    tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc"),
    variable_partitioner=tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes=1, max_shards=2))
rng = np.random.default_rng(0)
x = rng.normal(size=(1200, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int32")


def dataset_fn(_context):
    return tf.data.Dataset.from_tensor_slices((x[:1000], y[:1000])).shuffle(1000).repeat().batch(50)


with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], steps_per_execution=2)
refusals = []
for call in (lambda: model.fit(x, y, epochs=1),
             lambda: model.fit(dataset_fn, epochs=1),
             lambda: model.fit(dataset_fn, epochs=1, steps_per_epoch=4, batch_size=32),
             lambda: model.evaluate(dataset_fn)):
    try:
        call()
        refusals.append("accepted")
    except ConfigurationError as exc:
        refusals.append(str(exc))
history = model.fit(dataset_fn, epochs=3, steps_per_epoch=20, verbose=0,
                    validation_data=lambda _: tf.data.Dataset.from_tensor_slices((x[1000:], y[1000:])).repeat().batch(50),
                    validation_steps=4)
evaluated = model.evaluate(tf.data.Dataset.from_tensor_slices((x[1000:], y[1000:])).batch(50), return_dict=True,
                           verbose=0)
predicted = model.predict(x[1000:], verbose=0)
print(json.dumps({"refusals": refusals, "history": history.history, "evaluated": evaluated,
                  "predicted": float((predicted.argmax(axis=1) == y[1000:]).mean())}))
