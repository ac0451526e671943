"""A training script for the tuning tests that prints its objective once per epoch, as early stopping and Hyperband
read it: ``val_loss`` is ``|lr - 0.03| + 1/epoch``, so the trial nearest lr 0.03 is the best at every epoch. It
writes its model (``model.txt``: its lr and host) before its first epoch, so a trial stopped early still has one."""

from __future__ import annotations

#: The metric definition of its objective.
VAL_LOSS = {"Name": "val_loss", "Regex": r"val_loss=([0-9.]+)"}


def epochs_script(seconds_per_epoch: float, epochs: int) -> str:
    """The script's source: ``--lr`` (default 0.1) and ``--epochs`` (default ``epochs``) as hyperparameters,
    ``seconds_per_epoch`` between two epochs' lines."""
    return f"""\
import argparse, os, time
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--epochs", type=int, default={epochs})
args, _ = parser.parse_known_args()
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as out:
    out.write(f"lr={{args.lr}} on {{os.environ['SM_CURRENT_HOST']}}")
for epoch in range(1, args.epochs + 1):
    time.sleep({seconds_per_epoch})
    print(f"epoch {{epoch}} val_loss={{abs(args.lr - 0.03) + 1 / epoch:.6f}}", flush=True)
"""


def epoch_of(value: float, lr: float, epochs: int) -> int | None:
    """The epoch (1..``epochs``) whose line printed ``value`` for a trial of learning rate ``lr``, or None. A trial
    stopped early ends with the value of the last epoch it printed before its stop took effect: the epoch its stop
    was decided at, or one or two later (the stop reaches the script a poll later, the twin's through Docker)."""
    return next((epoch for epoch in range(1, epochs + 1) if round(abs(lr - 0.03) + 1 / epoch, 6) == value), None)
