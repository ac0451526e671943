"""Runs the program named by the first argument as ``__main__`` in a process where TensorFlow reports a GPU (a test
double of the environment: ``tf.config.list_physical_devices()`` lists one more device, ``GPU:0``), so Keras 3
decides ``jit_compile="auto"`` as on a GPU host while the program runs on the CPU."""

import runpy
import sys

import tensorflow as tf

_list_physical_devices = tf.config.list_physical_devices


def list_physical_devices(device_type=None):
    devices = _list_physical_devices(device_type)
    if device_type in (None, "GPU"):
        devices = [*devices, tf.config.PhysicalDevice(name="/physical_device:GPU:0", device_type="GPU")]
    return devices


tf.config.list_physical_devices = list_physical_devices
program, sys.argv = sys.argv[1], sys.argv[1:]
runpy.run_path(program, run_name="__main__")
