"""Runs ``smddprun`` (its ``main``, in this process) with a SIGINT that arrives right after the second rank's process
was created, before the launcher has noted it: the moment a signal used to orphan that rank.

``subprocess.Popen`` is wrapped so that, once it has created the second process running the rank program (a command
line holding ``--pid-dir``), this process sends itself SIGINT and appends the PIDs of every rank it created to the
file named by ``SPAWNED_PIDS_FILE``, one a line, so the test can check that each of them is gone.
"""

import os
import signal
import subprocess
import sys

from smddp_compat.launcher import main

_RealPopen = subprocess.Popen
_spawned: list[int] = []


class _SignalAfterSecondRank(_RealPopen):  # type: ignore[misc, valid-type]
    def __init__(self, argv, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(argv, *args, **kwargs)
        if isinstance(argv, (list, tuple)) and "--pid-dir" in argv:
            _spawned.append(self.pid)
            with open(os.environ["SPAWNED_PIDS_FILE"], "a", encoding="ascii") as out:
                out.write(f"{self.pid}\n")
            if len(_spawned) == 2:
                os.kill(os.getpid(), signal.SIGINT)


subprocess.Popen = _SignalAfterSecondRank  # type: ignore[misc]
sys.exit(main(sys.argv[1:]))
