"""A Horovod (or SMDDP) Keras script as their documentation writes it: a DistributedOptimizer, ``model.compile``
without ``jit_compile`` (Keras 3's default, ``"auto"``), ``model.fit`` with the broadcast callback. Arguments: the
face (``horovod`` or ``smddp``), how ``jit_compile`` is given (``default`` or ``true``), and where the all-reduce
is (``optimizer``, or ``tape``: a ``train_step`` with the distributed tape and a plain optimizer)."""

import sys

import numpy as np
import tensorflow as tf
from _result import write_result

face, jit_compile, reduce_in = sys.argv[1:4]
if face == "horovod":
    import smddp_compat.horovod.tensorflow as hvd_tape  # Horovod's tape is in horovod.tensorflow
    import smddp_compat.horovod.tensorflow.keras as hvd
else:
    import smdistributed.dataparallel.tensorflow as hvd
    hvd_tape = hvd

hvd.init()


class TapeModel(tf.keras.Model):
    """A model whose train_step all-reduces its gradients with the distributed tape."""

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = self.compute_loss(x=x, y=y, y_pred=self(x, training=True))
        tape = hvd_tape.DistributedGradientTape(tape)
        self.optimizer.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))
        for metric in self.metrics:
            metric.update_state(loss)
        return {metric.name: metric.result() for metric in self.metrics}


rng = np.random.default_rng(hvd.rank())
x = rng.normal(size=(256, 8)).astype("float32")
y = x.sum(axis=1, keepdims=True)
inputs = tf.keras.Input((8,))
outputs = tf.keras.layers.Dense(1)(inputs)
optimizer = tf.keras.optimizers.Adam(0.01 * hvd.size())
if reduce_in == "tape":
    model = TapeModel(inputs, outputs)
else:
    model = tf.keras.Model(inputs, outputs)
    optimizer = hvd.DistributedOptimizer(optimizer)
model.compile(optimizer=optimizer, loss="mse", **({"jit_compile": True} if jit_compile == "true" else {}))
callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
history = model.fit(x, y, batch_size=32, epochs=3, callbacks=callbacks, verbose=0)
write_result(hvd.rank(), jit_compile=bool(model.jit_compile), losses=history.history["loss"],
             gpus_reported=len(tf.config.list_physical_devices("GPU")),
             weights=[w.tolist() for w in model.get_weights()])
