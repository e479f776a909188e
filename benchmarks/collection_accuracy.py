"""WTQ accuracy from a collection against the accuracy with the right table given (the same reader).

    python benchmarks/collection_accuracy.py --wtq_dir=../shared/datasets/wtq --index_dir=WTQ_INDEX \
        [--model_dir=DIR] [--aggregation_model_dir=DIR|none] [--holdout_report=MIX/mix_report.json] \
        [--method=hybrid] [--max_k=10] [--ks=1,3,5,10] [--weights=0,0.5,1,2] [--temperatures=0.5,1,2,4] [--output=FILE.json]

WTQ_INDEX is `tapas-tf index --tables=WTQ --patterns='csv/*.csv' --titles=...` over all the WTQ
tables. Each question of `random-split-1-dev.tsv` (or, with `--holdout_report`, of the training
tables held out of training: where the rule's parameters are chosen) is asked twice:

- **given**: on its own table, read back from the index (`TableIndex.read_table`, so both sides see
  the same frame), with `TableQA.answer_many`;
- **collection**: through `CollectionQA.answer` at `--max_k`, which asks each of the top tables. The
  candidates' answers are kept, and every (k, retrieval_weight, temperature) of the grid is scored
  from them without asking again: the top-k by retrieval rank, p_retrieval the softmax of those k
  scores, the answer with the highest `collection_qa.combined_score`.

Scored by WTQ's denotation (`ask_accuracy.wtq_correct`). Printed: accuracy given the table, each
grid point's accuracy, its ratio to the given accuracy, and how often the chosen table is the right
one; with --output the whole grid as JSON.
"""

import argparse
import itertools
import json
import os
import sys
import time
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from ask_accuracy import DEV, holdout_split, wtq_correct, wtq_questions  # noqa: E402  (benchmarks/ask_accuracy.py)
from machine import machine_line  # noqa: E402  (benchmarks/machine.py)

from tapas_tf.qa.collection_qa import CollectionQA, NoTableFound, combined_score, retrieval_probabilities  # noqa: E402
from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tapas_tf.qa.tables import AskError  # noqa: E402
from tapas_tf.retrieval.table_index import TableIndex  # noqa: E402


def ask_given(qa: TableQA, index: TableIndex, by_table: Dict[str, List[dict]]) -> Dict[str, bool]:
    """Question id -> right, asked on its own table."""
    right = {}
    for table_id, questions in by_table.items():
        frame = index.read_table(table_id).frame
        for question, result in zip(questions, qa.answer_many(frame, [q["question"] for q in questions])):
            right[question["id"]] = wtq_correct(result, question["targets"])
    return right


def ask_collection(cqa: CollectionQA, by_table: Dict[str, List[dict]]) -> List[dict]:
    """One record per question: its gold table and every candidate (rank, table, score, confidence, right)."""
    records = []
    for table_id, questions in by_table.items():
        for question in questions:
            record = {"id": question["id"], "gold": table_id, "candidates": []}
            try:
                found = cqa.answer(question["question"])
            except (NoTableFound, AskError):
                records.append(record)
                continue
            for candidate in found.candidates:
                if candidate.result is None:
                    continue
                record["candidates"].append({
                    "rank": candidate.rank, "table_id": candidate.table_id, "score": candidate.retrieval_score,
                    "confidence": candidate.result.confidence,
                    "right": wtq_correct(candidate.result, question["targets"])})
            records.append(record)
    return records


def choose(record: dict, k: int, weight: float, temperature: float) -> dict:
    """The candidate the rule keeps among the top-k by retrieval rank (None when none)."""
    top = sorted((c for c in record["candidates"] if c["rank"] <= k), key=lambda c: c["rank"])
    if not top:
        return {}
    probabilities = retrieval_probabilities([c["score"] for c in top], temperature)
    scored = [(combined_score(p, c["confidence"], weight), -c["rank"], c) for p, c in zip(probabilities, top)]
    return max(scored, key=lambda item: item[:2])[2]


def grid(records: List[dict], given: Dict[str, bool], ks, weights, temperatures) -> List[dict]:
    given_accuracy = sum(given.values()) / max(len(given), 1)
    rows = []
    for k, weight, temperature in itertools.product(ks, weights, temperatures):
        chosen = [choose(record, k, weight, temperature) for record in records]
        accuracy = sum(bool(c.get("right")) for c in chosen) / max(len(records), 1)
        right_table = sum(c.get("table_id") == r["gold"] for c, r in zip(chosen, records)) / max(len(records), 1)
        rows.append({"k": k, "retrieval_weight": weight, "temperature": temperature, "accuracy": round(accuracy, 4),
                     "ratio_to_given": round(accuracy / given_accuracy, 4) if given_accuracy else None,
                     "right_table": round(right_table, 4)})
    return rows


def _floats(text: str) -> List[float]:
    return [float(x) for x in text.split(",") if x]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wtq_dir", required=True)
    parser.add_argument("--index_dir", required=True)
    parser.add_argument("--model_dir", default=None)
    parser.add_argument("--aggregation_model_dir", default=None)
    parser.add_argument("--holdout_report", default="", help="Ask the held-out training tables instead of dev.")
    parser.add_argument("--method", default=None, help="bm25, dense or hybrid (default: the index's default)")
    parser.add_argument("--max_k", type=int, default=10)
    parser.add_argument("--ks", default="1,3,5,10")
    parser.add_argument("--weights", default="0,0.5,1,2")
    parser.add_argument("--temperatures", default="0.5,1,2,4")
    parser.add_argument("--limit_tables", type=int, default=0)
    parser.add_argument("--output", default="")
    args = parser.parse_args(argv)
    split = holdout_split(args.holdout_report) if args.holdout_report else DEV
    by_table = wtq_questions(args.wtq_dir, args.limit_tables, split)
    index = TableIndex.load(args.index_dir)
    missing = [table for table in by_table if table not in index.tables.index]
    if missing:
        print(f"{len(missing)} question tables are not in the index (counted as misses): {missing[:3]}", file=sys.stderr)
    qa = TableQA.from_model_dir(args.model_dir, aggregation_model_dir=args.aggregation_model_dir)
    start = time.time()
    given = ask_given(qa, index, {t: q for t, q in by_table.items() if t not in missing})
    for table in missing:
        given.update({q["id"]: False for q in by_table[table]})
    given_seconds = time.time() - start
    start = time.time()
    records = ask_collection(CollectionQA(index, qa, k=args.max_k, method=args.method), by_table)
    collection_seconds = time.time() - start
    rows = grid(records, given, [k for k in map(int, args.ks.split(",")) if k <= args.max_k],
                _floats(args.weights), _floats(args.temperatures))
    report = {"machine": machine_line(), "split": "holdout" if args.holdout_report else "dev",
              "questions": len(records), "given_accuracy": round(sum(given.values()) / len(given), 4),
              "given_seconds": round(given_seconds, 1), "collection_seconds": round(collection_seconds, 1),
              "method": args.method or index.default_method, "max_k": args.max_k, "grid": rows}
    print(report["machine"])
    print(f"{report['questions']} questions ({report['split']}); given the table: {report['given_accuracy']:.4f} "
          f"({given_seconds:.0f} s); collection at k={args.max_k}: {collection_seconds:.0f} s")
    print("| k | retrieval weight | temperature | accuracy | ratio to given | right table |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['k']} | {row['retrieval_weight']} | {row['temperature']} | {row['accuracy']:.4f} | "
              f"{row['ratio_to_given']} | {row['right_table']:.4f} |")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump({**report, "records": records}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
