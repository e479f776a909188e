"""Command line: inverse-cloze pairs (a sentence of a table's page, and the table) for pre-training
a table retriever, under the training-data rule.

    tapas-tf create-pretrain-data --stage=extract --input_dumps=... --output_dir=pages ...
    tapas-tf make-ict-pairs --interactions='pages/interactions/*.tfrecord' --output_dir=ict \\
        --wtq_release=wtq --sqa_release=sqa --tabfact_release=tabfact --wtq_pages=wikipedia/wtq_pages
    tapas-tf train-retriever --init_model=minilm_retriever --model_dir=ict_retriever \\
        --tables=ict/tables --titles=ict/titles.tsv --queries=ict/queries.tsv --train_steps=400

Reads interactions with a table and its page's text (the Wikipedia job's; .tfrecord or
.txtpb[.gz]) and writes OUTPUT_DIR/tables/*.csv, titles.tsv, queries.tsv (id, question, table_id:
up to --sentences_per_table sentences of the page text per table) and report.json, the input of
`train-retriever` (`tapas_tf.retrieval.ict_pairs`). With a release given, the training-data rule
applies (`tapas_tf.data.training_tables`): tables of evaluation splits and pages holding one are
left out, counted by reason, and the kept tables' manifest is written as training_tables.txt.gz.
The last line printed sums up what was written and skipped.
"""

import json
from typing import List

from absl import flags

import tapas_tf.cli as cli
from tapas_tf.commands import rule_flags
from tapas_tf.data import interaction_io

PROG = "make-ict-pairs"
FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_multi_string("interactions", None, "An interaction file or glob (repeatable): tables with their "
                              "page text, as `create-pretrain-data --stage=extract` writes them.")
    flags.DEFINE_string("output_dir", None, "Where tables/, titles.tsv, queries.tsv and report.json go.")
    flags.DEFINE_integer("sentences_per_table", 2, "Pseudo-questions per table, at most.", lower_bound=1)
    flags.DEFINE_integer("seed", 1, "Changes which sentences are chosen (by a fingerprint, never file order).")
    rule_flags.define_flags(__name__)
    for name in ("interactions", "output_dir"):
        flags.mark_flag_as_required(name)


def _read_all(paths: List[str]):
    for path in paths:
        yield from interaction_io.read_interactions(path)


def main(argv: List[str]) -> None:
    cli.reject_positional_arguments(PROG, argv)
    from tapas_tf.retrieval.ict_pairs import write_ict_collection

    try:
        paths = interaction_io.expand_paths(FLAGS.interactions)
        rule = rule_flags.rule_from_flags()
        counts = write_ict_collection(_read_all(paths), FLAGS.output_dir, FLAGS.sentences_per_table, FLAGS.seed,
                                      rule=rule)
    except (ValueError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    skipped = {k: v for k, v in counts.items() if k.startswith("tables_") and k != "tables_written"}
    print(f"{counts.get('questions_written', 0)} questions on {counts.get('tables_written', 0)} tables from "
          f"{counts.get('interactions_read', 0)} interactions -> {FLAGS.output_dir}; skipped {json.dumps(skipped)}")
    if rule is None:
        print("The training-data rule was not applied (no --wtq_release, --sqa_release or --tabfact_release).")


if __name__ == "__main__":
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
