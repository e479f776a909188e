"""How often the answer survives when a WikiTableQuestions table does not fit in the sequence.

For every question of a WTQ file whose table does not fit in `--max_seq_length` tokens (BERT's
uncased vocabulary, as every released TAPAS model uses), this compares two ways of making it fit:

- truncation: keep the first rows that fit (the original TAPAS `drop_rows_to_fit`);
- pruning: keep the rows and columns that share the most words with the question
  (`tapas_tf.qa.pruning`, what the ask API does).

A question counts when each of its answer texts equals (after `normalize_answer_text`) the text
of at least one cell; its answer survives when, for every answer text, one such cell is kept.
No model is involved: this measures the input the model gets, not its accuracy.

    python benchmarks/pruning_recall.py --wtq_dir=../shared/datasets/wtq --split=random-split-1-dev.tsv
"""

import argparse
import dataclasses
import json
import os
import time
from typing import Dict, List, Optional, Sequence, Set, Tuple


from tapas_tf.data.protos import interaction_pb2  # noqa: E402
from tapas_tf.data.readers import wtq  # noqa: E402
from tapas_tf.data.text_normalization import normalize_answer_text  # noqa: E402
from tapas_tf.features.classifier_examples import STAT_ROWS_DROPPED, ExampleConverter  # noqa: E402
from tapas_tf.features.conversion_config import ConversionConfig, ConversionError  # noqa: E402
from tapas_tf.qa.ask_encoding import TableEncoder  # noqa: E402
from tapas_tf.qa.tables import AskError  # noqa: E402


def answer_cells(table: interaction_pb2.Table, answers: Sequence[str]) -> Optional[List[Set[Tuple[int, int]]]]:
    """For each answer text, the cells whose text equals it; None if one answer matches no cell."""
    by_text: Dict[str, Set[Tuple[int, int]]] = {}
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            by_text.setdefault(normalize_answer_text(cell.text), set()).add((r, c))
    matches = [by_text.get(normalize_answer_text(a), set()) for a in answers]
    return matches if matches and all(matches) else None


def survives(matches: List[Set[Tuple[int, int]]], rows: Set[int], columns: Set[int]) -> bool:
    return all(any(r in rows and c in columns for r, c in cells) for cells in matches)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wtq_dir", required=True)
    parser.add_argument("--split", default="random-split-1-dev.tsv")
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--output", default=None, help="Write the summary as JSON here.")
    args = parser.parse_args(argv)

    config = ConversionConfig.from_options(max_seq_length=args.max_seq_length, max_column_id=256,
                                           max_row_id=256, fail_on_dropped_answers=False)
    truncating = ExampleConverter(dataclasses.replace(config, drop_rows_to_fit=True))
    encoder = TableEncoder(config, prune=True, tokenizer=truncating.tokenizer)
    counts = dict(questions=0, too_big=0, answer_in_table=0, truncation_keeps_answer=0, pruning_keeps_answer=0,
                  truncation_fails=0, ask_errors=0)
    kept_rows = {"truncation": 0, "pruning": 0, "original": 0}
    start = time.time()
    for item in wtq.read_wtq_interactions(os.path.join(args.wtq_dir, args.split), args.wtq_dir):
        if isinstance(item, ValueError):
            continue
        counts["questions"] += 1
        question = item.questions[0]
        frame_path = os.path.join(args.wtq_dir, item.table.table_id)
        try:
            encoded = encoder.encode(encoder.prepare(frame_path), question.original_text)
        except AskError:
            counts["ask_errors"] += 1
            continue
        if not encoded.pruned.is_pruned:
            continue
        counts["too_big"] += 1
        table = encoder.prepare(frame_path).table
        matches = answer_cells(table, list(question.answer.answer_texts))
        if matches is None:
            continue
        counts["answer_in_table"] += 1
        kept_rows["original"] += len(table.rows)
        kept_rows["pruning"] += len(encoded.pruned.rows)
        if survives(matches, set(encoded.pruned.rows), set(encoded.pruned.columns)):
            counts["pruning_keeps_answer"] += 1
        interaction = interaction_pb2.Interaction(id="q")
        interaction.table.CopyFrom(table)
        interaction.questions.add().CopyFrom(question)
        interaction.questions[0].ClearField("answer")
        try:
            stats = truncating.convert(interaction, 0).stats
        except ConversionError:
            counts["truncation_fails"] += 1
            continue
        first_rows = len(table.rows) - stats[STAT_ROWS_DROPPED]
        kept_rows["truncation"] += first_rows
        if survives(matches, set(range(first_rows)), set(range(len(table.columns)))):
            counts["truncation_keeps_answer"] += 1
    n = counts["answer_in_table"]
    summary = {**counts, "seconds": round(time.time() - start, 1),
               "pruning_recall": round(counts["pruning_keeps_answer"] / n, 4) if n else None,
               "truncation_recall": round(counts["truncation_keeps_answer"] / n, 4) if n else None,
               "mean_rows": {k: round(v / n, 1) for k, v in kept_rows.items()} if n else None,
               "split": args.split, "max_seq_length": args.max_seq_length}
    print(json.dumps(summary, indent=2))
    if args.output:
        with open(args.output, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
