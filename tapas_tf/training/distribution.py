"""tf.distribute strategies by name: one_device, mirrored, multi_worker_mirrored, tpu.

TensorFlow is imported inside the functions, so that the CLI can list STRATEGIES cheaply.
"""

from typing import TYPE_CHECKING, Optional

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
