"""Speed of our Keras TAPAS (`models.TapasForQuestionAnswering`): training and one question.

Runs in the project's environment:

    python benchmarks/tf_tapas_bench.py --sizes tiny,mini,base --json_out tf.jsonl

Mirrors `torch_tapas_bench.py` (the PyTorch peer) on the same inputs, built by
`synthetic_tables.make_batch` from the same seeds: a ~15-token question and a 20 rows x 6
columns table, about 450 real tokens padded to 512.

- train: the model in training mode (dropout on) with the full weak-supervision loss
  (num_aggregation_labels 4, use_answer_as_supervision, select_one_column, a float answer per
  example, the paper's WTQ loss hyper-parameters: temperature, cell selection preference,
  Huber delta, answer loss cutoff, cell selection weights initialised to zero), forward +
  gradient + an AdamW step of tf-models-official (`official.nlp.optimization.create_optimizer`,
  "adamw": `AdamWeightDecay` with warm-up and linear decay, weight decay 0.01, the optimiser the
  training code uses), all in one `tf.function`, on one fixed batch at seq_len 512. No gradient
  clipping (the peer has none). `--warmup` untimed steps (the first one traces and compiles),
  then `--steps` timed ones: examples/s.
- infer: one question (batch 1, no labels, training=False) including the 0.5 threshold on the
  cell probabilities and the operator argmax: median / p90 / min latency over `--infer_runs`
  runs after `--warmup` untimed ones, for
    * "padded": the example padded to `--seq_len` (512), as the peer bench runs it;
    * "bucketed": the example cut to its real length rounded up to a bucket (64, 128, 256, 512),
      what an ask path that sizes the sequence to the table does (`--buckets`). The standard example has about
      450 real tokens, so its bucket is 512; `--infer_lengths` adds smaller tables (the standard
      table truncated to that many tokens, as `make_batch(1, n)` builds it).

Every measurement runs with `jit_compile` True and/or False (`--jit_compile`). TensorFlow runs
with `--threads` intra-op threads (2, like `torch.set_num_threads(2)`) and `--inter_op_threads`
inter-op threads (default 1: a fair match for PyTorch's single stream of ops; the XLA CPU
runtime parallelises within ops on the intra-op pool). One JSON line per measurement on stdout,
appended to `--json_out` when given.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Callable, Dict, List, Optional, Tuple  # noqa: E402

import numpy as np  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
import synthetic_tables  # noqa: E402  (benchmarks/ is not a package)

import tapas_tf  # noqa: E402,F401  (no TensorFlow yet: sets the project's defaults, oneDNN on, before it loads)
from tapas_tf.models.config import SIZES as MODEL_SIZES  # noqa: E402  (no TensorFlow either)

# Heavy imports (TensorFlow, the model) happen in `main`, after the thread counts are known:
# tf.config.threading must be set before TensorFlow runs its first op.
tf = None

SIZES = tuple(MODEL_SIZES)  # The size presets of models/config.py.
DEFAULT_BATCH = {"tiny": 32, "mini": 32, "small": 32, "medium": 16, "base": 8, "large": 4}
BUCKETS = (64, 128, 256, 512)

# The peer's loss settings (torch_tapas_bench.WTQ_LOSS): the paper's WTQ hyper-parameters.
WTQ_LOSS = dict(
    num_aggregation_labels=4,
    use_answer_as_supervision=True,
    select_one_column=True,
    temperature=0.0352513,
    cell_selection_preference=0.207951,
    huber_loss_delta=0.121194,
    answer_loss_cutoff=0.664694,
    init_cell_selection_weights_to_zero=True,
)
LEARNING_RATE = 1.93581e-5
LABEL_FEATURES = ("label_ids", "answer", "numeric_values", "numeric_values_scale", "aggregation_function_id")


def make_config(size: str):
    """TapasConfig of preset `size` with the WTQ loss (max_position_embeddings 1024, as the peer)."""
    from tapas_tf.models.config import TapasConfig

    return TapasConfig.from_preset(size, max_position_embeddings=1024, **WTQ_LOSS)


def bucket_length(real_length: int, buckets=BUCKETS) -> int:
    """Smallest bucket holding `real_length` tokens."""
    for bucket in buckets:
        if real_length <= bucket:
            return bucket
    raise ValueError(f"{real_length} tokens do not fit the largest bucket {buckets[-1]}.")


def to_features(batch: Dict[str, np.ndarray], with_labels: bool, length: Optional[int] = None) -> Dict:
    """Numpy batch -> dict of tensors, optionally cut to the first `length` tokens.

    Returns:
      dict of <int32>[batch, length] ids, masks and token types; with labels also label_ids,
      <float32>[batch, length] numeric_values(_scale), <float32>[batch] answer and
      <int32>[batch] aggregation_function_id.
    """
    features = {}
    for name, value in batch.items():
        if name in LABEL_FEATURES and not with_labels:
            continue
        if length is not None and value.ndim == 2:
            value = value[:, :length]
        features[name] = tf.constant(value)
    return features


def _build_model(size: str, seed: int, precision: str = "float32"):
    """The QA model of preset `size`, its layers computing in `precision` (the trainer's policies:
    `tapas_tf.training.precision`; variables stay float32)."""
    import tf_keras

    from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features
    from tapas_tf.training.precision import policy_scope

    tf_keras.utils.set_random_seed(seed)
    with policy_scope(precision):  # Layers take the policy when they are built: call inside.
        model = TapasForQuestionAnswering(make_config(size))
        model(dummy_features())
    return model


def resolve_precision(requested: str) -> Tuple[str, str]:
    """(precision, why): "default" is the trainer's start-up choice on this machine
    (`choose_precision(None)`: bfloat16 on CPUs with avx512_bf16 or amx_bf16, float32 elsewhere)."""
    from tapas_tf.training.precision import choose_precision

    choice = choose_precision(None if requested == "default" else requested)
    return choice.precision, choice.reason


def _make_optimizer(total_steps: int):
    from official.nlp import optimization

    return optimization.create_optimizer(
        init_lr=LEARNING_RATE,
        num_train_steps=max(total_steps, 1000),
        num_warmup_steps=10,
        optimizer_type="adamw",
    )


def make_train_step(model, optimizer, jit_compile: bool) -> Callable:
    """One tf.function: forward (training mode), the total loss's gradient, an optimiser step;
    returns the loss. The gradients go to the optimiser as the trainer's do (`dense_gradients`),
    and the fused kernels are used as the trainer chooses for these sizes: not in a step that XLA
    compiles whole."""
    from tapas_tf.models import fused
    from tapas_tf.training.trainer import dense_gradients

    variables = model.trainable_variables

    @tf.function(jit_compile=jit_compile)
    def train_step(batch):
        with tf.GradientTape() as tape:
            loss = model(batch, training=True)["total_loss"]
        gradients = dense_gradients(tape.gradient(loss, variables))
        optimizer.apply_gradients(zip(gradients, variables))
        return loss

    def step(batch):
        with fused.enabled_scope(not jit_compile):  # Read when the step is traced, on its first call.
            return train_step(batch)

    return step


def bench_train(size: str, batch_size: int, seq_len: int, warmup: int, steps: int, jit_compile: bool,
                precision: str = "float32") -> dict:
    """Examples per second of forward + gradient + AdamW on one fixed batch."""
    model = _build_model(size, seed=0, precision=precision)
    features = to_features(synthetic_tables.make_batch(batch_size, seq_len, seed=1), with_labels=True)
    train_step = make_train_step(model, _make_optimizer(warmup + steps), jit_compile)

    losses: List[float] = []
    start = time.perf_counter()
    for _ in range(max(warmup, 1)):
        losses.append(float(train_step(features)))
    warmup_seconds = time.perf_counter() - start
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        losses.append(float(train_step(features)))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    if not all(np.isfinite(losses)):
        raise RuntimeError(f"{size}: non-finite training loss {losses}")
    return dict(
        measure="train", jit_compile=jit_compile, precision=precision, batch_size=batch_size, seq_len=seq_len, steps=steps,
        warmup=max(warmup, 1), warmup_seconds=round(warmup_seconds, 2), seconds=round(seconds, 3),
        examples_per_s=round(batch_size * steps / seconds, 3), step_ms=round(1000 * seconds / steps, 1),
        cpu_seconds=round(cpu_seconds, 3), first_loss=round(losses[0], 4), last_loss=round(losses[-1], 4),
        optimizer="official.nlp.optimization.create_optimizer(adamw): AdamWeightDecay",
    )


def _latencies(predict: Callable, features: Dict, warmup: int, runs: int) -> dict:
    """Median / p90 / min wall ms (and median CPU ms) of `predict(features)` incl. fetching."""
    times_ms, cpu_ms = [], []
    for i in range(max(warmup, 1) + runs):
        start, cpu_start = time.perf_counter(), time.process_time()
        selected, operator = predict(features)
        selected.numpy(), operator.numpy()
        if i >= max(warmup, 1):
            times_ms.append(1000 * (time.perf_counter() - start))
            cpu_ms.append(1000 * (time.process_time() - cpu_start))
    times_ms.sort()
    return dict(
        median_ms=round(statistics.median(times_ms), 2),
        p90_ms=round(times_ms[min(len(times_ms) - 1, int(0.9 * len(times_ms)))], 2),
        min_ms=round(times_ms[0], 2),
        median_cpu_ms=round(statistics.median(cpu_ms), 2),
    )


def bench_infer(
    size: str,
    seq_len: int,
    warmup: int,
    runs: int,
    jit_compile: bool,
    extra_lengths: List[int],
    buckets=BUCKETS,
) -> List[dict]:
    """Single-question latency: padded to seq_len, and sized to the table by buckets."""
    model = _build_model(size, seed=0)

    @tf.function(jit_compile=jit_compile)
    def predict(features):
        outputs = model(features, training=False)
        # What a user waits for: the selected cells and the operator.
        return outputs["probabilities"] > 0.5, tf.argmax(outputs["aggregation_logits"], axis=-1)

    standard = synthetic_tables.make_batch(1, seq_len, seed=2)
    cases = [("padded", standard, seq_len)]
    real = int(standard["input_mask"].sum())
    cases.append(("bucketed", standard, bucket_length(real, buckets)))
    for length in extra_lengths:
        table = synthetic_tables.make_batch(1, length, seed=2)
        cases.append(("bucketed", table, bucket_length(int(table["input_mask"].sum()), buckets)))

    records = []
    for mode, batch, length in cases:
        features = to_features(pad_to(batch, length), with_labels=False, length=length)
        records.append(
            dict(
                measure="infer", jit_compile=jit_compile, mode=mode, batch_size=1, seq_len=length,
                real_tokens=int(batch["input_mask"].sum()), runs=runs, warmup=max(warmup, 1),
                **_latencies(predict, features, warmup, runs),
            )
        )
    return records


def pad_to(batch: Dict[str, np.ndarray], length: int) -> Dict[str, np.ndarray]:
    """Pads the [batch, n] features of `batch` to [batch, length] as make_batch pads.

    Padding is 0 for ids and masks, NaN for numeric_values and 1 for numeric_values_scale;
    per-example features are kept. Features already `length` or longer are returned as they are.
    """
    fill = {"numeric_values": np.nan, "numeric_values_scale": 1.0}
    padded = {}
    for name, value in batch.items():
        if value.ndim == 2 and value.shape[1] < length:
            extra = np.full([value.shape[0], length - value.shape[1]], fill.get(name, 0), value.dtype)
            value = np.concatenate([value, extra], axis=1)
        padded[name] = value
    return padded


def environment(threads: int, inter_op_threads: int) -> dict:
    import official
    import tf_keras

    try:
        from importlib.metadata import version

        models_version = version("tf-models-official")
    except Exception:  # pragma: no cover - metadata missing
        models_version = getattr(official, "__version__", "unknown")
    return dict(
        framework="tensorflow", implementation="models.TapasForQuestionAnswering (tapas-tf)",
        tensorflow=tf.__version__, tf_keras=tf_keras.__version__, tf_models_official=models_version,
        python=platform.python_version(), threads=threads, inter_op_threads=inter_op_threads,
        cpu_count=os.cpu_count(), onednn=_onednn_enabled(),
    )


def _onednn_enabled() -> Optional[bool]:
    from tapas_tf.training.xla_choice import onednn_enabled

    return onednn_enabled()


def emit(record: dict, json_out: Optional[str]) -> None:
    # Other processes on the machine distort wall times: keep the load next to the number.
    record = dict(record, load_average_1min=round(os.getloadavg()[0], 2))
    line = json.dumps(record)
    print(line, flush=True)
    if json_out:
        with open(json_out, "a") as f:
            f.write(line + "\n")


def _parse_bools(text: str) -> List[bool]:
    values = {"true": True, "false": False, "1": True, "0": False}
    flags = [part.strip().lower() for part in text.split(",") if part.strip()]
    if not flags or any(flag not in values for flag in flags):
        raise ValueError(f"--jit_compile takes true and/or false, got {text!r}")
    return [values[flag] for flag in flags]


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="tiny,mini,base", help=f"comma-separated, from {list(SIZES)}")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed training steps / inference runs (>= 1)")
    parser.add_argument("--infer_runs", type=int, default=20, help="timed single-question runs")
    parser.add_argument("--batch_size", type=int, default=0, help="training batch (0: tiny/mini 32, base 8)")
    parser.add_argument("--seq_len", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads (torch.set_num_threads)")
    parser.add_argument("--inter_op_threads", type=int, default=1)
    parser.add_argument("--jit_compile", default="true,false", help="true, false or both")
    parser.add_argument("--measures", default="train,infer", help="train, infer or both")
    parser.add_argument(
        "--infer_lengths", default="", help="extra single-question tables of these many tokens (bucketed)"
    )
    parser.add_argument("--buckets", default="64,128,256,512", help="sequence lengths of the bucketed mode")
    parser.add_argument("--precision", default="float32", choices=("float32", "bfloat16", "default"),
                        help="training precision; default: the trainer's start-up choice on this machine")
    parser.add_argument("--json_out", default="", help="append the JSON lines to this file")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.infer_runs < 1 or args.warmup < 0:
        raise ValueError("--steps and --infer_runs must be >= 1 and --warmup >= 0")
    measures = set(args.measures.split(","))
    if not measures <= {"train", "infer"}:
        raise ValueError(f"--measures takes train and/or infer, got {args.measures!r}")
    sizes = [s for s in args.sizes.split(",") if s]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        raise ValueError(f"unknown sizes {unknown}; choose from {list(SIZES)}")
    jit_modes = _parse_bools(args.jit_compile)
    extra_lengths = [int(n) for n in args.infer_lengths.split(",") if n]
    buckets = tuple(sorted(int(n) for n in args.buckets.split(",") if n))
    if not buckets or buckets[-1] > args.seq_len or buckets[0] < 8:
        raise ValueError(f"--buckets must lie in [8, --seq_len={args.seq_len}], got {args.buckets!r}")
    if any(not 8 <= n <= args.seq_len for n in extra_lengths):
        raise ValueError(f"--infer_lengths must lie in [8, {args.seq_len}], got {extra_lengths}")

    global tf
    import tensorflow

    tf = tensorflow
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
    base = environment(args.threads, args.inter_op_threads)
    precision, precision_reason = resolve_precision(args.precision)
    for size in sizes:
        config = make_config(size)
        common = dict(base, size=size, layers=config.num_hidden_layers, hidden=config.hidden_size)
        for jit in jit_modes:
            if "train" in measures:
                batch_size = args.batch_size or DEFAULT_BATCH[size]
                record = bench_train(size, batch_size, args.seq_len, args.warmup, args.steps, jit, precision)
                emit(dict(common, precision_requested=args.precision, precision_reason=precision_reason,
                          **record), args.json_out)
            if "infer" in measures:
                for record in bench_infer(
                    size, args.seq_len, args.warmup, args.infer_runs, jit, extra_lengths, buckets
                ):
                    emit(dict(common, **record), args.json_out)


if __name__ == "__main__":
    main()
