"""A data-parallel training loop that runs until it is stopped: a linear model, DistributedGradientTape inside a
tf.function step. Each rank prints ``PID <pid>`` once, then ``STEP <n>`` every 10 steps."""

import os

import tensorflow as tf

import smddp_compat.tensorflow as sdp

sdp.init()
print(f"PID {os.getpid()}", flush=True)
tf.random.set_seed(sdp.rank())
x = tf.random.normal([256, 64])
y = tf.random.normal([256, 10])
w = tf.Variable(tf.zeros([64, 10]))
sdp.broadcast_variables([w], root_rank=0)


@tf.function
def step() -> tf.Tensor:
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    (grad,) = sdp.DistributedGradientTape(tape).gradient(loss, [w])
    w.assign_sub(0.01 * grad)
    return loss


for n in range(10**9):
    loss = step()
    if n % 10 == 0:
        print(f"STEP {n} loss {float(loss):.5f}", flush=True)
