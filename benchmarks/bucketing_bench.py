"""Training examples/s of the tiny SQA model with and without length buckets (seq 512, batch 32).

Writes 2,000 synthetic classifier examples padded to 512 tokens, with SQA-like real lengths
(log-normal, clipped: mean ~245, median ~218, p90 ~445, 61% at most 256 tokens; the real SQA examples have
mean 247, median 222, p90 443), then runs the real `training.trainer.train` for 40 steps
per setting and times steps 11 to 40.

    python benchmarks/bucketing_bench.py "" "128,256,384,512"     # off, then the default buckets
"""

import os
import sys
import tempfile
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.features import example_features  # noqa: E402
from tapas_tf.models.config import TapasConfig  # noqa: E402
from tapas_tf.task_registry.presets import Task  # noqa: E402
from tapas_tf.training import distribution, trainer as training  # noqa: E402
from tapas_tf.training.config import model_config_for_task, train_config_for_task  # noqa: E402

SEQ, NUM_EXAMPLES, BATCH = 512, 2000, 32


def _token_values(name: str, length: int, size: int, rng) -> np.ndarray:
    """One per-token feature of an example with `length` real tokens: 20 question tokens, then a
    table of 6 columns and rows of 24 tokens."""
    values = np.zeros(size, np.int64)
    positions = np.arange(length)
    question = min(20, length)
    if name == "input_ids":
        values[:length] = rng.integers(1000, 30000, length)
    elif name == "input_mask":
        values[:length] = 1
    elif name == "segment_ids":
        values[question:length] = 1
    elif name == "column_ids":
        values[question:length] = (positions[question:] % 6) + 1
    elif name == "row_ids":
        values[question:length] = np.minimum((positions[question:] - question) // 24, 60)
    elif name == "label_ids":
        values[question:min(question + 3, length)] = 1
    return values


def write_examples(path: str, lengths: np.ndarray, rng) -> None:
    spec = example_features.parsing_spec(SEQ, include_strings=False)
    with tf.io.TFRecordWriter(path) as writer:
        for length in lengths:
            example = tf.train.Example()
            for name, feature in spec.items():
                size = feature.shape[0] if feature.shape else 1
                if feature.dtype == tf.float32:
                    values = np.ones(size, np.float32) if name == "numeric_values_scale" else np.zeros(size, np.float32)
                    example.features.feature[name].float_list.value.extend(values.tolist())
                else:
                    example.features.feature[name].int64_list.value.extend(
                        _token_values(name, length, size, rng).tolist())
            writer.write(example.SerializeToString())


def examples_per_second(path: str, buckets) -> float:
    model_config = model_config_for_task(Task.SQA, TapasConfig.from_preset("tiny"))
    config = train_config_for_task(Task.SQA, path, max_seq_length=SEQ, train_steps=45, train_batch_size=BATCH,
                                   learning_rate=1e-4, warmup_ratio=0.0, save_checkpoints_steps=10_000,
                                   log_steps=10_000, shuffle_buffer=NUM_EXAMPLES, seed=1, show_progress=False,
                                   use_xla=False, bucket_lengths=buckets)
    times = {}
    training.train(model_config, config, tempfile.mkdtemp(), distribution.get_strategy("one_device"),
                   on_step_end=lambda step, values: times.__setitem__(step, time.perf_counter()))
    return 30 * BATCH / (times[40] - times[10])


def main() -> None:
    rng = np.random.default_rng(0)
    lengths = np.clip(np.exp(rng.normal(np.log(222), 0.55, NUM_EXAMPLES)), 20, SEQ).astype(int)
    print(f"lengths: mean {lengths.mean():.0f} median {np.median(lengths):.0f} p90 {np.percentile(lengths, 90):.0f} "
          f"max {lengths.max()} share<=256 {np.mean(lengths <= 256):.2f}", flush=True)
    path = os.path.join(tempfile.mkdtemp(), "train.tfrecord")
    write_examples(path, lengths, rng)
    for argument in sys.argv[1:] or ["", "128,256,384,512"]:
        buckets = tuple(int(x) for x in argument.split(",") if x)
        print(f"bucket_lengths={buckets or 'off'}: {examples_per_second(path, buckets):.1f} examples/s "
              "(steps 11-40)", flush=True)


if __name__ == "__main__":
    main()
