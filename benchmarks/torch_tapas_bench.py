"""Speed of Hugging Face's PyTorch TAPAS: the baseline our TF2 model is compared with.

Runs in the peer environment (see benchmarks/README.md):

    $PEER_ENV/bin/python benchmarks/torch_tapas_bench.py --sizes tiny,mini,base --json_out results.jsonl

Two measurements per size, on CPU with `torch.set_num_threads(--threads)` (2 by default):

- train: `TapasForQuestionAnswering` in train mode (dropout on) with the full weak-supervision
  loss (num_aggregation_labels 4, use_answer_as_supervision, select_one_column, a float answer
  per example, the WTQ loss hyper-parameters), forward + backward + Adam step, at seq_len 512.
  `--warmup` untimed steps, then `--steps` timed steps: examples/s.
- infer: one question (batch 1, no labels, eval mode, `torch.inference_mode`) at seq_len 512:
  median and p90 latency in ms over `--infer_runs` runs after `--warmup` untimed runs.

The inputs are `synthetic_tables.make_batch`: a 512-token sequence with a ~15-token question and
a 20 rows x 6 columns table (1-6 word pieces per cell), the same batches a TF benchmark can build.
Prints one JSON line per measurement (and appends it to --json_out when given).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from typing import Optional

import numpy as np
import torch
import transformers
from transformers import TapasConfig, TapasForQuestionAnswering

import synthetic_tables  # noqa: E402  (benchmarks/ is not a package)

# Size presets of the project (models/config.py): layers, hidden; heads = hidden / 64, FFN = 4 x hidden.
SIZES = {
    "tiny": (2, 128),
    "mini": (4, 256),
    "small": (4, 512),
    "medium": (8, 512),
    "base": (12, 768),
    "large": (24, 1024),
}
DEFAULT_BATCH = {"tiny": 32, "mini": 32, "small": 32, "medium": 16, "base": 8, "large": 4}

# WTQ fine-tuning hyper-parameters of the paper (tapas_tf/task_registry/presets.py), so every loss branch runs.
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

TOKEN_TYPE_FEATURES = (
    "segment_ids",
    "column_ids",
    "row_ids",
    "prev_label_ids",
    "column_ranks",
    "inv_column_ranks",
    "numeric_relations",
)


def make_config(size: str) -> TapasConfig:
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose from {sorted(SIZES)}")
    layers, hidden = SIZES[size]
    return TapasConfig(
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=hidden // 64,
        intermediate_size=4 * hidden,
        max_position_embeddings=1024,
        **WTQ_LOSS,
    )


def to_torch(batch: dict[str, np.ndarray], with_labels: bool) -> dict[str, torch.Tensor]:
    """Our feature dict -> HF's forward arguments (token_type_ids <int64>[batch, seq_len, 7])."""
    token_type_ids = np.stack([batch[name] for name in TOKEN_TYPE_FEATURES], axis=-1)
    inputs = dict(
        input_ids=torch.as_tensor(batch["input_ids"], dtype=torch.long),
        attention_mask=torch.as_tensor(batch["input_mask"], dtype=torch.long),
        token_type_ids=torch.as_tensor(token_type_ids, dtype=torch.long),
    )
    if with_labels:
        inputs.update(
            labels=torch.as_tensor(batch["label_ids"], dtype=torch.long),
            float_answer=torch.as_tensor(batch["answer"]),
            numeric_values=torch.as_tensor(batch["numeric_values"]),
            numeric_values_scale=torch.as_tensor(batch["numeric_values_scale"]),
        )
    return inputs


def bench_train(size: str, batch_size: int, seq_len: int, warmup: int, steps: int) -> dict:
    """Examples per second of forward + backward + Adam on one fixed batch."""
    torch.manual_seed(0)
    model = TapasForQuestionAnswering(make_config(size)).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    inputs = to_torch(synthetic_tables.make_batch(batch_size, seq_len, seed=1), with_labels=True)
    losses = []

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = model(**inputs).loss
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))

    for _ in range(warmup):
        step()
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    if not all(np.isfinite(losses)):
        raise RuntimeError(f"{size}: non-finite training loss {losses}")
    return dict(
        measure="train", batch_size=batch_size, steps=steps, warmup=warmup, seconds=round(seconds, 3),
        examples_per_s=round(batch_size * steps / seconds, 3), step_ms=round(1000 * seconds / steps, 1),
        # CPU time of this process over the timed steps: less sensitive than wall time to other
        # processes sharing the cores (about threads x seconds on an idle machine).
        cpu_seconds=round(cpu_seconds, 3),
        first_loss=round(losses[0], 4), last_loss=round(losses[-1], 4),
    )


def bench_infer(size: str, seq_len: int, warmup: int, runs: int) -> dict:
    """Latency of one question: batch 1, no labels, eval mode."""
    torch.manual_seed(0)
    model = TapasForQuestionAnswering(make_config(size)).eval()
    inputs = to_torch(synthetic_tables.make_batch(1, seq_len, seed=2), with_labels=False)
    times_ms, cpu_ms = [], []
    with torch.inference_mode():
        for i in range(warmup + runs):
            start, cpu_start = time.perf_counter(), time.process_time()
            outputs = model(**inputs)
            # Predictions are what a user waits for: include the thresholding.
            _ = (torch.sigmoid(outputs.logits) > 0.5, outputs.logits_aggregation.argmax(-1))
            if i >= warmup:
                times_ms.append(1000 * (time.perf_counter() - start))
                cpu_ms.append(1000 * (time.process_time() - cpu_start))
    times_ms.sort()
    return dict(
        measure="infer", batch_size=1, runs=runs, warmup=warmup,
        median_ms=round(statistics.median(times_ms), 2),
        p90_ms=round(times_ms[min(len(times_ms) - 1, int(0.9 * len(times_ms)))], 2),
        min_ms=round(times_ms[0], 2), median_cpu_ms=round(statistics.median(cpu_ms), 2),
    )


def environment(threads: int) -> dict:
    return dict(
        framework="pytorch", implementation="transformers.TapasForQuestionAnswering",
        torch=torch.__version__, transformers=transformers.__version__, python=platform.python_version(),
        threads=threads, cpu_count=os.cpu_count(),
    )


def emit(record: dict, json_out: Optional[str]) -> None:
    # Other processes on the machine distort wall times: keep the load next to the number.
    record = dict(record, load_average_1min=round(os.getloadavg()[0], 2))
    line = json.dumps(record)
    print(line, flush=True)
    if json_out:
        with open(json_out, "a") as f:
            f.write(line + "\n")


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="tiny,mini,base", help=f"comma-separated, from {sorted(SIZES)}")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed training steps / inference runs")
    parser.add_argument("--infer_runs", type=int, default=20, help="timed single-question runs")
    parser.add_argument("--batch_size", type=int, default=0, help="training batch (0: tiny/mini 32, base 8)")
    parser.add_argument("--seq_len", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--measures", default="train,infer", help="train, infer or both")
    parser.add_argument("--json_out", default="", help="append the JSON lines to this file")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.infer_runs < 1 or args.warmup < 0:
        raise ValueError("--steps and --infer_runs must be >= 1 and --warmup >= 0")
    measures = set(args.measures.split(","))
    if not measures <= {"train", "infer"}:
        raise ValueError(f"--measures takes train and/or infer, got {args.measures!r}")
    sizes = [s for s in args.sizes.split(",") if s]
    for size in sizes:
        make_config(size)  # fail on a bad name before any long run

    torch.set_num_threads(args.threads)
    base = environment(args.threads)
    for size in sizes:
        layers, hidden = SIZES[size]
        common = dict(base, size=size, layers=layers, hidden=hidden, seq_len=args.seq_len)
        if "train" in measures:
            batch_size = args.batch_size or DEFAULT_BATCH[size]
            emit(dict(common, **bench_train(size, batch_size, args.seq_len, args.warmup, args.steps)), args.json_out)
        if "infer" in measures:
            emit(dict(common, **bench_infer(size, args.seq_len, args.warmup, args.infer_runs)), args.json_out)


if __name__ == "__main__":
    main()
