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

The training-data rule (`tapas_tf.data.training_tables`): given the releases, only tables that a
training split names are kept, and tables of Wikipedia pages that hold no table of another split:

    tapas-tf collect-tables --interactions=WTQ_OUT/interactions/train.tfrecord \
        --interactions='PAGES_OUT/interactions/*.tfrecord' --wtq_release=wtq --sqa_release=sqa \
        --tabfact_release=tabfact --wtq_pages=wikipedia/wtq_pages --output=OUT/train.tfrecord \
        --report=OUT/tables_report.json --manifest_out=OUT/training_tables.txt.gz \
        --rule_exclusions_out=OUT/exclude_for_wikipedia_job.txt

--report lists the tables used and those excluded, by reason; --manifest_out writes the kept
tables' manifest names (`wtq:csv/204-csv/590.csv`, `page:204-page/590#K`, ...), one per line;
--rule_exclusions_out writes every evaluation table and page in the format of
`create-pretrain-data --exclude_tables`. Without a release, a table of its form (a WTQ name, a
TabFact id) is excluded, counted as `*_release_not_given`, once any release is given; with none
given the rule is not applied, and the command says so.
"""

import json
import os
from typing import List

from absl import flags

import tapas_tf.cli as cli
from tapas_tf.commands import rule_flags
from tapas_tf.data import interaction_io, table_collection, table_manifest, training_tables

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
    rule_flags.define_flags(__name__)
    flags.DEFINE_string("report", None, "Write the tables used and excluded, by reason, here (JSON).")
    flags.DEFINE_string("manifest_out", None, "Write the kept tables' manifest names here (.txt or .txt.gz).")
    flags.DEFINE_string("rule_exclusions_out", None, "Write the rule's evaluation tables and pages here, for "
                        "create-pretrain-data --exclude_tables.")
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
        paths = interaction_io.expand_paths(FLAGS.interactions)
        tables, counts = table_collection.collect_tables(paths, excluded)
        rule = rule_flags.rule_from_flags()
        tables, decisions = _apply_rule(rule, tables)
        interaction_io.write_interactions(FLAGS.output, tables)
        _write_outputs(rule, tables, decisions, counts, excluded)
    except (ValueError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    print(f"{counts['tables_read']} distinct tables: {counts['kept']} kept, {counts['left_out_excluded']} left out "
          f"(among {len(excluded)} excluded names); {counts['duplicate_interactions']} further interactions of a "
          f"table already seen -> {FLAGS.output}")
    if rule is None:
        print("The training-data rule was not applied (no --wtq_release, --sqa_release or --tabfact_release): "
              "tables of the released data sets were kept unchecked.")
    else:
        by_reason = training_tables.count_decisions(d for _, d in decisions)
        print(f"Training-data rule: {len(tables)} of {len(decisions)} tables kept; excluded by reason "
              f"{json.dumps({r: n for r, n in by_reason.items() if r != training_tables.KEPT and n})}")


def _apply_rule(rule, tables):
    """(kept tables, [(table name, Decision)]) under the rule; all tables when there is none."""
    if rule is None:
        return tables, []
    decisions = [(t.id, rule.decide(t.table.table_id or t.id, t.table.document_title)) for t in tables]
    return [t for t, (_, d) in zip(tables, decisions) if d.kept], decisions


def _write_outputs(rule, tables, decisions, counts, excluded) -> None:
    if FLAGS.excluded_out:
        with open(FLAGS.excluded_out, "w", encoding="utf-8") as f:
            f.writelines(f"{name}\n" for name in sorted(excluded))
    if FLAGS.manifest_out:
        if rule is None:
            raise ValueError("--manifest_out needs a release (--wtq_release, --tabfact_release, ...): the "
                             "manifest names each table by the training-data rule's decision")
        table_manifest.write_manifest(FLAGS.manifest_out, (d.manifest_name for _, d in decisions if d.kept))
    if FLAGS.rule_exclusions_out:
        if rule is None:
            raise ValueError("--rule_exclusions_out needs a release (--wtq_release, --tabfact_release, ...)")
        with open(FLAGS.rule_exclusions_out, "w", encoding="utf-8") as f:
            f.writelines(f"{line}\n" for line in rule.exclusion_lines())
    if FLAGS.report:
        report = {"inputs": FLAGS.interactions, "collection": dict(counts), "rule_applied": rule is not None,
                  "tables_used": sorted(d.manifest_name for _, d in decisions if d.kept) if rule
                  else sorted(t.id for t in tables)}
        if rule is not None:
            report["excluded_by_reason"] = training_tables.count_decisions(d for _, d in decisions)
            report["tables_excluded"] = {name: d.reason for name, d in decisions if not d.kept}
        with open(FLAGS.report, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":  # python -m tapas_tf.commands.collect_tables: the same as `tapas-tf collect-tables`.
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
