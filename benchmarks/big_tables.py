"""Big tables read in windows: exact answers, wall time and peak memory by size.

    python benchmarks/big_tables.py [--sizes=1000,10000,100000] [--model_dir=DIR] [--output=big.json]

A synthetic orders table of N rows x 10 columns (seeded; every answer known) is asked five kinds
of question through the public API (`TableQA.answer`, the bundled pair by default):

    count        how many orders have status shipped?          COUNT over a condition
    sum          what is the total quantity?                   SUM of a column
    average      what is the average price?                    AVERAGE of a column
    lookup       what is the city of order O-...?              one cell
    superlative  which order has the highest amount?           one cell, across windows

Each question is first asked of a 20-row slice of the same table: "right on the slice" says
whether the model answers that question correctly at all; the claim under test is that wherever it
does, it also answers the N-row table exactly. Every size runs in its own process, so that its peak
resident memory (ru_maxrss) is that size's; the table is built in that process too (its DataFrame
is part of the peak). Times are the answer's wall time, split into the model's calls and the rest
(conversion, window planning, the reduce), whose share is reported as "conversion".

`--reader=oracle` replaces the model with a stand-in that selects exactly the right cells and
operator in every window (from the window's own features): the reduce must then be exact at every
size, and the time is all conversion, planning and reduce.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Dict, List, Tuple

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine_line  # noqa: E402

CITIES = ("paris", "london", "berlin", "madrid", "rome", "vienna", "oslo", "lisbon", "dublin", "prague")
STATUSES = ("shipped", "pending", "cancelled", "returned")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")


def orders(rows: int, seed: int = 0) -> pd.DataFrame:
    """The synthetic table: 10 columns, one row per order; `amount` is unique (its largest is one row)."""
    rng = np.random.default_rng(seed)
    quantity = rng.integers(1, 50, rows)
    price = rng.integers(2, 400, rows)
    amount = rng.permutation(rows) * 3 + 7  # Distinct: a superlative has one winner.
    return pd.DataFrame({
        "order": [f"O-{i:06d}" for i in range(rows)],
        "customer": [f"customer {int(c)}" for c in rng.integers(1, max(2, rows // 5), rows)],
        "city": rng.choice(CITIES, rows),
        "status": rng.choice(STATUSES, rows),
        "month": rng.choice(MONTHS, rows),
        "year": rng.integers(2015, 2025, rows).astype(str),
        "quantity": quantity.astype(str),
        "price": price.astype(str),
        "amount": amount.astype(str),
        "channel": rng.choice(("web", "shop", "phone"), rows),
    })


def questions(frame: pd.DataFrame) -> List[Tuple[str, str, object]]:
    """(kind, question, expected answer) on `frame`: a number, or the one cell's text."""
    target = frame.iloc[len(frame) * 2 // 3]
    return [
        ("count", "how many orders have status shipped?", float((frame.status == "shipped").sum())),
        ("sum", "what is the total quantity?", float(frame.quantity.astype(int).sum())),
        ("average", "what is the average price?", float(frame.price.astype(int).mean())),
        ("lookup", f"what is the city of order {target.order}?", target.city),
        ("superlative", "which order has the highest amount?", frame.order[frame.amount.astype(int).idxmax()]),
    ]


def is_right(result, expected) -> bool:
    if isinstance(expected, float):
        return result.value is not None and abs(result.value - expected) <= 1e-6 * max(1.0, abs(expected))
    return result.operator == "NONE" and [c.text for c in result.cells] == [expected]


class TimedRunner:
    """Wraps a TableQA runner and adds up the seconds of its calls."""

    def __init__(self, runner):
        self.runner, self.seconds, self.calls = runner, 0.0, 0

    def __getattr__(self, name):
        return getattr(self.runner, name)

    def __call__(self, length, rows):
        started = time.perf_counter()
        try:
            return self.runner(length, rows)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1


def _timed(qa) -> List[TimedRunner]:
    """Times the runners of `qa` and of its aggregation model (loaded now)."""
    timed = [TimedRunner(qa.runner)]
    qa.runner = timed[0]
    if qa._aggregation_model is not None:  # pylint: disable=protected-access
        other = qa.aggregation_model
        timed.append(TimedRunner(other.runner))
        other.runner = timed[1]
    return timed


class OracleRunner:
    """A stand-in for the model that selects, in each window, exactly the cells the question needs and
    its operator (read from the window's own features): what the windows' reduce does with a reader
    that is always right. Questions are recognised by their words (`questions`)."""

    has_aggregation_head = True
    backend = "oracle"

    def __init__(self, encoder, question: str, frame: pd.DataFrame):
        self.tokenizer, self.question, self.frame = encoder.tokenizer, question, frame
        self.columns = {name: i + 1 for i, name in enumerate(frame.columns)}  # Column ids of the features.

    def _ids(self, text: str) -> List[int]:
        return self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(text))

    def __call__(self, length, rows):
        probabilities = np.full((len(rows), length), 0.01, np.float32)
        logits = np.zeros((len(rows), 4), np.float32)
        for i, f in enumerate(rows):
            chosen, operator = self._select(f)
            probabilities[i, chosen] = 0.99
            logits[i, operator] = 8.0
        return {"probabilities": probabilities, "aggregation_logits": logits}

    def _select(self, f):
        body = f["row_ids"] > 0
        column = lambda name: body & (f["column_ids"] == self.columns[name])  # noqa: E731
        q = self.question
        if q.startswith("how many orders have status"):
            shipped = self._ids("shipped")[0]
            return column("status") & (f["input_ids"] == shipped), 3
        if q.startswith("what is the total quantity"):
            return column("quantity"), 1
        if q.startswith("what is the average price"):
            return column("price"), 2
        if q.startswith("what is the city of order"):
            order = q.rsplit(" ", 1)[1].rstrip("?")
            pieces = self._ids(order)
            rows = [r for r in set(f["row_ids"][column("order")].tolist())
                    if f["input_ids"][column("order") & (f["row_ids"] == r)].tolist() == pieces]
            return column("city") & np.isin(f["row_ids"], rows), 0
        amount = column("amount")
        # This example's highest amount: its lowest inverse rank (1 = the column's largest; ranks count
        # from the other end and are clamped at 255, so inverse ranks tell the largest apart).
        best = f["inv_column_ranks"][amount].min() if amount.any() else -1
        rows = set(f["row_ids"][amount & (f["inv_column_ranks"] == best)].tolist())
        return column("order") & np.isin(f["row_ids"], list(rows)), 0


def run_size(rows: int, model_dir: str, kinds: str = "", reader: str = "model") -> Dict:
    from tapas_tf.qa.table_qa import TableQA

    qa = TableQA.from_model_dir(model_dir) if model_dir else TableQA.from_model_dir()
    if reader == "oracle":
        qa = TableQA(None, qa.encoder, qa.rule, name="oracle")
    timed = _timed(qa) if reader == "model" else []
    if reader == "model":
        qa.warm_up()
    frame = orders(rows)
    slice_frame = frame.iloc[: 20].reset_index(drop=True)
    out = []
    for (kind, question, expected), (_, slice_question, slice_expected) in zip(questions(frame), questions(slice_frame)):
        if kinds and kind not in kinds.split(","):
            continue
        if reader == "oracle":
            qa.runner = OracleRunner(qa.encoder, slice_question, slice_frame)
            timed = _timed(qa)
        on_slice = qa.answer(slice_frame, slice_question)
        if reader == "oracle":
            qa.runner = OracleRunner(qa.encoder, question, frame)
            timed = _timed(qa)
        model_before = sum(t.seconds for t in timed)
        started = time.perf_counter()
        result = qa.answer(frame, question)
        seconds = time.perf_counter() - started
        model = sum(t.seconds for t in timed) - model_before
        out.append({"kind": kind, "question": question, "expected": expected, "answer": result.answer_text,
                    "right": is_right(result, expected), "right_on_slice": is_right(on_slice, slice_expected),
                    "slice_answer": on_slice.answer_text, "model": result.model, "seconds": round(seconds, 3),
                    "model_seconds": round(model, 3),
                    "windows": None if result.reading is None else result.reading.windows_read,
                    "second_pass_rows": None if result.reading is None else result.reading.second_pass_rows})
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"rows": rows, "columns": frame.shape[1], "peak_rss_mb": round(peak_mb, 1), "questions": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--model_dir", default="")
    parser.add_argument("--output", default="")
    parser.add_argument("--kinds", default="", help="Only these kinds of question, comma-separated.")
    parser.add_argument("--reader", default="model", choices=["model", "oracle"],
                        help="oracle: a stand-in that selects exactly the right cells in every window "
                             "(the reduce's exactness, and the time outside the model).")
    parser.add_argument("--one_size", type=int, default=0, help=argparse.SUPPRESS)  # A child process.
    args = parser.parse_args()
    if args.one_size:
        print(json.dumps(run_size(args.one_size, args.model_dir, args.kinds, args.reader)))
        return
    reports = []
    for size in (int(s) for s in args.sizes.split(",")):
        command = [sys.executable, __file__, f"--one_size={size}", f"--model_dir={args.model_dir}",
                   f"--kinds={args.kinds}", f"--reader={args.reader}"]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        reports.append(json.loads(done.stdout.strip().splitlines()[-1]))
        _print(reports[-1])
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump({"machine": machine_line(), "reports": reports}, f, indent=1)
    print(machine_line())


def _print(report: Dict) -> None:
    print(f"\n{report['rows']:,} rows x {report['columns']} columns, peak RSS {report['peak_rss_mb']:,} MB")
    print("| kind | right on 20 rows | right here | answer | expected | seconds | model s | windows | answered by |")
    print("|---|---|---|---|---|---|---|---|---|")
    for q in report["questions"]:
        print(f"| {q['kind']} | {q['right_on_slice']} | {q['right']} | {q['answer'][:40]} | {q['expected']} | "
              f"{q['seconds']} | {q['model_seconds']} | {q['windows']} | {q['model']} |")


if __name__ == "__main__":
    main()
