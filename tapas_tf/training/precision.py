"""Which floating-point precision a run computes in: float32, or mixed bfloat16.

    choice = choose_precision(None)          # PrecisionChoice("bfloat16", "CPU has avx512_bf16")
    with policy_scope(choice.precision):
        model = build_model(...)             # its layers compute in bfloat16, variables stay float32

Under Keras's `mixed_bfloat16` policy the encoder's matrix products and activations are bfloat16;
the variables, the optimiser and (see `models/qa_model.py`) the heads and the loss stay float32,
so checkpoints are float32 whatever the precision, and a model trained in one precision predicts in
the other. bfloat16 pays where the hardware has it: CPUs whose flags show `avx512_bf16` or
`amx_bf16` (oneDNN kernels), TPUs, and recent GPUs. Elsewhere it is emulated and slower, so the
default is chosen at start-up from the machine, like XLA (`xla_choice`), and recorded in the run.
"""

import contextlib
import dataclasses
import logging
from typing import Any, Dict, Iterator, Optional

PRECISIONS = ("float32", "bfloat16")
# /proc/cpuinfo flags of CPUs with native bfloat16 dot products.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16"}


@dataclasses.dataclass(frozen=True)
class PrecisionChoice:
    precision: str  # One of PRECISIONS.
    reason: str

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def cpu_bf16_flags(cpuinfo_path: str = "/proc/cpuinfo") -> tuple:
    """The BF16_CPU_FLAGS this CPU has (empty where /proc/cpuinfo cannot be read)."""
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return tuple(flag for flag in BF16_CPU_FLAGS if flag in flags)
    except OSError:
        pass
    return ()


def choose_precision(requested: Optional[str], uses_tpu: bool = False,
                     cpuinfo_path: str = "/proc/cpuinfo") -> PrecisionChoice:
    """`requested` if given; else bfloat16 on TPUs and on CPUs with bfloat16 instructions, float32
    elsewhere (GPUs included: float16 there needs loss scaling, which this trainer does not do).

    Raises:
      ValueError: `requested` is not one of PRECISIONS.
    """
    if requested is not None:
        if requested not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {requested!r}.")
        return PrecisionChoice(requested, f"--precision={requested}")
    if uses_tpu:
        return PrecisionChoice("bfloat16", "TPU: bfloat16 is native")
    import tensorflow as tf  # Here, so that importing this module for cpu_bf16_flags loads no TensorFlow.

    if tf.config.list_logical_devices("GPU"):
        return PrecisionChoice("float32", "GPU: float32 (pass --precision=bfloat16 on GPUs that have it)")
    flags = cpu_bf16_flags(cpuinfo_path)
    if flags:
        return PrecisionChoice("bfloat16", f"CPU has {', '.join(flags)}")
    return PrecisionChoice("float32", "CPU without bfloat16 instructions (avx512_bf16, amx_bf16)")


@contextlib.contextmanager
def policy_scope(precision: str) -> Iterator[None]:
    """Layers created inside compute in `precision` (Keras's global policy, restored after)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}.")
    import tf_keras

    before = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(_POLICIES[precision])
    try:
        yield
    finally:
        tf_keras.mixed_precision.set_global_policy(before)


def log_choice(choice: PrecisionChoice) -> None:
    logging.info("Precision %s: %s", choice.precision, choice.reason)
