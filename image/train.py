"""The training image's ``train`` (``docker run <image> train``): AWS's ``sagemaker-training`` toolkit's own trainer
(``sagemaker_training.trainer.train``), unchanged but for three changes (why: image/README.md):

1. Argument lists stay argument lists: every command the toolkit runs (the entry point with its hyperparameters,
   ``mpirun``) is started as a list (``asyncio.create_subprocess_exec``), never joined into a string for a shell.
2. SIGTERM reaches the job: ``train``, the container's first process, passes it on to every other process.
3. The kit's start-up: the job's processes get :func:`smddp_compat.job_startup.startup_path` on ``PYTHONPATH``, so
   a Keras 3 script under MultiWorkerMirroredStrategy or ParameterServerStrategy trains unchanged
   (:mod:`smddp_compat.keras3`).

The twin's opt-in alone, never SageMaker's: with ``SMDDP_TWIN_SHORT_TOOLKIT_WAITS=1`` (``--short-toolkit-waits``) the
fixed 30 s sleeps of the toolkit's MPI and SMDDP runners last at most 1 s; their protocol is kept.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from types import ModuleType
from typing import Any

from smddp_compat import job_startup

__all__ = ["main", "run_argument_list", "SHORT_TOOLKIT_WAITS", "ShortSleeps"]

SHORT_TOOLKIT_WAITS = "SMDDP_TWIN_SHORT_TOOLKIT_WAITS"
"""Set to ``1`` by the twin when asked to shorten the toolkit's fixed waits (never on SageMaker)."""

_SHORT_WAIT_SECONDS = 1.0


async def run_argument_list(
    cmd: list[str], processes_per_host: int, env: Any, cwd: str, stderr: Any, error_classes: Any = None, **kwargs: Any
) -> tuple[int, Any, Any]:
    """``sagemaker_training.process.run_async`` with the command started as a list (no shell).

    Same arguments and result as the toolkit's function, which this replaces.
    """
    from sagemaker_training import process

    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = job_startup.with_startup_path(env.get("PYTHONPATH"))
    proc = await asyncio.create_subprocess_exec(
        *[str(part) for part in cmd], env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=stderr, **kwargs
    )
    output = await asyncio.gather(
        process.watch(proc.stdout, processes_per_host, error_classes=error_classes),
        process.watch(proc.stderr, processes_per_host, error_classes=error_classes),
    )
    return_code = await proc.wait()
    return return_code, output, proc


class ShortSleeps:
    """The ``time`` module as the toolkit's MPI and SMDDP runners see it, with every ``sleep`` cut to at most 1 s."""

    def __init__(self, module: ModuleType = time, longest: float = _SHORT_WAIT_SECONDS) -> None:
        self._module = module
        self._longest = longest

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def sleep(self, seconds: float) -> None:
        """Sleeps ``seconds``, but at most the shortened wait."""
        self._module.sleep(min(seconds, self._longest))


def _shorten_toolkit_waits() -> None:
    from sagemaker_training import mpi, smdataparallel

    for runner in (mpi, smdataparallel):
        runner.time = ShortSleeps()  # type: ignore[attr-defined]


def _pass_on_sigterm(signum: int, _frame: object) -> None:
    """Sends the signal to every other process of the container (``kill(-1)``: all but this one)."""
    try:
        os.kill(-1, signum)
    except ProcessLookupError:
        pass


def main() -> None:
    """Runs the toolkit's trainer with the three changes (the console entry ``train`` of the image)."""
    from sagemaker_training import process, trainer

    process.run_async = run_argument_list
    if os.environ.get(SHORT_TOOLKIT_WAITS) == "1":
        _shorten_toolkit_waits()
    if os.getpid() == 1:
        signal.signal(signal.SIGTERM, _pass_on_sigterm)
    trainer.train()


if __name__ == "__main__":
    main()
    sys.exit(0)
