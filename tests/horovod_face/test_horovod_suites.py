"""Horovod 0.28.1's own TensorFlow suites against this kit's Horovod face (needs a checkout of Horovod's repository).

Set ``SMDDP_HOROVOD_CHECKOUT`` to Horovod's repository at tag v0.28.1 to run them; without it they are skipped.
About 40 minutes on 2 cores: raw Horovod and the kit, tf-keras and Keras 3, both suites.
"""

import os
from pathlib import Path

import pytest

from tests.horovod_face.horovod_suites import rewrite_imports, run_suite

CHECKOUT = os.environ.get("SMDDP_HOROVOD_CHECKOUT")
needs_checkout = pytest.mark.skipif(
    not CHECKOUT, reason="Horovod's suites not run: set SMDDP_HOROVOD_CHECKOUT to a checkout of Horovod at v0.28.1")


def test_only_horovod_tensorflow_and_keras_imports_are_swapped():
    source = ("import horovod.tensorflow as hvd\nfrom horovod.tensorflow.util import _executing_eagerly\n"
              "import horovod.keras as hvd_keras\nimport horovod.tensorflow.keras as hk\n"
              "from horovod.common.util import is_version_greater_equal_than\nimport horovod\n"
              "x = 'import horovod.tensorflow'\n")
    assert rewrite_imports(source) == (
        "import smddp_compat.horovod.tensorflow as hvd\nfrom smddp_compat.horovod.tensorflow.util import "
        "_executing_eagerly\nimport smddp_compat.horovod.keras as hvd_keras\n"
        "import smddp_compat.horovod.tensorflow.keras as hk\n"
        "from horovod.common.util import is_version_greater_equal_than\nimport horovod\n"
        "x = 'import horovod.tensorflow'\n")


@pytest.mark.e2e
@needs_checkout
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("suite", ["test_tensorflow.py", "test_tensorflow2_keras.py"])
def test_horovod_suite_with_the_kit(suite):
    """With tf-keras every test raw Horovod passes passes with the kit; with Keras 3 the kit passes at least as
    many as raw Horovod does there (test_tensorflow.py: as many as raw Horovod with tf-keras)."""
    checkout = Path(CHECKOUT)
    raw_tf_keras = run_suite(checkout, suite, "horovod", "tf_keras")
    kit_tf_keras = run_suite(checkout, suite, "kit", "tf_keras")
    raw_keras3 = run_suite(checkout, suite, "horovod", "keras3")
    kit_keras3 = run_suite(checkout, suite, "kit", "keras3")
    for result in (raw_tf_keras, kit_tf_keras, raw_keras3, kit_keras3):
        assert not result.problem, (result.problem, result.failures)
    newly_failing = set(kit_tf_keras.failures) - set(raw_tf_keras.failures)
    assert not newly_failing, {name: kit_tf_keras.failures[name] for name in newly_failing}
    assert kit_tf_keras.passed >= raw_tf_keras.passed
    assert kit_keras3.passed >= raw_keras3.passed
    if suite == "test_tensorflow.py":
        assert kit_keras3.passed >= raw_tf_keras.passed, kit_keras3.failures
