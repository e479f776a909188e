"""Hugging Face's `table-question-answering` pipeline, one question at a time: the peer of our ask path.

Runs in the peer environment (benchmarks/README.md); `ask_latency.py` drives it. Two modes:

    # a random TapasForQuestionAnswering of a size, saved with its tokenizer (config.json,
    # model.safetensors, vocab.txt): the weights both sides of ask_latency.py answer with
    .peer-env/bin/python benchmarks/hf_ask_latency.py save --size tiny --vocab_file V --out_dir D

    # CSV in, answer out, warm: per-question latencies as one JSON object on stdout
    .peer-env/bin/python benchmarks/hf_ask_latency.py time --model_dir D --questions Q.json

The model: `transformers.TapasConfig` with the project's sizes (tiny: hidden 128, 2 layers, 2
heads, intermediate 512; base: 768, 12, 12, 3072; heads = hidden / 64, intermediate = 4 x
hidden), the WTQ head and loss options (4 aggregation labels NONE/SUM/AVERAGE/COUNT,
use_answer_as_supervision, select_one_column, the paper's temperature, Huber delta, cut-off and
cell selection preference, init_cell_selection_weights_to_zero) and random weights (seed
--seed). The WTQ option starts the cell and column heads at zero, which makes every cell
probability exactly 0.5: no cell would ever be selected and the answer-building work would be
skipped on both sides. So, after construction, the two head weight vectors are drawn like the
other weights (normal, std initializer_range); the config still says what a WTQ model says.

Timing: `TapasTokenizer(vocab_file)` (BERT's uncased vocabulary with [unused0] renamed [EMPTY])
and `pipeline("table-question-answering", model=..., tokenizer=...)` on CPU, in eval mode, with
`torch.set_num_threads(--threads)`. For each question, the timed region is

    table = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    answer = pipe(table=table, query=question)

exactly what ask_latency.py times on our side. The warm-up questions of Q.json run first,
untimed. The pipeline pads a single question only to its own length and, by default, truncates
a table that does not fit 512 tokens by dropping rows (`drop_rows_to_fit`). After the timed
loop, untimed, each question is tokenised again to record its sequence length and whether the
pipeline had to drop rows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from typing import List, Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pandas as pd  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import TapasConfig, TapasForQuestionAnswering, TapasTokenizer, pipeline  # noqa: E402

# Layers, hidden size; heads = hidden / 64, intermediate = 4 * hidden (the project's presets).
SIZES = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512), "base": (12, 768)}

# tapas_tf.task_registry.presets.PRESETS[Task.WTQ]: the head and loss options of the paper's WTQ fine-tuning.
WTQ_OPTIONS = dict(
    num_aggregation_labels=4,
    use_answer_as_supervision=True,
    select_one_column=True,
    temperature=0.0352513,
    cell_selection_preference=0.207951,
    huber_loss_delta=0.121194,
    answer_loss_cutoff=0.664694,
    init_cell_selection_weights_to_zero=True,
    # What google/tapas-*-finetuned-wtq's config.json says; the pipeline prefixes the operator.
    aggregation_labels={0: "NONE", 1: "SUM", 2: "AVERAGE", 3: "COUNT"},
    no_aggregation_label_index=0,
)


def make_config(size: str) -> TapasConfig:
    layers, hidden = SIZES[size]
    return TapasConfig(
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=hidden // 64,
        intermediate_size=4 * hidden,
        max_position_embeddings=1024,
        **WTQ_OPTIONS,
    )


def save(args: argparse.Namespace) -> None:
    """A random model of --size and its tokenizer, written to --out_dir."""
    torch.manual_seed(args.seed)
    config = make_config(args.size)
    model = TapasForQuestionAnswering(config).eval()
    with torch.no_grad():  # See the module docstring: heads drawn like the other weights.
        for weights in (model.output_weights, model.column_output_weights):
            weights.normal_(0.0, config.initializer_range)
    os.makedirs(args.out_dir, exist_ok=True)
    model.save_pretrained(args.out_dir)
    TapasTokenizer(args.vocab_file).save_pretrained(args.out_dir)
    print(
        json.dumps(
            dict(saved=args.out_dir, size=args.size, parameters=sum(p.numel() for p in model.parameters()))
        )
    )


def _read_table(path: str) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def time_questions(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    with open(args.questions) as f:
        spec = json.load(f)
    started = time.perf_counter()
    tokenizer = TapasTokenizer.from_pretrained(args.model_dir)
    model = TapasForQuestionAnswering.from_pretrained(args.model_dir).eval()
    pipe = pipeline("table-question-answering", model=model, tokenizer=tokenizer, device="cpu")
    load_seconds = time.perf_counter() - started

    warmup_failures = 0
    for question in spec["warmup"]:
        try:
            pipe(table=_read_table(question["csv_path"]), query=question["question"])
        except Exception:  # noqa: BLE001 - counted, the timed loop reports its own failures
            warmup_failures += 1

    latencies_ms: List[Optional[float]] = []
    answers: List[Optional[str]] = []
    coordinates: List[Optional[list]] = []
    errors: List[Optional[str]] = []
    # As a user calls it: the pipeline itself runs the model under torch.no_grad.
    for question in spec["questions"]:
        start = time.perf_counter()
        try:
            table = _read_table(question["csv_path"])
            answer = pipe(table=table, query=question["question"])
        except Exception as e:  # noqa: BLE001 - a failure is a result
            latencies_ms.append(None)
            answers.append(None)
            coordinates.append(None)
            errors.append(f"{type(e).__name__}: {str(e)[:300]}")
            if args.verbose:
                traceback.print_exc()
            continue
        latencies_ms.append(1000 * (time.perf_counter() - start))
        answers.append(answer["answer"])
        coordinates.append([list(map(int, c)) for c in answer["coordinates"]])
        errors.append(None)

    # Untimed: the sequence length the pipeline ran at and whether it dropped rows to fit.
    seq_lengths: List[Optional[int]] = []
    rows_kept: List[Optional[int]] = []
    truncated: List[Optional[bool]] = []
    for question in spec["questions"]:
        try:
            table = _read_table(question["csv_path"])
            encoded = tokenizer(table, question["question"], truncation="drop_rows_to_fit", padding=True)
            full = tokenizer(table, question["question"], truncation=False, padding=False, verbose=False)
            row_ids = [token_types[2] for token_types in encoded["token_type_ids"]]
            seq_lengths.append(len(encoded["input_ids"]))
            rows_kept.append(max(row_ids) if row_ids else 0)
            truncated.append(len(full["input_ids"]) > tokenizer.model_max_length)
        except Exception:  # noqa: BLE001
            seq_lengths.append(None)
            rows_kept.append(None)
            truncated.append(None)

    print(
        json.dumps(
            dict(
                side="hf_pipeline",
                model_dir=args.model_dir,
                load_seconds=round(load_seconds, 3),
                warmup_questions=len(spec["warmup"]),
                warmup_failures=warmup_failures,
                latencies_ms=[None if t is None else round(t, 3) for t in latencies_ms],
                answers=answers,
                coordinates=coordinates,
                errors=errors,
                seq_lengths=seq_lengths,
                rows_kept=rows_kept,
                truncated=truncated,
                model_max_length=tokenizer.model_max_length,
                environment=dict(
                    torch=torch.__version__,
                    transformers=transformers.__version__,
                    pandas=pd.__version__,
                    python=platform.python_version(),
                    torch_threads=torch.get_num_threads(),
                    torch_interop_threads=torch.get_num_interop_threads(),
                ),
            )
        )
    )


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    save_parser = sub.add_parser("save", help="write a random model of a size and its tokenizer")
    save_parser.add_argument("--size", required=True, choices=sorted(SIZES))
    save_parser.add_argument("--vocab_file", required=True, help="BERT uncased vocab with [EMPTY]")
    save_parser.add_argument("--out_dir", required=True)
    save_parser.add_argument("--seed", type=int, default=0)
    time_parser = sub.add_parser("time", help="time the pipeline on a questions file")
    time_parser.add_argument("--model_dir", required=True, help="a directory written by `save`")
    time_parser.add_argument("--questions", required=True, help="JSON: {warmup: [...], questions: [...]}")
    time_parser.add_argument("--threads", type=int, default=2)
    time_parser.add_argument("--verbose", action="store_true", help="print the traceback of failures")
    args = parser.parse_args(argv)
    if args.mode == "save":
        save(args)
    else:
        time_questions(args)


if __name__ == "__main__":
    sys.exit(main())
