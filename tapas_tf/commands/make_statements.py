"""Command line: synthetic and counterfactual statements for TabFact's intermediate pre-training.

    tapas-tf make-statements --input_dir=tabfact --output_dir=statements --pairs_per_table=8
    tapas-tf create-data --task=TABFACT --input_dir=statements --output_dir=statements_data

Reads the tables of one split of a TabFact release (`--split`, default train, so that no dev or
test table is used) and writes a release of its own: `OUTPUT_DIR/train_examples.json` in the
release's format and `OUTPUT_DIR/all_csv` (a link to the input's tables), so that `create-data
--task=TABFACT` reads it like the release. For each table, `--pairs_per_table` true/false pairs
from templates (`tapas_tf.data.synthetic_statements`), and for each of its entailed statements a
refuted counterfactual twin (one of its cells swapped for another of the same column) beside the
original. `--include_original` adds the split's own statements too (the counterfactuals' originals
are always there). `OUTPUT_DIR/statements_report.json` counts statements by kind and label, and
tables and statements that gave nothing, with the reason.

The training-data rule (`tapas_tf.data.training_tables`) applies: a TabFact table is used only if
the release's `train_examples.json` names it, so `--split=val` or `--split=test` gives no
statements (each table is counted under `excluded_by_reason`, and the command fails when no table
is left). A table of your own (an id not of TabFact's `N-N-N.html.csv` form) is used. The tables
used are listed in `OUTPUT_DIR/training_tables.txt.gz`, the manifest a bundled model carries.
"""

import collections
import hashlib
import json
import os
import random
import sys
from typing import Any, Dict, List

from absl import flags

import tapas_tf.cli as cli
from tapas_tf.data import table_manifest, training_tables
from tapas_tf.data.readers.common import ReaderError
from tapas_tf.data.readers.tabfact import TABLES_DIR, load_split, read_table
from tapas_tf.data.synthetic_statements import (ENTAILED, Statement, StatementTable, counterfactual,
                                                synthetic_statements)

PROG = "make-statements"
FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_string("input_dir", None, "A TabFact release: SPLIT_examples.json and all_csv/.")
    flags.DEFINE_string("output_dir", None, "Where to write train_examples.json, all_csv and the report.")
    flags.DEFINE_string("split", "train", "The split whose tables and statements are used (keep dev and test "
                        "tables out of pre-training).")
    flags.DEFINE_integer("pairs_per_table", 8, "True/false template pairs per table.", lower_bound=0)
    flags.DEFINE_boolean("counterfactuals", True, "A refuted twin of each entailed statement of the split.")
    flags.DEFINE_boolean("include_original", False, "Add the split's own statements (all of them).")
    flags.DEFINE_integer("holdout_tables", 0, "Keep this many of the split's tables out (chosen by the seed) and "
                         "write their own statements as OUTPUT_DIR/test_examples.json: a held-out slice for "
                         "choosing a checkpoint without dev.", lower_bound=0)
    flags.DEFINE_integer("seed", 1, "Random seed; each table's choices depend on it and the table id only.")


REPORT = "statements_report.json"


def _table_rng(table_id: str, seed: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{table_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def statements_for_table(table: StatementTable, statements: List[str], labels: List[int], rng: random.Random,
                         counts: Dict[str, Any]) -> List[Statement]:
    """The new statements about one table: template pairs, counterfactual pairs, and the originals."""
    made = synthetic_statements(table, rng, FLAGS.pairs_per_table)
    for statement, label in zip(statements, labels):
        if FLAGS.include_original:
            made.append(Statement(statement, label, "original"))
        if not FLAGS.counterfactuals or label != ENTAILED:
            continue
        twin = counterfactual(table, statement, rng)
        if twin is None:
            counts["entailed_without_swappable_cell"] += 1
            continue
        # The original again beside its twin, even with --include_original: a pair keeps labels balanced.
        made.append(Statement(statement, label, "counterfactual_original"))
        made.append(twin)
    return made


def _read_split(split_file: str) -> Dict[str, List[Any]]:
    try:
        split = load_split(split_file)
    except ReaderError as e:
        if e.reason == "missing_file":
            cli.fail(PROG, f"{split_file}: file not found (--input_dir is a TabFact release with "
                     f"{FLAGS.split}_examples.json and all_csv/)", cli.ERROR_EXIT_CODE)
        # Not a JSON object, or not valid JSON: the reader's one line, naming the file, line and column.
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    bad = [table_id for table_id, entry in split.items()
           if not (isinstance(entry, list) and len(entry) >= 2 and isinstance(entry[0], list)
                   and isinstance(entry[1], list) and len(entry[0]) == len(entry[1]))] \
        if isinstance(split, dict) else ["(the file is not a JSON object)"]
    if bad:
        cli.fail(PROG, f"{split_file}: entry {bad[0]!r} is not [statements, labels, caption] "
                 f"({len(bad)} such entries)", cli.ERROR_EXIT_CODE)
    return split


def _rule(input_dir: str) -> training_tables.TrainingTableRule:
    """The rule over the input release: its train split names the training tables (without
    train_examples.json, no TabFact table can be shown to be one)."""
    has_train = os.path.isfile(os.path.join(input_dir, "train_examples.json"))
    try:
        return training_tables.TrainingTableRule.from_releases(
            training_tables.Releases(tabfact_dir=input_dir if has_train else None))
    except (training_tables.ReleaseFileError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)


def _check_some_left(excluded: Dict[str, int], table_count: int) -> None:
    left_out = sum(excluded.values())
    if not left_out:
        return
    print(f"{PROG}: {left_out} of {table_count} tables of --split={FLAGS.split} left out by the "
          f"training-data rule: {json.dumps(excluded)}", file=sys.stderr)
    if left_out == table_count:
        cli.fail(PROG, f"every table of --split={FLAGS.split} is outside TabFact train, and statements for "
                 "training come only from training tables (use --split=train)", cli.ERROR_EXIT_CODE)


def main(argv: List[str]) -> None:
    if len(argv) > 1:
        cli.fail(PROG, f"unexpected argument {argv[1]!r} (all options are flags)", cli.USAGE_EXIT_CODE)
    if not FLAGS.input_dir or not FLAGS.output_dir:
        cli.fail(PROG, "--input_dir and --output_dir are required (--help lists the flags)",
                 cli.USAGE_EXIT_CODE)
    split_file = os.path.join(FLAGS.input_dir, f"{FLAGS.split}_examples.json")
    split = _read_split(split_file)
    rule = _rule(FLAGS.input_dir)
    decisions = {table_id: rule.decide(table_id) for table_id in split}
    excluded = dict(collections.Counter(d.reason for d in decisions.values() if not d.kept))
    _check_some_left(excluded, len(split))
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    counts: Dict[str, Any] = collections.Counter()
    by_kind: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    tables_skipped: Dict[str, int] = collections.Counter()
    output: Dict[str, List[Any]] = {}
    table_ids = sorted(t for t in split if decisions[t].kept)
    holdout = set(random.Random(FLAGS.seed).sample(table_ids, min(FLAGS.holdout_tables, len(table_ids))))
    for number, table_id in enumerate(table_ids, start=1):
        entry = split[table_id]
        if table_id in holdout:
            continue
        counts["tables_read"] += 1
        try:
            proto = read_table(FLAGS.input_dir, table_id)
        except ReaderError as e:
            tables_skipped[e.reason] += 1
            continue
        table = StatementTable.from_rows([c.text for c in proto.columns],
                                         [[cell.text for cell in row.cells] for row in proto.rows])
        statements, labels = entry[0], entry[1]
        made = statements_for_table(table, statements, labels, _table_rng(table_id, FLAGS.seed), counts)
        if not made:
            tables_skipped["no_statement_fits"] += 1
            continue
        for statement in made:
            by_kind[statement.kind]["entailed" if statement.label == ENTAILED else "refuted"] += 1
        caption = entry[2] if len(entry) > 2 else ""
        output[table_id] = [[s.text for s in made], [s.label for s in made], caption]
        if number % 1000 == 0:
            total = sum(sum(c.values()) for c in by_kind.values())
            print(f"{number}/{len(split)} tables, {total} statements", flush=True)
    with open(os.path.join(FLAGS.output_dir, "train_examples.json"), "w", encoding="utf-8") as f:
        json.dump(output, f)
    if holdout:
        with open(os.path.join(FLAGS.output_dir, "test_examples.json"), "w", encoding="utf-8") as f:
            json.dump({table_id: split[table_id] for table_id in sorted(holdout)}, f)
    manifest = os.path.join(FLAGS.output_dir, table_manifest.MANIFEST_FILE)
    table_manifest.write_manifest(manifest, (decisions[t].manifest_name for t in output))
    link = os.path.join(FLAGS.output_dir, TABLES_DIR)
    if not os.path.exists(link):
        os.symlink(os.path.abspath(os.path.join(FLAGS.input_dir, TABLES_DIR)), link)
    report = {"input": split_file, "seed": FLAGS.seed, "pairs_per_table": FLAGS.pairs_per_table,
              "tables_read": counts["tables_read"], "tables_used": len(output),
              "tables_held_out": len(holdout), "held_out_statements": sum(len(split[t][0]) for t in holdout),
              "excluded_by_reason": excluded,
              "manifest": {"file": table_manifest.MANIFEST_FILE, "tables": len(output)},
              "tables_skipped": dict(tables_skipped),
              "entailed_without_swappable_cell": counts["entailed_without_swappable_cell"],
              "statements": {kind: dict(c) for kind, c in sorted(by_kind.items())},
              "total": sum(sum(c.values()) for c in by_kind.values())}
    with open(os.path.join(FLAGS.output_dir, REPORT), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    print(f"{report['total']} statements about {len(output)} tables -> "
          f"{os.path.join(FLAGS.output_dir, 'train_examples.json')}")
    print(json.dumps(report["statements"]))


if __name__ == "__main__":  # python -m tapas_tf.commands.make_statements: the same as `tapas-tf make-statements`.
    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
