"""Command line: the tables of the synthetic stage, from any interactions, without evaluation tables.

    tapas-tf collect-tables --interactions=out/wtq_data/interactions/train.tfrecord \\
        --exclude_interactions=out/wtq_data/interactions/dev.tfrecord \\
        --exclude_interactions=out/sqa_data/interactions/dev.tfrecord \\
        --output=out/synth_tables/train.tfrecord --excluded_out=out/exclude_tables.txt
    tapas-tf create-data --task=SYNTHETIC --input_dir=out/synth_tables --output_dir=out/synth_data

Reads interaction files (a task's `create-data` output, `create-pretrain-data --stage=extract`'s
tables, Google's released interactions; .tfrecord or .txtpb[.gz]) and writes each distinct table
once, as a table-only interaction, to --output: the input of `create-data --task=SYNTHETIC`, which
makes questions with their gold cells and operator from any tables (the intermediate pre-training
stage; docs/TRAINING.md). Tables of --exclude_interactions (the dev and test splits you score on)
and of --exclude_tables (a file of table names, one per line) are left out; a WikiTableQuestions
table and the same table as SQA names it count as one (`tapas_tf.data.table_collection`).
--excluded_out writes the names left out, in the format `create-pretrain-data --exclude_tables`
reads, so the Wikipedia job can leave them out too. Prints what it kept and why it left the rest
out.
"""

import os
from typing import List

from absl import flags

import tapas_tf.cli as cli
from tapas_tf.data import interaction_io, table_collection

PROG = "collect-tables"
FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_multi_string("interactions", None, "An interaction file whose tables are collected (repeatable).")
    flags.DEFINE_multi_string("exclude_interactions", [], "An interaction file whose tables are left out "
                              "(repeatable): the dev and test splits a model is scored on.")
    flags.DEFINE_string("exclude_tables", None, "A file of table names to leave out, one per line (WTQ "
                        "csv/2xx-csv/N.csv, SQA table_csv/2xx_N.csv, or any table id).")
    flags.DEFINE_string("output", None, "The table-only interactions (.tfrecord, or .txtpb[.gz]); name it "
                        "DIR/train.tfrecord for create-data --task=SYNTHETIC --input_dir=DIR.")
    flags.DEFINE_string("excluded_out", None, "Also write the names of the excluded tables here, one per line.")
    for name in ("interactions", "output"):
        flags.mark_flag_as_required(name)


def main(argv: List[str]) -> None:
    cli.reject_positional_arguments(PROG, argv)
    try:
        interaction_io.check_known_suffix(FLAGS.output)  # Before anything is read.
        excluded = table_collection.table_names_in(FLAGS.exclude_interactions)
        if FLAGS.exclude_tables:
            if not os.path.isfile(FLAGS.exclude_tables):
                raise FileNotFoundError(f"--exclude_tables={FLAGS.exclude_tables}: no such file")
            excluded |= table_collection.read_table_name_file(FLAGS.exclude_tables)
        tables, counts = table_collection.collect_tables(FLAGS.interactions, excluded)
        interaction_io.write_interactions(FLAGS.output, tables)
        if FLAGS.excluded_out:
            with open(FLAGS.excluded_out, "w", encoding="utf-8") as f:
                f.writelines(f"{name}\n" for name in sorted(excluded))
    except (ValueError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    print(f"{counts['tables_read']} distinct tables: {counts['kept']} kept, {counts['left_out_excluded']} left out "
          f"(among {len(excluded)} excluded names); {counts['duplicate_interactions']} further interactions of a "
          f"table already seen -> {FLAGS.output}")


if __name__ == "__main__":  # python -m tapas_tf.commands.collect_tables: the same as `tapas-tf collect-tables`.
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
