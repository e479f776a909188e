"""Where one training step's time goes: the TensorFlow profiler, summed by kind of work.

    python benchmarks/profile_train_step.py --size mini --precision float32 --json_out profile.jsonl
    python benchmarks/profile_train_step.py --size mini --precision bfloat16 --repeats 3

Builds the training step of `tf_tapas_bench.py` (the same model, loss, AdamW step and fixed
batch from `synthetic_tables.make_batch`: 32 examples at 512 tokens, ~450 real), runs `--warmup`
untimed steps, then traces `--steps` steps with `tf.profiler.experimental` and reads the trace
(the XSpace protocol buffer the profiler writes) directly: every TensorFlow op the executor ran
on the host is put in one kind of work by its op type and name scope:

  attention products    the batched matrix products of self-attention (scores and context)
  dense products        the other matrix products (projections, feed-forward, pooler, heads)
  softmax               attention and head softmaxes
  layer norm            layer normalisation (fused or as its mean/variance ops)
  activation            GELU and its gradient
  embedding gathers     the embedding look-ups and their gradients (scatter-adds, and the sums of
                        the tables' sparse gradients into dense ones before the optimizer)
  segmented reductions  TAPAS's per-cell/per-column reductions (unsorted segment ops)
  optimizer             AdamW's variable updates
  casts                 dtype casts (bfloat16 <-> float32 under the mixed policy)
  fused kernels         the XLA kernels of `models/fused.py` (layer norms, bias + GELU, sublayer
                        ends, the softmax's backward pass), each one call of a compiled function
  element-wise, other   the rest

Each kind is split into forward and backward (name scope `gradients` / `gradient_tape`). The
report gives each kind's share of the ops' summed time and ms per step; the step's wall time
(untraced, timed like the bench) is measured too, so the gap between the ops' sum and the wall
time (thread pool idling, the executor, Python) is visible. With `--repeats N` the whole
measurement runs N times in fresh processes, and the spread of the wall time is reported.

`--precision bfloat16` runs under Keras's `mixed_bfloat16` policy as training does
(`tapas_tf.training.precision`). Prints the machine line, a markdown table, and appends one JSON
record per run to `--json_out`.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import collections  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Dict, Iterable, List, Tuple  # noqa: E402

import synthetic_tables  # noqa: E402  (benchmarks/ is on the path when this file runs as a script)
import tapas_tf  # noqa: E402,F401  (sets the project's TensorFlow defaults, oneDNN on, before TF loads)
from machine import machine, machine_line  # noqa: E402

KINDS = (
    "attention products", "dense products", "softmax", "layer norm", "activation", "embedding gathers",
    "segmented reductions", "optimizer", "casts", "fused kernels", "element-wise, other",
)
# A compiled function (`tf.function(jit_compile=True)`) runs as an asynchronous op of these types;
# the profiler names its op in the stats of the executor's "ExecutorState::ProcessAsync::Start"
# span, whose length is the kernel's run, not in the "name:Type" label of a synchronous op.
_COMPILED_CALL_TYPES = ("PartitionedCall", "StatefulPartitionedCall", "XlaLaunch", "_XlaRun")

_MATMUL = re.compile(r"MatMul|Einsum", re.IGNORECASE)
# The two products of self-attention (scores and context) are the attention layer's own einsums;
# its query/key/value/output projections are dense layers inside it.
_ATTENTION_PRODUCT = re.compile(r"(self_)?attention/einsum(_\d+)?/")


def kind_of(op_name: str, op_type: str) -> str:
    """The kind of work of one TensorFlow op, from its name scope and type (see the module doc).

    `op_type` as the executor names it, oneDNN's prefix included ("_MklEinsum", "_FusedMatMul")."""
    name = op_name.lower()
    kind_type = op_type.lower().lstrip("_")
    kind_type = kind_type[len("mkl"):] if kind_type.startswith("mkl") else kind_type
    if op_type in _COMPILED_CALL_TYPES:
        return "fused kernels"
    if "adamweightdecay" in name or "optimizer" in name or kind_type.startswith("resourceapply"):
        return "optimizer"
    if _MATMUL.search(op_type):
        return "attention products" if _ATTENTION_PRODUCT.search(name) else "dense products"
    if "softmax" in kind_type:
        return "softmax"
    if "layer_norm" in name or "layernorm" in name or "layernorm" in kind_type or "batchnorm" in kind_type:
        return "layer norm"
    if "gelu" in name or kind_type in ("erf", "erfc", "tanh"):
        return "activation"
    if "segment" in kind_type and "/" not in op_name:
        # Outside the model's scopes: the train step summing an embedding table's sparse gradient
        # into a dense one (`trainer.dense_gradients`).
        return "embedding gathers"
    if "segment" in kind_type and "embedding" not in name:
        return "segmented reductions"
    if "embedding" in name and ("gather" in kind_type or "scatter" in kind_type or "segment" in kind_type):
        return "embedding gathers"
    if kind_type == "cast":
        return "casts"
    return "element-wise, other"


def is_backward(op_name: str, op_type: str = "") -> bool:
    """Whether an op belongs to the backward pass. A fused kernel's gradient is a compiled call
    the tape makes outside every name scope ("PartitionedCall_7"), its forward call is inside
    the layer's ("encoder/layer_0/PartitionedCall")."""
    name = op_name.lower()
    if op_type in _COMPILED_CALL_TYPES and "/" not in op_name:
        return True
    return "gradients" in name or "gradient_tape" in name or name.startswith("grad")


def _event_stats(plane, event) -> Dict[str, object]:
    """An event's stats by name; a reference to a string is resolved to the string."""
    stats = {}
    for stat in event.stats:
        key = plane.stat_metadata[stat.metadata_id].name
        stats[key] = plane.stat_metadata[stat.ref_value].name if stat.ref_value else (stat.str_value or stat.int64_value)
    return stats


def op_events(xspace_path: str) -> Iterable[Tuple[str, str, float]]:
    """(op name, op type, duration in ms) of every TensorFlow op event of the host plane, the
    compiled calls (the fused kernels) included."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xspace_path, "rb") as f:
        space.ParseFromString(f.read())
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        for line in plane.lines:
            if not line.name.startswith("tf_"):  # The executor's threads (tf_Compute/...), not Python's.
                continue
            for event in line.events:
                label = plane.event_metadata[event.metadata_id].name
                if label == "ExecutorState::ProcessAsync::Start":
                    stats = _event_stats(plane, event)
                    if stats.get("kernel_type") in _COMPILED_CALL_TYPES:
                        yield str(stats.get("name", "")), str(stats["kernel_type"]), event.duration_ps / 1e9
                    continue
                # The executor names an op's event "name:Type" (".../self_attention/einsum/Einsum:_MklEinsum");
                # its own spans ("ExecutorState::Process", "ParallelFor") wrap them and are not counted.
                if "::" in label or ":" not in label:
                    continue
                op_name, _, op_type = label.rpartition(":")
                if not op_type or " " in op_type or not op_type.lstrip("_")[:1].isupper():
                    continue
                yield op_name, op_type, event.duration_ps / 1e9


def summarise(events: Iterable[Tuple[str, str, float]], steps: int) -> Dict:
    """ms per step by kind, forward and backward, and the op types that cost most."""
    by_kind: Dict[str, Dict[str, float]] = {kind: {"forward": 0.0, "backward": 0.0} for kind in KINDS}
    by_type: Dict[str, float] = collections.Counter()
    total = 0.0
    for op_name, op_type, ms in events:
        direction = "backward" if is_backward(op_name, op_type) else "forward"
        by_kind[kind_of(op_name, op_type)][direction] += ms / steps
        by_type[op_type] += ms / steps
        total += ms / steps
    return dict(
        ops_ms_per_step=round(total, 2),
        kinds={kind: {d: round(v, 2) for d, v in parts.items()} for kind, parts in by_kind.items()},
        top_op_types=[(t, round(v, 2)) for t, v in by_type.most_common(12)],
    )


def profile_once(args) -> Dict:
    """One measurement in this process: wall time of untraced steps, then a traced summary."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
    import tf_tapas_bench

    tf_tapas_bench.tf = tf
    model = tf_tapas_bench._build_model(args.size, seed=0, precision=args.precision)
    optimizer = tf_tapas_bench._make_optimizer(args.warmup + 2 * args.steps)
    features = tf_tapas_bench.to_features(
        synthetic_tables.make_batch(args.batch_size, args.seq_len, seed=1), with_labels=True)
    train_step = tf_tapas_bench.make_train_step(model, optimizer, args.jit_compile)

    for _ in range(max(args.warmup, 1)):
        float(train_step(features))
    start = time.perf_counter()
    for _ in range(args.steps):
        float(train_step(features))
    step_ms = 1000 * (time.perf_counter() - start) / args.steps

    logdir = tempfile.mkdtemp(prefix="tapas_profile_")
    tf.profiler.experimental.start(logdir)
    for _ in range(args.steps):
        float(train_step(features))
    tf.profiler.experimental.stop()
    traces = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    if not traces:
        raise RuntimeError(f"the profiler wrote no trace under {logdir}")
    summary = summarise(op_events(traces[0]), args.steps)
    return dict(
        size=args.size, precision=args.precision, jit_compile=args.jit_compile, batch_size=args.batch_size,
        seq_len=args.seq_len, steps=args.steps, threads=args.threads, inter_op_threads=args.inter_op_threads,
        onednn=os.environ.get("TF_ENABLE_ONEDNN_OPTS"), step_ms=round(step_ms, 1),
        examples_per_s=round(1000 * args.batch_size / step_ms, 2), trace=traces[0], **summary,
    )


def markdown(records: List[Dict]) -> str:
    """One column per record (size, precision): ms per step of each kind, forward + backward."""
    heads = [f"{r['size']} {r['precision']}" for r in records]
    lines = ["| kind (ms per step, fwd + bwd) | " + " | ".join(heads) + " |", "|---" * (len(records) + 1) + "|"]
    for kind in KINDS:
        cells = []
        for r in records:
            part = r["kinds"][kind]
            share = (part["forward"] + part["backward"]) / max(r["ops_ms_per_step"], 1e-9)
            cells.append(f"{part['forward']:.0f} + {part['backward']:.0f} ({share:.0%})")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    lines.append("| all ops | " + " | ".join(f"{r['ops_ms_per_step']:.0f}" for r in records) + " |")
    lines.append("| wall time of a step (untraced) | " + " | ".join(f"{r['step_ms']:.0f}" for r in records) + " |")
    lines.append("| examples/s | " + " | ".join(f"{r['examples_per_s']:.2f}" for r in records) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--precision", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_len", type=int, default=512)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="untraced timed steps, then as many traced ones")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--inter_op_threads", type=int, default=1)
    parser.add_argument("--jit_compile", action="store_true")
    parser.add_argument("--repeats", type=int, default=1, help="fresh processes; the spread of the wall time")
    parser.add_argument("--json_out", default="")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child measurement
    args = parser.parse_args(argv)

    if args.one:
        print(json.dumps(profile_once(args)))
        return
    records = []
    child = [sys.executable, os.path.abspath(__file__), "--one", f"--size={args.size}",
             f"--precision={args.precision}", f"--batch_size={args.batch_size}", f"--seq_len={args.seq_len}",
             f"--warmup={args.warmup}", f"--steps={args.steps}", f"--threads={args.threads}",
             f"--inter_op_threads={args.inter_op_threads}"] + (["--jit_compile"] if args.jit_compile else [])
    for _ in range(args.repeats):
        out = subprocess.run(child, check=True, capture_output=True, text=True).stdout
        record = json.loads(out.strip().splitlines()[-1])
        record["machine"] = machine()
        records.append(record)
        if args.json_out:
            with open(args.json_out, "a") as f:
                f.write(json.dumps(record) + "\n")
    print(machine_line())
    print(markdown(records[:1]))
    walls = [r["step_ms"] for r in records]
    if len(walls) > 1:
        print(f"wall ms per step over {len(walls)} fresh processes: min {min(walls):.0f}, median "
              f"{statistics.median(walls):.0f}, max {max(walls):.0f} (spread {max(walls) / min(walls):.2f}x)")
    print("top op types (ms per step):", records[0]["top_op_types"])


if __name__ == "__main__":
    main()
