"""Conversion against Hugging Face's TapasTokenizer: the same WTQ questions, one core, one run.

    python benchmarks/convert_vs_hf.py --wtq_dir=../shared/datasets/wtq --peer_python=.peer-env/bin/python \
        --questions=500 --output=convert_vs_hf.json

The first `--questions` questions of WTQ's `training.tsv` and their tables are written to one JSON
file, so both sides read the same cells. Each side runs in its own process pinned to core 0
(`--core`), and times per question, from a table and a question to model features at 512 tokens:

- ours, cold (rows that do not fit are dropped, `drop_rows_to_fit`, as HF's truncation does): a
  new Interaction (table and question as texts), number and date annotation of the
  table and the question, and `ExampleConverter.convert` with its table cache emptied first, so no
  work is shared between questions (as for HF);
- ours, warm: the same with the cache kept (what `create_data` and a session of questions about one
  table do; WTQ's questions share tables);
- HF: `TapasTokenizer(vocab_file)` called as `tokenizer(table=frame, queries=question,
  padding="max_length", truncation=True, max_length=512)`, the DataFrame built outside the clock.

Neither side is given answers (no labels). The peer runs `--side=hf` of this same file in the peer
environment (benchmarks/README.md), which never imports tapas_tf.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time


def _pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})


def write_questions(wtq_dir: str, count: int, path: str) -> int:
    """Writes [{question, header, rows}] of the first `count` readable questions; returns how many."""
    from tapas_tf.data.readers import wtq

    items = []
    for interaction in wtq.read_wtq_interactions(os.path.join(wtq_dir, "training.tsv"), wtq_dir):
        if isinstance(interaction, Exception):
            continue
        table = interaction.table
        items.append({"id": interaction.id, "question": interaction.questions[0].original_text,
                      "header": [c.text for c in table.columns],
                      "rows": [[c.text for c in row.cells] for row in table.rows]})
        if len(items) >= count:
            break
    with open(path, "w") as f:
        json.dump(items, f)
    return len(items)


def time_ours(path: str, vocab_file: str) -> dict:
    """Seconds per question of our conversion, cold and warm (see the module docstring)."""
    from tapas_tf.data import number_annotation
    from tapas_tf.data.protos import interaction_pb2
    from tapas_tf.data.readers.common import make_table
    from tapas_tf.features.classifier_examples import ExampleConverter
    from tapas_tf.features.conversion_config import ConversionConfig, ConversionError

    items = json.load(open(path))
    # Rows that do not fit are dropped, as HF's truncation does (and WTQ's fine-tuning data).
    converter = ExampleConverter(ConversionConfig.from_options(vocab_file or None, max_seq_length=512,
                                                               drop_rows_to_fit=True))
    result = {}
    for mode in ("cold", "warm"):
        seconds, outcomes = 0.0, {}
        for item in items:
            interaction = interaction_pb2.Interaction(id=item["id"])
            interaction.table.CopyFrom(make_table(item["id"], item["header"], item["rows"]))
            interaction.questions.add(id=item["id"] + "_0", original_text=item["question"])
            if mode == "cold":
                converter._tables.clear()  # pylint: disable=protected-access  # No shared table work.
            start = time.perf_counter()
            number_annotation.add_numeric_values(interaction)
            try:
                converter.convert(interaction, 0)
                outcome = "converted"
            except ConversionError as error:
                outcome = error.reason.value
            seconds += time.perf_counter() - start
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        result[mode] = {"seconds": round(seconds, 3), "questions_per_second": round(len(items) / seconds, 1),
                        "outcomes": outcomes}
    return result


def time_hf(path: str, vocab_file: str) -> dict:
    """Seconds per question of Hugging Face's TapasTokenizer (run in the peer environment)."""
    import pandas as pd
    import transformers
    from transformers import TapasTokenizer

    items = json.load(open(path))
    tokenizer = TapasTokenizer(vocab_file)
    seconds, rows_dropped = 0.0, 0
    for item in items:
        frame = pd.DataFrame(item["rows"], columns=item["header"], dtype=str)
        start = time.perf_counter()
        encoded = tokenizer(table=frame, queries=item["question"], padding="max_length", truncation=True,
                            max_length=512)
        seconds += time.perf_counter() - start
        rows_dropped += int(max(t[2] for t in encoded["token_type_ids"]) < len(frame))  # The last row id kept.
    return {"seconds": round(seconds, 3), "questions_per_second": round(len(items) / seconds, 1),
            "tables_cut_to_fit": rows_dropped, "transformers": transformers.__version__}


def _vocab(vocab_file: str) -> str:
    if vocab_file:
        return vocab_file
    from tapas_tf.features.conversion_config import ConversionConfig

    return ConversionConfig.from_options(None).vocab_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", default="both", choices=["both", "ours", "hf"])
    parser.add_argument("--wtq_dir", default="../shared/datasets/wtq")
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--input", default="", help="the questions' JSON (written by --side=both)")
    parser.add_argument("--vocab_file", default="")
    parser.add_argument("--peer_python", default=".peer-env/bin/python")
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--output", default="")
    args = parser.parse_args()
    _pin(args.core)
    if args.side == "hf":
        print(json.dumps(time_hf(args.input, args.vocab_file)))
        return
    if args.side == "ours":
        print(json.dumps(time_ours(args.input, args.vocab_file)))
        return
    vocab = _vocab(args.vocab_file)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "questions.json")
        count = write_questions(args.wtq_dir, args.questions, path)
        common = ["--input", path, "--vocab_file", vocab, "--core", str(args.core)]
        ours = json.loads(subprocess.run([sys.executable, __file__, "--side=ours"] + common, check=True,
                                         capture_output=True, text=True).stdout.strip().splitlines()[-1])
        hf = json.loads(subprocess.run([args.peer_python, __file__, "--side=hf"] + common, check=True,
                                       capture_output=True, text=True).stdout.strip().splitlines()[-1])
    report = {"questions": count, "ours": ours, "hf": hf,
              "cold_ratio": round(ours["cold"]["questions_per_second"] / hf["questions_per_second"], 2),
              "warm_ratio": round(ours["warm"]["questions_per_second"] / hf["questions_per_second"], 2),
              "machine": {"cpu": platform.processor() or platform.machine(), "core": args.core,
                          "python": platform.python_version()}}
    print(json.dumps(report, indent=2))
    if args.output:
        with open(args.output, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
