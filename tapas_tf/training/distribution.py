"""tf.distribute strategies by name: one_device, mirrored, multi_worker_mirrored, tpu.

Several workers (multi_worker_mirrored) are one training run: each process is started with the
same flags and its own TF_CONFIG, all of them read and write the same --model_dir (a file system
they share), only the chief writes checkpoints and summaries there, and a lost worker ends every
worker with a WorkerLostError; restarting them all resumes from the last checkpoint.

TensorFlow is imported inside the functions, so that the CLI can list STRATEGIES cheaply.
"""

import re
from typing import TYPE_CHECKING, List, Optional

if TYPE_CHECKING:
    import tensorflow as tf

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def get_strategy(name: str, tpu: Optional[str] = None) -> "tf.distribute.Strategy":
    """The strategy called `name`.

    Args:
      name: "one_device" (the first GPU, else the CPU), "mirrored" (every local GPU, else the CPU
        devices, logical ones included), "multi_worker_mirrored" (workers from the TF_CONFIG
        environment variable) or "tpu".
      tpu: for "tpu", the TPU name or grpc:// address given to TPUClusterResolver ("" or
        "local" for a TPU VM).

    Raises:
      ValueError: an unknown name, or `tpu` given without the "tpu" strategy.
    """
    if name not in STRATEGIES:
        raise ValueError(f"Unknown distribution strategy {name!r}; expected one of {', '.join(STRATEGIES)}.")
    if tpu is not None and name != "tpu":
        raise ValueError(f"--tpu={tpu} needs --distribution_strategy=tpu, got {name}.")
    import tensorflow as tf

    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        # MirroredStrategy only takes GPUs by default; on a CPU-only machine use every CPU device
        # (several only when logical devices were configured, as the tests do).
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([d.name for d in devices])
    if name == "multi_worker_mirrored":
        return tf.distribute.MultiWorkerMirroredStrategy()
    return _tpu_strategy(tpu)


def _tpu_strategy(tpu: Optional[str]) -> "tf.distribute.TPUStrategy":
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy: "tf.distribute.Strategy") -> bool:
    """Whether this worker writes checkpoints and summaries (always true on one machine)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type is None or task_type == "chief" or (task_type == "worker" and task_id == 0
                                                         and "chief" not in resolver.cluster_spec().as_dict())


def uses_tpu(strategy: "tf.distribute.Strategy") -> bool:
    import tensorflow as tf

    return isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))


def is_multi_worker(strategy: "tf.distribute.Strategy") -> bool:
    """Whether the run is several worker processes (MultiWorkerMirroredStrategy with more than one
    task), which must decide together when to stop. A TPU pod is one client: not several."""
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return False
    jobs = strategy.cluster_resolver.cluster_spec().as_dict()
    return sum(len(jobs.get(job, ())) for job in ("chief", "worker")) > 1


class WorkerLostError(ConnectionError):
    """Another worker of a multi-worker run stopped answering: it was killed, crashed or is cut
    off. Every worker ends; restarting them all resumes from the last checkpoint."""


# TensorFlow's names of tasks: /job:worker/replica:0/task:1 or /job:worker/task:1.
_TASK = re.compile(r"/job:(\w+)(?:/replica:\d+)?/task:(\d+)")


def lost_worker_errors() -> tuple:
    """TensorFlow's errors of a collective whose peer is gone: a reset connection (Unavailable, at
    once), missed heartbeats (Unavailable, about 10 s after a worker stops answering), a collective
    timeout (DeadlineExceeded), or an aborted or cancelled collective."""
    import tensorflow as tf

    return (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.AbortedError,
            tf.errors.CancelledError)


def worker_lost_error(error: Exception, step: int, strategy: "tf.distribute.Strategy",
                      resume_from: Optional[str]) -> WorkerLostError:
    """A one-line WorkerLostError for `error`, raised by a collective of `step`.

    Args:
      error: TensorFlow's error; its text names the lost task, and why, over several lines.
      step: the step that did not finish.
      strategy: the run's MultiWorkerMirroredStrategy (this worker's own task is not "lost").
      resume_from: the checkpoint a restart resumes from, or None when there is none yet.
    """
    message = getattr(error, "message", None) or str(error)
    resolver = strategy.cluster_resolver
    own = (resolver.task_type, resolver.task_id)
    lost: List[str] = []
    for job, task in _TASK.findall(message):
        name = f"{job} {task}"
        if (job, int(task)) != own and name not in lost:
            lost.append(name)
    reason = type(error).__name__
    if "aborted by:" in message:  # Collective ops is aborted by: WHY\n...
        why = message.split("aborted by:", 1)[1].strip().splitlines()
        reason = re.sub(r"^Error reported from \S+: ", "", why[0].strip()).rstrip(":.") if why else reason
    who = " and ".join(lost) if lost else "another worker"
    restart = (f"resumes from {resume_from}" if resume_from else "starts over: there is no checkpoint yet")
    return WorkerLostError(
        f"Step {step}: lost {who} ({reason}); this worker stops too. Restart every "
        f"worker with the same command: training {restart}.")


def check_same_start(strategy: "tf.distribute.Strategy", step: int) -> None:
    """Raises ValueError unless every worker restored the same step (they read one --model_dir).

    A worker that cannot see the chief's checkpoints (another disk) would start from step 0 and
    train other steps than the others; all of them raise, each naming the steps.
    """
    if not is_multi_worker(strategy):
        return
    import tensorflow as tf

    local = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant([step], tf.int64))
    steps = sorted(set(int(s) for s in strategy.gather(local, axis=0).numpy()))
    if len(steps) > 1:
        raise ValueError(
            f"The workers restored different steps ({', '.join(map(str, steps))}): every worker must read "
            "the same --model_dir, on a file system they share (GCS, NFS); this worker restored step "
            f"{step}.")
