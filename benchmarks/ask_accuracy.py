"""Accuracy where users meet the models: the whole SQA and WTQ dev sets asked through the public API.

    python benchmarks/ask_accuracy.py --sqa_dir=../shared/datasets/sqa --wtq_dir=../shared/datasets/wtq \
        [--model_dir=DIR] [--aggregation_model_dir=DIR|none] [--output=ask_accuracy.json]

Nothing here reads the training pipeline's files: each WTQ dev question is asked with
`TableQA.answer_many` on its table as a pandas DataFrame, and each SQA dev sequence is a
`TableQA.conversation`, every follow-up seeing the model's own previous answer, as `ask` and the web
page ask. Without `--model_dir` the default model answers (what `TableQA.from_model_dir()` loads).

Scoring is the tasks' own: WTQ by denotation (`metrics.denotation_matches`: the executed number or
the cells' texts against the target values), SQA by the exact set of cells. Both are split by kind
of question (`question_hints.question_kind`: lookup, superlative, count, sum/average, comparison,
and follow-up for SQA's later questions), and the answers' confidence is kept for calibration
(`--calibration_out` writes the raw features and correctness per question).

`--limit_tables=N` asks the questions of the first N tables of each dev set (a quick look).
`--holdout_report=MIX/mix_report.json` asks the training questions of the tables that
`experiments/mix_tasks.py` held out of training instead of dev: where checkpoints are chosen and
confidences calibrated without looking at dev.
"""

import argparse
import collections
import csv
import dataclasses
import json
import os
import re
import sys
import time
from typing import Dict, FrozenSet, Iterator, List, Tuple

import pandas as pd

from tapas_tf.data.readers.common import read_csv_table
from tapas_tf.data.readers.sqa import SqaRow, read_sqa_rows
from tapas_tf.data.readers.wtq import read_wtq_table, unescape
from tapas_tf.inference.metrics import denotation_matches, sqa_metrics
from tapas_tf.qa.confidence import confidence_features
from tapas_tf.qa.question_hints import question_kind
from tapas_tf.qa.table_qa import TableQA
from tapas_tf.qa.tables import frame_from_table


def _rows(path: str) -> Iterator[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        yield from csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)


_TABLE_KEY = re.compile(r"(\d+)[-_](?:csv/)?(\d+)\.csv$")


def table_key(path: str) -> str:
    """"csv/203-csv/149.csv" (WTQ) and "table_csv/203_149.csv" (SQA) both name table "203_149"."""
    match = _TABLE_KEY.search(path)
    return f"{match.group(1)}_{match.group(2)}" if match else path


@dataclasses.dataclass(frozen=True)
class Split:
    """Which questions to ask: a release file of each task, optionally only those of some tables."""

    wtq_file: str = "random-split-1-dev.tsv"
    sqa_file: str = "random-split-1-dev.tsv"
    tables: FrozenSet[str] = frozenset()

    def keeps(self, path: str) -> bool:
        return not self.tables or table_key(path) in self.tables


DEV = Split()


def holdout_split(mix_report: str) -> Split:
    """The training questions of the tables `experiments/mix_tasks.py` held out of training."""
    with open(mix_report, encoding="utf-8") as f:
        tables = frozenset(json.load(f)["holdout_tables"])
    return Split("random-split-1-train.tsv", "random-split-1-train.tsv", tables)


def wtq_questions(wtq_dir: str, limit_tables: int = 0, split: Split = DEV) -> Dict[str, List[dict]]:
    """Table context -> its questions ({"id", "question", "targets"}), in file order."""
    by_table: Dict[str, List[dict]] = collections.OrderedDict()
    for row in _rows(os.path.join(wtq_dir, split.wtq_file)):
        if not split.keeps(row["context"]):
            continue
        if limit_tables and row["context"] not in by_table and len(by_table) >= limit_tables:
            continue
        targets = [unescape(t) for t in row["targetValue"].split("|")]
        by_table.setdefault(row["context"], []).append(
            {"id": row["id"], "question": unescape(row["utterance"]), "targets": targets})
    return by_table


def sqa_sequences(sqa_dir: str, limit_tables: int = 0,
                  split: Split = DEV) -> Dict[Tuple[str, str], List[dict]]:
    """(sequence id, table file) -> its questions in position order ({"id", "question", "gold"}), read
    by the project's SQA reader (questions in quotes may span lines); unreadable lines are reported."""
    sequences: Dict[Tuple[str, str], List[dict]] = collections.OrderedDict()
    tables = set()
    for row in read_sqa_rows(os.path.join(sqa_dir, split.sqa_file)):
        if not isinstance(row, SqaRow):
            print(f"skipped: {row}", file=sys.stderr)
            continue
        if not split.keeps(row.table_file):
            continue
        if limit_tables and row.table_file not in tables and len(tables) >= limit_tables:
            continue
        tables.add(row.table_file)
        key = (f"{row.sequence_id}-{row.annotator}", row.table_file)
        sequences.setdefault(key, []).append(
            {"id": f"{key[0]}_{row.position}", "position": row.position, "question": row.question,
             "gold": set(row.coordinates)})
    for questions in sequences.values():
        questions.sort(key=lambda q: q["position"])
    return sequences


def _record(result, correct: bool, kind: str, task: str, question_id: str) -> dict:
    return {"task": task, "id": question_id, "kind": kind, "correct": bool(correct),
            "confidence": result.confidence, "model": result.model, "operator": result.operator,
            "num_cells": len(result.cells), "notes": list(result.notes),
            "features": confidence_features(result, result.follow_up)}


def wtq_correct(result, targets: List[str]) -> bool:
    """WTQ's denotation match: the selected cells, or the aggregated value when there is an operator."""
    if result.computed is not None:  # A difference, ratio, ... tapas-tf computed from the cells:
        # its number, or its text as shown ("56 m", "yes").
        computed = result.computed
        return ((computed.value is not None and denotation_matches(computed.value, targets))
                or denotation_matches([computed.answer], targets))
    else:
        predicted = list(result.answers) if result.operator == "NONE" else result.value
    return predicted is not None and denotation_matches(predicted, targets)


def ask_wtq(qa: TableQA, wtq_dir: str, limit_tables: int = 0, split: Split = DEV) -> List[dict]:
    records = []
    for context, questions in wtq_questions(wtq_dir, limit_tables, split).items():
        frame = frame_from_table(read_wtq_table(wtq_dir, context))
        results = qa.answer_many(frame, [q["question"] for q in questions])
        for question, result in zip(questions, results):
            correct = wtq_correct(result, question["targets"])
            records.append(_record(result, correct, question_kind(question["question"]), "WTQ",
                                   question["id"]))
    return records


def ask_sqa(qa: TableQA, sqa_dir: str, limit_tables: int = 0, split: Split = DEV) -> List[dict]:
    records = []
    frames: Dict[str, pd.DataFrame] = {}
    for (_, table_file), questions in sqa_sequences(sqa_dir, limit_tables, split).items():
        if table_file not in frames:
            frames[table_file] = frame_from_table(read_csv_table(os.path.join(sqa_dir, table_file),
                                                                 table_file))
        chat = qa.conversation(frames[table_file])
        for question in questions:
            result = chat.ask(question["question"])
            correct = result.operator == "NONE" and set(result.coordinates) == question["gold"]
            kind = "follow-up" if question["position"] > 0 else question_kind(question["question"])
            records.append(_record(result, correct, kind, "SQA", question["id"]))
    return records


def summarize(records: List[dict]) -> dict:
    """Accuracy overall and by kind of question; SQA's ALL/SEQ/Q1.. as its evaluator gives them."""
    summary = {"questions": len(records), "accuracy": _mean(r["correct"] for r in records), "by_kind": {}}
    kinds = collections.defaultdict(list)
    for record in records:
        kinds[record["kind"]].append(record["correct"])
    for kind, values in sorted(kinds.items()):
        summary["by_kind"][kind] = {"questions": len(values), "accuracy": _mean(values)}
    if records and records[0]["task"] == "SQA":
        summary["sqa"] = sqa_metrics((r["id"], r["correct"]) for r in records)
    return summary


def _mean(values) -> float:
    values = list(values)
    return round(sum(values) / len(values), 4) if values else 0.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sqa_dir", default="", help="The SQA release (random-split-1-dev.tsv, table_csv/).")
    parser.add_argument("--wtq_dir", default="", help="The WTQ release (random-split-1-dev.tsv, csv/).")
    parser.add_argument("--model_dir", default=None,
                        help="Default: the model TableQA.from_model_dir() loads.")
    parser.add_argument("--aggregation_model_dir", default=None)
    parser.add_argument("--checkpoint", default=None,
                        help="A checkpoint of --model_dir (TensorFlow backend).")
    parser.add_argument("--limit_tables", type=int, default=0)
    parser.add_argument("--holdout_report", default="",
                        help="Ask the held-out training tables of this mix_report.json instead of dev.")
    parser.add_argument("--output", default="", help="Write the summary JSON here too.")
    parser.add_argument("--calibration_out", default="", help="Write one JSON line per question here.")
    args = parser.parse_args(argv)
    if not (args.sqa_dir or args.wtq_dir):
        parser.error("give --sqa_dir, --wtq_dir or both")
    qa = TableQA.from_model_dir(args.model_dir, checkpoint=args.checkpoint,
                                aggregation_model_dir=args.aggregation_model_dir)
    report = {"model_dir": args.model_dir or "(default)", "aggregation_model_dir": args.aggregation_model_dir,
              "checkpoint": args.checkpoint,
              "split": "holdout" if args.holdout_report else "dev"}
    all_records = []
    for task, directory, ask in (("WTQ", args.wtq_dir, ask_wtq), ("SQA", args.sqa_dir, ask_sqa)):
        if not directory:
            continue
        start = time.time()
        split = holdout_split(args.holdout_report) if args.holdout_report else DEV
        records = ask(qa, directory, args.limit_tables, split)
        report[task] = summarize(records)
        report[task]["seconds"] = round(time.time() - start, 1)
        all_records += records
        print(task, json.dumps(report[task]), flush=True)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    if args.calibration_out:
        with open(args.calibration_out, "w", encoding="utf-8") as f:
            for record in all_records:
                f.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
