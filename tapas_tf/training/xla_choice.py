"""Whether to compile the training step with XLA: measured at start-up on the run's own batch.

    choice = choose_xla(compute, batch)      # compute: features -> (gradients, loss terms)
    choice.use_xla, choice.reason            # True, "measured: XLA 0.21 s, plain 0.30 s per step"

Which path is faster depends on the machine, not only on the device type: on a 2-core AMD EPYC
without AVX-512, with oneDNN off (TensorFlow's default there), XLA trained TAPAS 1.5x faster than
TensorFlow's own kernels; with oneDNN on (`import tapas_tf` turns it on) or with AVX-512 the two
were within about 10% of each other, in either order (docs/RESULTS.md). So with oneDNN on the
trainer does not measure (the XLA compile of a MiniLM step at batch 16 held over 15 GB, more than
the training itself) and trains without XLA; with oneDNN off, a long run
(`train_steps >= MIN_STEPS_TO_MEASURE`) on one CPU device times both: the forward and backward
pass (no optimiser update, so the run's weights are untouched) on one batch at the longest
length, after one untimed call each (XLA compiles there), `repeats` times, and keeps the faster
median. Short runs would spend more on the measurement than it can save, and use
`default_use_xla` (XLA with GPUs). TPU programs are XLA already.
"""

import dataclasses
import logging
import statistics
import time
from typing import Any, Callable, Dict, Optional

import tensorflow as tf

# About a minute of measuring (the XLA compile of the step for the longest length, then six
# steps) pays for itself when XLA saves 5% of a run of at least this many steps.
MIN_STEPS_TO_MEASURE = 1000


def onednn_enabled() -> Optional[bool]:
    """Whether TensorFlow runs its oneDNN CPU kernels (None if this TensorFlow cannot say).

    They decide the speed of the path without XLA as much as the CPU does: see tapas_tf/__init__.py.
    """
    try:
        from tensorflow.python.util import _pywrap_util_port  # No public API tells.
    except ImportError:
        return None
    return bool(_pywrap_util_port.IsMklEnabled())


@dataclasses.dataclass(frozen=True)
class XlaChoice:
    use_xla: bool
    reason: str
    seconds_plain: Optional[float] = None  # Median seconds per step, when measured.
    seconds_xla: Optional[float] = None
    onednn: Optional[bool] = dataclasses.field(default_factory=onednn_enabled)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def default_use_xla() -> bool:
    """Without a measurement: XLA with GPUs only."""
    return bool(tf.config.list_logical_devices("GPU"))


def _median_seconds(fn: Callable, batch, repeats: int) -> float:
    tf.nest.map_structure(lambda t: t.numpy() if t is not None else None, fn(batch))  # Traced (compiled).
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy() if t is not None else None, fn(batch))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def choose_xla(compute: Callable, batch: Dict[str, tf.Tensor], repeats: int = 3) -> XlaChoice:
    """Times `compute` on `batch` with and without XLA and returns the faster.

    Args:
      compute: features -> a nest of tensors (gradients and loss terms); not yet a tf.function.
      batch: one replica batch, <int32|float32>[replica_batch, seq_len] features.
      repeats: timed calls of each path after the first.
    """
    plain = tf.function(compute, autograph=False)
    xla = tf.function(compute, jit_compile=True, autograph=False)
    seconds_plain = _median_seconds(plain, batch, repeats)
    try:
        seconds_xla = _median_seconds(xla, batch, repeats)
    except (tf.errors.OpError, ValueError, NotImplementedError) as e:  # An op XLA cannot compile.
        return XlaChoice(False, f"XLA failed to compile the step ({type(e).__name__}); plain TensorFlow",
                         seconds_plain)
    use_xla = seconds_xla < seconds_plain
    onednn = {True: ", oneDNN on", False: ", oneDNN off", None: ""}[onednn_enabled()]
    reason = (f"measured at start-up: {seconds_xla:.3f} s per step with XLA, {seconds_plain:.3f} s without"
              f"{onednn}; {'XLA' if use_xla else 'plain TensorFlow'}")
    logging.info("Training step: %s", reason)
    return XlaChoice(use_xla, reason, seconds_plain, seconds_xla)
