"""MNIST CNN trained with Keras ``fit`` under ``tf.distribute``: MirroredStrategy on one host,
MultiWorkerMirroredStrategy across hosts (TensorFlow's own collectives; no Horovod).

One process per host. The cluster comes from ``TF_CONFIG`` when it is set; otherwise it is built from SageMaker's
``SM_HOSTS`` / ``SM_CURRENT_HOST`` by ``smddp_compat.cluster`` (as every launcher of the kit builds it): worker ``i``
is host ``i`` of ``SM_HOSTS``, listening on ``<address of host i>:<--mwms-port>``, where the address comes from
``SMDDP_HOST_ADDRESSES`` (local mode maps algo-N to loopback addresses) or is the host name itself (SageMaker).
Worker 0 is the chief. Hosts that share one address take the next ports, so their workers stay apart.

Batching follows the tf.distribute guide: global batch = per-replica batch x ``num_replicas_in_sync``;
``--global-batch-size`` may be given instead, and must then be divisible by the number of replicas. The learning
rate is ``--learning-rate`` x replicas. Only the chief writes checkpoints, TensorBoard summaries and the model; the
other workers save to
a temporary directory and delete it, as the guide prescribes for MultiWorkerMirroredStrategy. Checkpoints every
``--checkpoint-steps`` (default: each epoch), resumed mid-epoch with the step count continued; on SIGTERM all
workers agree (a collective) to stop at the same step and the chief checkpoints.

Keras version: Keras 3 (3.15) cannot ``fit`` under MultiWorkerMirroredStrategy (its symbolic build reduces a
``PerReplica`` batch eagerly and fails; keras-team/keras#20585). A multi-worker run therefore selects tf-keras by
setting ``TF_USE_LEGACY_KERAS=1`` before TensorFlow is imported, unless the variable is already set (to anything).
One-host runs use Keras 3 (or tf-keras with ``TF_USE_LEGACY_KERAS=1``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    try:
        import smddp_compat.entry_points  # noqa: F401 - installed with the project
    except ImportError:  # a plain checkout: make the repository root importable
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smddp_compat.cluster import Cluster, endpoints, mwms_tf_config, uniform_placements  # noqa: E402 (no TF)


def _is_multi_worker(environ: dict[str, str]) -> bool:
    """Whether this run spans several workers (read without TensorFlow; malformed values are reported later)."""
    try:
        raw = environ.get("TF_CONFIG")
        if raw:
            cluster = json.loads(raw).get("cluster", {})
            return sum(len(tasks) for kind, tasks in cluster.items() if kind in ("chief", "worker")) > 1
        return len(Cluster.from_environ(environ).hosts) > 1
    except (ValueError, AttributeError, TypeError):  # ClusterConfigError is a ValueError
        return False


if _is_multi_worker(dict(os.environ)) and "TF_USE_LEGACY_KERAS" not in os.environ:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 cannot fit under MultiWorkerMirroredStrategy (see above)

import numpy as np
import tensorflow as tf

from smddp_compat.entry_points.checkpoints import restore_latest
from smddp_compat.entry_points.datasets import load_mnist
from smddp_compat.entry_points.errors import ClusterConfigError, HyperparameterError
from smddp_compat.entry_points.keras_flavor import build_optimizer, keras_name
from smddp_compat.entry_points.mnist_model import build_cnn
from smddp_compat.entry_points.model_artifacts import save_servable_model, write_weights_digest
from smddp_compat.entry_points.resumable_fit import MetricLines, StepCheckpoint, epoch_dataset, fit_from_step
from smddp_compat.entry_points.sagemaker_contract import (
    MetricLogger,
    TrainingEnv,
    add_tensorboard_dir_argument,
    boolean,
    non_negative_int,
    parse_hyperparameters,
    positive_float,
    positive_int,
    run_entry_point,
)
from smddp_compat.entry_points.tensorboard_summaries import TrainingSummaries, learning_rate_of

__all__ = ["build_parser", "tf_config_from_env", "global_batch_size", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The script's hyperparameters (every one has a default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=positive_int, default=5)
    parser.add_argument("--batch-size-per-replica", type=positive_int, default=32)
    parser.add_argument("--global-batch-size", type=non_negative_int, default=0,
                        help="overrides --batch-size-per-replica; must be divisible by the number of replicas")
    parser.add_argument("--learning-rate", type=positive_float, default=0.001, help="per-replica rate, x replicas")
    parser.add_argument("--steps-per-epoch", type=non_negative_int, default=0, help="0: the train set once")
    parser.add_argument("--checkpoint-steps", type=non_negative_int, default=0, help="0: at each epoch end")
    parser.add_argument("--log-steps", type=positive_int, default=50)
    parser.add_argument("--checkpoint-dir", default=None,
                        help="default: /opt/ml/checkpoints if writable, else <output dir>/checkpoints")
    add_tensorboard_dir_argument(parser)
    parser.add_argument("--mwms-port", type=positive_int, default=12345,
                        help="each worker listens on this port (the next ones for workers sharing an address; only "
                             "when TF_CONFIG is not set)")
    parser.add_argument("--seed", type=non_negative_int, default=42)
    parser.add_argument("--save-model", type=boolean, default=True)
    parser.add_argument("--weights-digest", type=boolean, default=False,
                        help="write weights-rank<worker>.sha256 to the output data dir")
    return parser


def tf_config_from_env(env: TrainingEnv, base_port: int) -> dict:
    """The ``TF_CONFIG`` of this host's worker, built from the SageMaker cluster description.

    One worker per host, in SM_HOSTS order; ports follow :func:`smddp_compat.cluster.endpoints` (``base_port`` at
    each address, the next ports for further workers sharing that address).

    Args:
        env: The training environment (hosts, current host, host addresses).
        base_port: The first port at each address (``--mwms-port``).

    Returns:
        :func:`smddp_compat.cluster.mwms_tf_config` of this host's worker.

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


def _make_strategy(env: TrainingEnv, base_port: int) -> tuple[tf.distribute.Strategy, int, int, bool]:
    """Returns (strategy, worker index, worker count, is chief); sets TF_CONFIG when it has to be built."""
    raw = os.environ.get("TF_CONFIG")
    if not raw and env.is_multi_host:
        os.environ["TF_CONFIG"] = json.dumps(tf_config_from_env(env, base_port))
        raw = os.environ["TF_CONFIG"]
    if not raw:
        return tf.distribute.MirroredStrategy(), 0, 1, True
    try:
        config = json.loads(raw)
        cluster = config["cluster"]
        task_type, task_index = config["task"]["type"], int(config["task"]["index"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ClusterConfigError(f"TF_CONFIG={raw!r} is malformed ({exc}); it needs "
                                 '{"cluster": {"worker": [...]}, "task": {"type": ..., "index": ...}}.') from exc
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    order = [(kind, i) for kind in ("chief", "worker") for i in range(len(cluster.get(kind, [])))]
    if (task_type, task_index) not in order:
        raise ClusterConfigError(f"TF_CONFIG task {task_type}:{task_index} is not in its cluster {cluster}.")
    is_chief = task_type == "chief" or (task_type == "worker" and task_index == 0 and "chief" not in cluster)
    return strategy, order.index((task_type, task_index)), len(order), is_chief


def _evaluate(model: tf.keras.Model, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    # A plain forward pass (no distributed evaluate), so that the chief alone can run it.
    probs = np.concatenate([model(x[i:i + 500], training=False).numpy() for i in range(0, len(x), 500)])
    # In numpy: Keras losses with automatic reduction refuse to run under a strategy outside fit.
    loss = float(-np.mean(np.log(np.clip(probs[np.arange(len(y)), y], 1e-7, 1.0))))
    return {"test_loss": loss, "test_accuracy": float(np.mean(np.argmax(probs, axis=1) == y))}


def main() -> None:
    """Trains, evaluates and saves the model (see the module docstring)."""
    args = parse_hyperparameters(build_parser())
    env = TrainingEnv.from_environ(checkpoint_dir=args.checkpoint_dir, tensorboard_dir=args.tensorboard_dir)
    # The strategy must exist before any other TensorFlow work (MultiWorkerMirroredStrategy starts a server).
    strategy, worker, workers, is_chief = _make_strategy(env, args.mwms_port)
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
        print(f"keras_mwms: {type(strategy).__name__}, worker {worker}/{workers}, {replicas} replica(s), "
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
    start_step = restore_latest(checkpoint, env.checkpoint_dir) or 0

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
                               evaluate=(lambda: _evaluate(model, x_test, y_test)) if is_chief else None,
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
            result = _evaluate(model, x_test, y_test)
            log.log(step=counter.step, **result, train_seconds=wall)
            summaries.log_evaluation(counter.step, loss=result["test_loss"], accuracy=result["test_accuracy"])
            summary = {"steps": counter.step, "resumed_from": start_step, "workers": workers, "replicas": replicas,
                       "global_batch": global_batch, **result, "train_seconds": round(wall, 2), "keras": keras_name()}
            (env.output_data_dir / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
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
