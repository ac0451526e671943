"""MNIST CNN trained with Keras ``fit`` under a ``tf.distribute`` strategy chosen by ``--strategy`` (auto, mirrored,
central_storage, multi_worker_mirrored), with the Keras flavour each needs chosen before TensorFlow is imported.

See docs/training-scripts.md#keras_mwms (strategies, refusals, the cluster, batching, Keras 3 or tf-keras).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

if __package__ in (None, ""):
    try:
        import smddp_compat.entry_points  # noqa: F401 - installed with the project
    except ImportError:  # a plain checkout: make the repository root importable
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Nothing above TensorFlow's import may import it: the Keras flavour is chosen (and refusals made) before it.
from smddp_compat.entry_points.common.errors import ClusterConfigError, EntryPointError, HyperparameterError
from smddp_compat.entry_points.common.hyperparameters import (
    boolean, non_negative_int, parse_hyperparameters, positive_float, positive_int)
from smddp_compat.entry_points.common.lifecycle import run_entry_point, write_failure
from smddp_compat.entry_points.common.metric_lines import MetricLogger
from smddp_compat.entry_points.common.training_env import TrainingEnv, add_output_dir_arguments

from smddp_compat.cluster import Cluster, endpoints, mwms_tf_config, uniform_placements
from smddp_compat.errors import SmddpError
from smddp_compat.keras_flavor import selects_tf_keras

__all__ = [
    "STRATEGIES", "StrategyPlan", "build_parser", "global_batch_size", "main", "plan_strategy", "select_keras_flavour",
    "tf_config_from_env",
]

#: The values of ``--strategy``.
STRATEGIES = ("auto", "mirrored", "central_storage", "multi_worker_mirrored")
#: The class each resolved strategy builds, as ``tf.distribute`` names it (the ``strategy=`` line prints it).
STRATEGY_CLASSES = {
    "mirrored": "MirroredStrategy",
    "central_storage": "CentralStorageStrategy",
    "multi_worker_mirrored": "MultiWorkerMirroredStrategy",
}


def strategy_name(text: str) -> str:
    """``--strategy``'s value as one of `STRATEGIES` (case and ``-``/``_`` are not significant).

    Raises:
        HyperparameterError: Not one of them.
    """
    name = str(text).strip().lower().replace("-", "_")
    if name not in STRATEGIES:
        raise HyperparameterError("--strategy", text, "is not a strategy this script knows",
                                  f"use one of {', '.join(STRATEGIES)}")
    return name


def build_parser() -> argparse.ArgumentParser:
    """The script's hyperparameters (every one has a default)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--strategy", default="auto",
                        help=f"one of {', '.join(STRATEGIES)} (see docs/training-scripts.md#keras_mwms)")
    parser.add_argument("--cpu-devices", type=positive_int, default=1,
                        help="split this host's CPU into N logical devices, one replica each under mirrored and "
                             "central_storage (1: unchanged)")
    parser.add_argument("--epochs", type=positive_int, default=5)
    parser.add_argument("--batch-size-per-replica", type=positive_int, default=32)
    parser.add_argument("--global-batch-size", type=non_negative_int, default=0,
                        help="overrides --batch-size-per-replica; must be divisible by the number of replicas")
    parser.add_argument("--learning-rate", type=positive_float, default=0.001, help="per-replica rate, x replicas")
    parser.add_argument("--steps-per-epoch", type=non_negative_int, default=0, help="0: the train set once")
    parser.add_argument("--checkpoint-steps", type=non_negative_int, default=0, help="0: at each epoch end")
    parser.add_argument("--log-steps", type=positive_int, default=50)
    add_output_dir_arguments(parser)
    parser.add_argument("--mwms-port", type=positive_int, default=12345,
                        help="each worker listens on this port (the next ones for workers sharing an address; only "
                             "when TF_CONFIG is not set)")
    parser.add_argument("--seed", type=non_negative_int, default=42)
    parser.add_argument("--save-model", type=boolean, default=True)
    parser.add_argument("--weights-digest", type=boolean, default=False,
                        help="write weights-rank<worker>.sha256 to the output data dir")
    return parser


def _read_tf_config(raw: str) -> tuple[dict[str, Any], str, int, list[tuple[str, int]]]:
    """``TF_CONFIG``'s (cluster, task type, task index, chief-and-worker tasks in worker order), checked.

    Raises:
        ClusterConfigError: Malformed, or its task is not one of its cluster's chief/worker tasks.
    """
    try:
        config = json.loads(raw)
        cluster = config["cluster"]
        task_type, task_index = config["task"]["type"], int(config["task"]["index"])
        order = [(kind, i) for kind in ("chief", "worker") for i in range(len(cluster.get(kind, [])))]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ClusterConfigError(f"TF_CONFIG={raw!r} is malformed ({exc}); it needs "
                                 '{"cluster": {"worker": [...]}, "task": {"type": ..., "index": ...}}.') from exc
    if (task_type, task_index) not in order:
        raise ClusterConfigError(f"TF_CONFIG task {task_type}:{task_index} is not in its cluster {cluster}.")
    return cluster, task_type, task_index, order


@dataclass(frozen=True)
class StrategyPlan:
    """The strategy a run will build, decided from the hyperparameters and the environment alone (no TensorFlow).

    Attributes:
        requested: The ``--strategy`` value (``auto`` included).
        kind: The strategy built: ``mirrored``, ``central_storage`` or ``multi_worker_mirrored``.
        workers: Workers in the cluster (``TF_CONFIG``'s chief and workers, else the hosts of ``SM_HOSTS``).
        cpu_devices: ``--cpu-devices``.
        needs_tf_keras: Whether Keras 3 cannot fit under this strategy (CentralStorageStrategy; see
            docs/training-scripts.md#keras_mwms).
    """

    requested: str
    kind: str
    workers: int
    cpu_devices: int
    needs_tf_keras: bool

    @property
    def class_name(self) -> str:
        """``MirroredStrategy``, ``CentralStorageStrategy`` or ``MultiWorkerMirroredStrategy``."""
        return STRATEGY_CLASSES[self.kind]


def _cluster_size(environ: Mapping[str, str]) -> tuple[int, str]:
    """(workers, a description of them): the larger of ``TF_CONFIG``'s chief+worker tasks and ``SM_HOSTS``' hosts."""
    raw = environ.get("TF_CONFIG")
    from_tf_config = len(_read_tf_config(raw)[3]) if raw else 0
    hosts = Cluster.from_environ(environ).hosts
    if from_tf_config > len(hosts):
        return from_tf_config, f"{from_tf_config} workers (TF_CONFIG's chief and worker tasks)"
    return len(hosts), f"{len(hosts)} hosts (SM_HOSTS: {', '.join(hosts)})"


def plan_strategy(strategy: str, cpu_devices: int, environ: Mapping[str, str]) -> StrategyPlan:
    """Resolves ``--strategy`` (one of `STRATEGIES`, see `strategy_name`) and ``--cpu-devices`` against the cluster of
    `environ` (``TF_CONFIG``, ``SM_HOSTS``, ``SM_CURRENT_HOST``, ``SMDDP_HOST_ADDRESSES``) and refuses what cannot run
    (docs/training-scripts.md#keras_mwms).

    Raises:
        HyperparameterError: An unknown strategy, a one-host strategy in a cluster of several hosts, or
            ``--cpu-devices`` > 1 under MultiWorkerMirroredStrategy.
        ClusterConfigError: ``TF_CONFIG`` or the SageMaker variables are malformed.
    """
    given, strategy = strategy, strategy_name(strategy)
    workers, cluster = _cluster_size(environ)
    if strategy == "auto":
        kind = "multi_worker_mirrored" if environ.get("TF_CONFIG") or workers > 1 else "mirrored"
    else:
        kind = strategy
    if kind in ("mirrored", "central_storage") and workers > 1:
        raise HyperparameterError(
            "--strategy", given, f"{STRATEGY_CLASSES[kind]} trains on one host, but this job's cluster has {cluster}",
            "use --strategy multi_worker_mirrored (or auto) on several hosts, or run the job on one instance")
    if kind == "multi_worker_mirrored" and cpu_devices > 1:
        raise HyperparameterError(
            "--cpu-devices", cpu_devices,
            f"MultiWorkerMirroredStrategy (--strategy={strategy}) places one replica per worker on a CPU host, "
            "whatever its logical devices, so the extra devices would stay idle",
            "drop --cpu-devices (or set it to 1), or use --strategy mirrored or central_storage on one host")
    needs_tf_keras = kind == "central_storage"
    return StrategyPlan(strategy, kind, workers, cpu_devices, needs_tf_keras)


def _keras_refusal(plan: StrategyPlan, value: str | None, fix: str) -> EntryPointError:
    return EntryPointError(field="TF_USE_LEGACY_KERAS", value=value,
                           problem=f"selects Keras 3, which cannot fit this model under {plan.class_name} (its "
                                   "Dropout layers' seed-generator variables cannot be updated inside a replica)",
                           fix=fix + ", or use --strategy mirrored")


def select_keras_flavour(plan: StrategyPlan, environ: MutableMapping[str, str]) -> None:
    """Selects tf-keras (``TF_USE_LEGACY_KERAS=1``) when `plan` needs it; call before TensorFlow is imported.

    Raises:
        EntryPointError: ``TF_USE_LEGACY_KERAS`` is set to a value that keeps Keras 3 and `plan` needs tf-keras.
    """
    if not plan.needs_tf_keras:
        return
    value = environ.get("TF_USE_LEGACY_KERAS")
    if not value:
        environ["TF_USE_LEGACY_KERAS"] = "1"
    elif not selects_tf_keras(environ):
        raise _keras_refusal(plan, value, "unset TF_USE_LEGACY_KERAS (the script then selects tf-keras) or set it to 1")


def _refuse(exc: SmddpError) -> NoReturn:
    """One line on stderr, the failure file, exit status 1 (a user's mistake needs no traceback)."""
    summary = f"{type(exc).__name__}: {exc}"
    one_line = " ".join(part.strip() for part in summary.splitlines())
    print(f"keras_mwms: refused: {one_line}", file=sys.stderr, flush=True)
    write_failure(summary)
    sys.exit(1)


if __name__ == "__main__":
    # Decided before TensorFlow is imported: a refusal costs no TensorFlow start, and the Keras flavour can only be
    # chosen now.
    try:
        _args = parse_hyperparameters(build_parser())
        select_keras_flavour(plan_strategy(_args.strategy, _args.cpu_devices, os.environ), os.environ)
    except SmddpError as _exc:
        _refuse(_exc)
else:  # imported (e.g. to call main()): the multi-worker default, as for --strategy auto
    try:
        select_keras_flavour(plan_strategy("auto", 1, os.environ), os.environ)
    except SmddpError:
        pass  # reported by main()

import smddp_compat.keras3  # noqa: E402,F401 - Keras 3 under MultiWorkerMirroredStrategy (the kit's jobs arm it too)
import tensorflow as tf
from smddp_compat.entry_points.common.checkpoints import restore_latest
from smddp_compat.entry_points.common.datasets import load_mnist
from smddp_compat.entry_points.common.errors import CheckpointError
from smddp_compat.entry_points.common.keras_flavor import build_optimizer, is_keras3, keras_name
from smddp_compat.entry_points.common.mnist_model import build_cnn, evaluate_classifier
from smddp_compat.entry_points.common.model_artifacts import save_servable_model, write_summary, write_weights_digest
from smddp_compat.entry_points.common.resumable_fit import MetricLines, StepCheckpoint, epoch_dataset, fit_from_step
from smddp_compat.entry_points.common.tensorboard_summaries import TrainingSummaries, learning_rate_of


def tf_config_from_env(env: TrainingEnv, base_port: int) -> dict:
    """The ``TF_CONFIG`` of this host's worker (:func:`smddp_compat.cluster.mwms_tf_config`), built from the SageMaker
    cluster of `env`: one worker per host, in SM_HOSTS order, on ports as :func:`smddp_compat.cluster.endpoints` gives
    them (`base_port`, ``--mwms-port``, at each address, the next ports for further workers sharing that address).

    Raises:
        smddp_compat.cluster.ClusterConfigError: The ports would exceed 65535.
    """
    cluster = env.cluster
    placements = uniform_placements(cluster.hosts, 1)
    workers = endpoints(placements, cluster.addresses, base_port=base_port, port_field="--mwms-port")
    return mwms_tf_config(workers, cluster.host_index)


def global_batch_size(per_replica: int, requested_global: int, replicas: int) -> int:
    """The global batch: `requested_global` when given (> 0), else `per_replica` x `replicas`.

    Raises:
        HyperparameterError: `requested_global` is not divisible by `replicas`.
    """
    if not requested_global:
        return per_replica * replicas
    if requested_global % replicas:
        suggestion = replicas * max(1, round(requested_global / replicas))
        raise HyperparameterError(
            "--global-batch-size", requested_global, f"is not divisible by the {replicas} replicas in sync",
            f"use a multiple of {replicas} (e.g. {suggestion}) or set --batch-size-per-replica instead")
    return requested_global


def _logical_cpus(count: int) -> list[str]:
    """Splits this host's CPU into `count` logical devices (before TensorFlow's runtime starts) and returns their
    names; ``[]`` for 1 (the strategy's own default devices)."""
    if count <= 1:
        return []
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError as exc:  # the runtime already started (only when main() runs inside a larger program)
        if len(tf.config.list_logical_devices("CPU")) != count:
            raise EntryPointError(
                field="--cpu-devices", value=count,
                problem=f"TensorFlow's runtime had already started, with a different device list ({exc})",
                fix="run the script as its own process (python keras_mwms.py ...)") from exc
    return [device.name for device in tf.config.list_logical_devices("CPU")][:count]


def _make_strategy(plan: StrategyPlan, env: TrainingEnv,
                   base_port: int) -> tuple[tf.distribute.Strategy, int, int, bool]:
    """Returns (strategy, worker index, worker count, is chief); sets TF_CONFIG when it has to be built."""
    devices = _logical_cpus(plan.cpu_devices)
    if plan.kind == "mirrored":
        return tf.distribute.MirroredStrategy(devices=devices or None), 0, 1, True
    if plan.kind == "central_storage":
        if devices:  # variables on the first logical CPU, one replica on each
            strategy = tf.distribute.experimental.CentralStorageStrategy(compute_devices=devices,
                                                                         parameter_device=devices[0])
        else:
            strategy = tf.distribute.experimental.CentralStorageStrategy()
        return strategy, 0, 1, True
    raw = os.environ.get("TF_CONFIG")
    if not raw and env.is_multi_host:
        os.environ["TF_CONFIG"] = json.dumps(tf_config_from_env(env, base_port))
        raw = os.environ["TF_CONFIG"]
    if not raw:  # a one-worker cluster of this host alone
        return tf.distribute.MultiWorkerMirroredStrategy(), 0, 1, True
    cluster, task_type, task_index, order = _read_tf_config(raw)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    is_chief = task_type == "chief" or (task_type == "worker" and task_index == 0 and "chief" not in cluster)
    return strategy, order.index((task_type, task_index)), len(order), is_chief


def _checkpoint_keras(prefix: str) -> str | None:
    """Which Keras wrote the checkpoint `prefix` ("Keras 3", "tf-keras"), told by its object graph's names, or None."""
    try:
        names = [name for name, _ in tf.train.list_variables(prefix)]
    except (tf.errors.OpError, ValueError):
        return None
    if any(name.startswith("model/layer_with_weights-") for name in names):
        return "tf-keras"
    if any(name.startswith("optimizer/_trainable_variables/") for name in names):
        return "Keras 3"
    return None


def _restore(checkpoint: tf.train.Checkpoint, directory: Path, plan: StrategyPlan) -> int:
    """`restore_latest`'s step (0: nothing to resume); a checkpoint of the other Keras flavour is named as such."""
    try:
        return restore_latest(checkpoint, directory) or 0
    except CheckpointError as exc:
        written, this = _checkpoint_keras(exc.path or ""), ("Keras 3" if is_keras3() else "tf-keras")
        if written is None or written == this:
            raise
        raise CheckpointError(
            f"the checkpoint {exc.path} was written with {written}, but this run trains with {this} "
            f"({plan.class_name}, --strategy={plan.requested}); their checkpoints do not mix. Resume with the "
            "--strategy (and TF_USE_LEGACY_KERAS) of the run that wrote it, or point --checkpoint-dir at an empty "
            "directory to start fresh.", path=exc.path) from exc


def main() -> None:
    """Trains, evaluates and saves the model (see docs/training-scripts.md#keras_mwms)."""
    args = parse_hyperparameters(build_parser())
    plan = plan_strategy(args.strategy, args.cpu_devices, os.environ)
    if plan.needs_tf_keras and is_keras3():  # TensorFlow was imported before the flavour could be chosen
        raise _keras_refusal(plan, os.environ.get("TF_USE_LEGACY_KERAS"),
                             "set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported (running the script as a "
                             "program does it)")
    env = TrainingEnv.from_environ(checkpoint_dir=args.checkpoint_dir, tensorboard_dir=args.tensorboard_dir)
    # The strategy must exist before any other TensorFlow work (MultiWorkerMirroredStrategy starts a server, and the
    # logical CPU devices must be set before the runtime starts).
    strategy, worker, workers, is_chief = _make_strategy(plan, env, args.mwms_port)
    replicas = strategy.num_replicas_in_sync
    log = MetricLogger(enabled=is_chief)

    global_batch = global_batch_size(args.batch_size_per_replica, args.global_batch_size, replicas)

    (x_train, y_train), (x_test, y_test) = load_mnist(env.channel("train"), test_channel=env.channel("test"))
    full_epoch = len(x_train) // global_batch
    if full_epoch < 1 or args.steps_per_epoch > full_epoch:
        raise HyperparameterError(
            "--steps-per-epoch", args.steps_per_epoch,
            f"with the global batch of {global_batch} it needs more than the {len(x_train)} training images",
            f"lower the batch size or use --steps-per-epoch <= {max(1, full_epoch)}")
    steps_per_epoch = args.steps_per_epoch or full_epoch
    if is_chief:
        env.prepare_dirs()
        devices = ",".join(strategy.extended.worker_devices)
        print(f"strategy={plan.class_name} replicas={replicas} workers={workers} devices={devices} "
              f"(--strategy={plan.requested}, --cpu-devices={plan.cpu_devices})", flush=True)
        print(f"keras_mwms: {plan.class_name}, worker {worker}/{workers}, {replicas} replica(s), "
              f"global batch {global_batch}, {keras_name()}, checkpoints in {env.checkpoint_dir}", flush=True)

    tf.random.set_seed(args.seed)
    with strategy.scope():
        model = build_cnn(seed=args.seed)
        model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                      optimizer=tf.keras.optimizers.Adam(args.learning_rate * replicas), metrics=["accuracy"])
        build_optimizer(model.optimizer, model.trainable_variables)
    # Per-batch logs are replica-local running means; the default ("auto" = sum over replicas) would print
    # loss and accuracy times the replica count. The epoch-end logs are computed globally either way.
    model.distribute_reduction_method = "first"
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    start_step = _restore(checkpoint, env.checkpoint_dir, plan)

    @tf.function
    def _replica_sum(value: tf.Tensor) -> tf.Tensor:
        per_replica = strategy.run(tf.identity, args=(value,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def any_worker(value: float) -> float:
        """Sum of `value` over the workers (a collective: every worker must call it at the same point)."""
        total = float(_replica_sum(tf.constant(value, tf.float32)).numpy())
        return total * workers / replicas  # each worker contributes once per local replica

    if workers > 1:
        mean_step = any_worker(float(start_step)) / workers
        if mean_step != start_step:
            raise ClusterConfigError(
                f"worker {worker} restored step {start_step} but the workers' mean is {mean_step:g}: they see "
                "different checkpoint directories; give them one shared --checkpoint-dir.")
    if is_chief and start_step:
        print(f"resumed from the checkpoint of step {start_step}", flush=True)

    counter = StepCheckpoint(
        checkpoint, env.checkpoint_dir, start_step=start_step, every_steps=args.checkpoint_steps or steps_per_epoch,
        writer=is_chief, scratch_for_non_writer=True, log=log,
        stop_agreement=(lambda flag: any_worker(1.0 if flag else 0.0) > 0) if workers > 1 else None,
    )
    summaries = TrainingSummaries(env.tensorboard_dir if is_chief else None,
                                  learning_rate=lambda: learning_rate_of(model.optimizer))
    metric_lines = MetricLines(counter, log_steps=args.log_steps, log=log,
                               evaluate=(lambda: evaluate_classifier(model, x_test, y_test)) if is_chief else None,
                               summaries=summaries)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA

    def dataset_from(step: int) -> tf.data.Dataset:
        # Every worker builds the same global batches; TensorFlow hands each replica its slice of each batch.
        return epoch_dataset(x_train, y_train, global_batch, seed=args.seed, start_step=step,
                             steps_per_epoch=steps_per_epoch, epochs=args.epochs).with_options(options)

    with summaries:  # closes the event file however training ends
        started = time.monotonic()
        fit_from_step(model, dataset_from, start_step=start_step, steps_per_epoch=steps_per_epoch, epochs=args.epochs,
                      callbacks=[counter, metric_lines], counter=counter,
                      verbose=1 if is_chief and sys.stdout.isatty() else 0)
        if args.weights_digest:
            write_weights_digest(model, env.output_data_dir, worker)
        if counter.stopped:
            return
        counter.save()
        if is_chief:
            wall = time.monotonic() - started
            result = evaluate_classifier(model, x_test, y_test)
            log.log(step=counter.step, **result, train_seconds=wall)
            summaries.log_evaluation(counter.step, loss=result["test_loss"], accuracy=result["test_accuracy"])
            summary = {"steps": counter.step, "resumed_from": start_step, "strategy": plan.class_name,
                       "cpu_devices": plan.cpu_devices, "workers": workers, "replicas": replicas,
                       "global_batch": global_batch, **result, "train_seconds": round(wall, 2), "keras": keras_name()}
            write_summary(summary, env.output_data_dir)
        if args.save_model:
            # Every worker saves (the save may involve collectives); only the chief keeps its copy.
            target = env.model_dir if is_chief else Path(tempfile.mkdtemp(prefix="model-non-chief-"))
            try:
                path = save_servable_model(model, target)
                if is_chief:
                    print(f"model saved to {path}", flush=True)
            finally:
                if not is_chief:
                    shutil.rmtree(target, ignore_errors=True)


if __name__ == "__main__":
    run_entry_point(main)
