"""Whether a training run uses the fused kernels of `models/fused.py`: decided at start-up from the
size of a layer's activations.

    choice = choose_fused_kernels(None, replica_batch=32, max_seq_length=512, hidden_size=256,
                                  use_xla=False, uses_tpu=False)
    choice.enabled, choice.reason    # True, "4,194,304 values a layer (32 x 512 x 256) >= 131,072"

The kernels replace layer normalisation, GELU and the sublayer ends of the transformer with one
XLA kernel each way. On a CPU they pay where a layer's activations are large: on an AMX Xeon,
SQA's batches of 32 trained tiny 1.11-1.21x and mini 1.07-1.08x faster in float32, and 1.32-1.34x
and 1.34-1.39x in bfloat16 (docs/RESULTS.md). Each kernel compiles once per input shape, and each call costs a launch, so on
a test-sized model (batch 2 x 16 tokens x 16 wide) a step of one block took 4.2 ms fused against
2.8 ms, and the first step of each new length about 0.5 s more. Below `MIN_VALUES` values a layer
(batch x max_seq_length x hidden_size, per replica) the run keeps Keras's ops. A run whose whole
step is XLA (`--use_xla`, GPUs by default, TPUs) gains nothing from kernels XLA would fuse anyway.
"""

import dataclasses
from typing import Any, Dict, Optional

# batch x tokens x hidden of one replica's layer: 8 x 128 x 128, a quarter of a tiny SQA batch.
MIN_VALUES = 1 << 17


@dataclasses.dataclass(frozen=True)
class FusedChoice:
    enabled: bool
    reason: str

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def choose_fused_kernels(requested: Optional[bool], replica_batch: int, max_seq_length: int, hidden_size: int,
                         use_xla: bool, uses_tpu: bool) -> FusedChoice:
    """`requested` if given (--fused_kernels); else on when the step is not XLA already and a layer
    holds at least MIN_VALUES values."""
    if requested is not None:
        return FusedChoice(bool(requested), f"--fused_kernels={str(bool(requested)).lower()}")
    if uses_tpu:
        return FusedChoice(False, "TPU: the whole step is XLA already")
    if use_xla:
        return FusedChoice(False, "XLA compiles the whole step: it fuses these ops itself")
    values = replica_batch * max_seq_length * hidden_size
    shape = f"{values:,} values a layer ({replica_batch} x {max_seq_length} x {hidden_size})"
    if values < MIN_VALUES:
        return FusedChoice(False, f"{shape} < {MIN_VALUES:,}: compiling and launching the kernels costs "
                                  "more than they save; Keras's ops")
    return FusedChoice(True, f"{shape} >= {MIN_VALUES:,}")
