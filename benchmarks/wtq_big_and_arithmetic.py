"""WikiTableQuestions dev, two slices: tables that do not fit one example, and arithmetic questions.

    python benchmarks/wtq_big_and_arithmetic.py --wtq_dir=../shared/datasets/wtq [--model_dir=DIR] \
        [--output=wtq_big_arith.json]

1. Big tables. A question is in this slice when its table does not fit the model's 512 tokens with
   it (`TableEncoder.encode(..., prune=False)` raises `TableTooBig`). Each is asked twice with the
   same model, the table pruned to its most related rows (`windows=False`, the behaviour before
   windows) and read whole in windows (the default), and scored by denotation.
2. Arithmetic. A question is in this slice when its words ask for a difference, ratio, percentage,
   yes/no comparison or date span (`arithmetic.asked`). "Before" scores the model's own answer (its
   cells, or its operator's value), "after" scores the answer as tapas-tf gives it now (the
   computed value where it computed one, else the same), both from one run.

Scoring is `ask_accuracy.wtq_correct` (WTQ's denotation match). The default model is the bundled
pair, as `TableQA.from_model_dir()` loads it.
"""

import argparse
import collections
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ask_accuracy import wtq_correct, wtq_questions  # noqa: E402
from machine import machine_line  # noqa: E402

from tapas_tf.data.readers.wtq import read_wtq_table  # noqa: E402
from tapas_tf.qa.arithmetic import asked  # noqa: E402
from tapas_tf.qa.ask_encoding import TableTooBig  # noqa: E402
from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tapas_tf.qa.tables import frame_from_table  # noqa: E402


def _fits(qa: TableQA, prepared, question: str) -> bool:
    try:
        qa.encoder.encode(prepared, question, prune=False)
        return True
    except TableTooBig:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wtq_dir", required=True)
    parser.add_argument("--model_dir", default="")
    parser.add_argument("--limit_tables", type=int, default=0)
    parser.add_argument("--output", default="")
    args = parser.parse_args()
    qa = TableQA.from_model_dir(args.model_dir) if args.model_dir else TableQA.from_model_dir()
    big = collections.Counter()
    arith = collections.Counter()
    by_kind = collections.defaultdict(collections.Counter)
    examples = []
    started = time.time()
    for number, (context, questions) in enumerate(wtq_questions(args.wtq_dir, args.limit_tables).items()):
        frame = frame_from_table(read_wtq_table(args.wtq_dir, context))
        prepared = qa.encoder.prepare(frame)
        for q in questions:
            kind = asked(q["question"])
            if not _fits(qa, prepared, q["question"]):
                qa.windows = False
                pruned = qa.answer(frame, q["question"])
                qa.windows = True
                windowed = qa.answer(frame, q["question"])
                big["questions"] += 1
                big["pruned_right"] += wtq_correct(pruned, q["targets"])
                big["windows_right"] += wtq_correct(windowed, q["targets"])
                big["rows"] += len(frame)
            if kind is not None:
                result = qa.answer(frame, q["question"])
                model_only = dataclasses.replace(result, computed=None)
                before, after = wtq_correct(model_only, q["targets"]), wtq_correct(result, q["targets"])
                arith["questions"] += 1
                arith["computed"] += result.computed is not None
                arith["before_right"] += before
                arith["after_right"] += after
                by_kind[kind].update({"questions": 1, "computed": result.computed is not None,
                                      "before_right": before, "after_right": after})
                if result.computed is not None and len(examples) < 12:
                    examples.append({"question": q["question"], "targets": q["targets"],
                                     "answer": result.summary, "right": after})
        if number % 50 == 0:
            print(f"{number} tables, {time.time() - started:.0f} s: big {dict(big)} arithmetic {dict(arith)}",
                  file=sys.stderr)
    report = {"machine": machine_line(), "big_tables": dict(big), "arithmetic": dict(arith),
              "arithmetic_by_kind": {k: dict(v) for k, v in by_kind.items()}, "computed_examples": examples,
              "seconds": round(time.time() - started)}
    print(json.dumps(report, indent=1))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
