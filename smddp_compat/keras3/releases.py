"""The Keras releases the Keras 3 adaptation was tested on, and the one-line refusal outside them."""

from __future__ import annotations

from smddp_compat.keras_flavor import keras3_module

__all__ = ["TESTED_KERAS", "UNTESTED_KERAS", "is_tested_keras", "untested_keras_refusal"]

#: The Keras releases (``major.minor``) the adaptation was tested on, with TensorFlow 2.21.
TESTED_KERAS = ("3.15",)

#: The one line of a ``fit`` under those strategies on a Keras release outside :data:`TESTED_KERAS`.
UNTESTED_KERAS = (
    "smddp-compat: Keras {version} is not one the kit's {strategy} adaptation was tested on ({tested}); install "
    "a tested one (pip install 'keras=={latest}.*'), or use tf-keras: TF_USE_LEGACY_KERAS=1"
)


def is_tested_keras(version: str) -> bool:
    """Whether Keras `version` (``"3.15.1"``) is one of :data:`TESTED_KERAS`."""
    return any(version == tested or version.startswith(tested + ".") for tested in TESTED_KERAS)


def untested_keras_refusal(strategy: str) -> NotImplementedError | None:
    """The error of a ``fit`` under `strategy` on an untested Keras release, or None on a tested one."""
    keras = keras3_module()
    version = str(getattr(keras, "__version__", "?"))
    if is_tested_keras(version):
        return None
    return NotImplementedError(UNTESTED_KERAS.format(version=version, strategy=strategy,
                                                     tested=", ".join(f"{v}.x" for v in TESTED_KERAS),
                                                     latest=TESTED_KERAS[-1]))
