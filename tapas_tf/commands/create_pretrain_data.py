"""Command line: Wikipedia pages -> Interactions -> masked-LM pre-training examples (a Beam job).

    tapas-tf create-pretrain-data --output_dir=out/pretrain \\
        --input_dumps='dumps/enwiki-*-pages-articles*.xml.bz2' \\
        --input_pages='wtq_pages/*/*.html.gz' [--exclude_tables=eval_tables.txt] \\
        [--wtq_release=wtq --sqa_release=sqa --tabfact_release=tabfact --wtq_pages=wtq_pages] \\
        [--stage=all|extract|examples] [--input_interactions='interactions.txtpb.gz'] \\
        [--runner=DataflowRunner --project=... --region=... --temp_location=gs://... \\
         --setup_file=./setup.py] [--direct_num_workers=2 --direct_running_mode=multi_processing]

Stages (--stage, default all, both in one pipeline): extract reads dumps (--input_dumps) and
rendered pages (--input_pages) and writes Interactions to OUTPUT_DIR/interactions/ (one-line text
protos, the format of Google's released corpus, or TFRecords with --interactions_format=tfrecord);
examples turns Interactions (extract's, or --input_interactions, e.g. Google's released
`interactions.txtpb.gz`) into OUTPUT_DIR/tf_examples/{train,test}-SSSSS-of-NNNNN.tfrecord. Then
OUTPUT_DIR/pretrain_report.json with every counter, which is also printed.

With the releases (--wtq_release, --sqa_release, --tabfact_release, --wtq_pages) the training-data
rule applies: tables of evaluation splits and of pages that hold one are left out and counted by
reason, and the tables kept are listed in OUTPUT_DIR/training_tables.txt.gz.

An input file that cannot be read to its end (a truncated bz2 dump or gzip file, broken XML, a page
that is not UTF-8) keeps what was read before the damage, is listed in OUTPUT_DIR/failures/files.tsv
with the byte or line where it broke off, and makes the exit status 1 (--allow_file_failures: 0).

While it runs, the pages, interactions and examples done so far are shown on stderr: a live line on
a terminal, else a log line every 30 s (--noprogress_bar: neither); only when the steps run in this
process, not with --runner=... or --direct_running_mode=multi_processing. Flags that this job does
not define go to Beam, if Beam's pipeline options know them (a mistyped flag is one line naming the
nearest). The job itself: `tapas_tf.beam_jobs.create_pretrain_data`.
"""

import json
from typing import List

from absl import flags

import tapas_tf.cli as cli
from tapas_tf.beam_jobs import create_pretrain_data as job
from tapas_tf.features.pretrain_config import PretrainConfig
from tapas_tf.pipelines import beam_options, progress

PROG = "create-pretrain-data"
FLAGS = flags.FLAGS


def define_flags() -> None:
    cli.define_config_flags(job.PretrainJob, __name__)
    cli.define_config_flags(PretrainConfig, __name__)
    flags.DEFINE_bool("progress_bar", True, "Show the pages, interactions and examples done while the job runs: a "
                      "live line on a terminal, else a log line every 30 s.")


def main(argv: List[str]) -> None:
    pipeline_args = argv[1:]  # What our flags did not take: Beam's.
    try:
        beam_options.check_pipeline_args(pipeline_args, other_flags=cli.absl_flag_names())
    except beam_options.PipelineArgsError as e:
        cli.fail(PROG, str(e), cli.USAGE_EXIT_CODE)
    try:
        pretrain_job = cli.config_from_flags(job.PretrainJob)
        config = None
        if pretrain_job.stage in ("all", "examples"):
            from tapas_tf.features.vocab import resolve_vocab_file

            config = cli.config_from_flags(PretrainConfig, skip=("vocab_file",),
                                           vocab_file=resolve_vocab_file(FLAGS.vocab_file))
        report = job.run(pretrain_job, config, pipeline_args,
                         progress_settings=progress.ProgressSettings() if FLAGS.progress_bar else None)
    except (ValueError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    if report.get("dry_run"):
        # Nothing ran, so there is nothing to count: say so rather than print empty counters.
        print(f"Dry run: the job graph was translated and nothing was submitted or written; staged for the "
              f"workers: {', '.join(report.get('extra_packages') or []) or 'nothing'}")
        return
    print(json.dumps(report["counters"], indent=2))
    failures = report.get("file_failures") or []
    if failures and not pretrain_job.allow_file_failures:
        listed = "; ".join(f["message"] for f in failures[:3]) + ("; ..." if len(failures) > 3 else "")
        cli.fail(PROG, f"{len(failures)} input file(s) could not be read to the end (what came before the damage "
                 f"was kept; all are in {job.FILE_FAILURES_FILE} of --output_dir; --allow_file_failures to accept "
                 f"them): {listed}", cli.ERROR_EXIT_CODE)


if __name__ == "__main__":  # python -m tapas_tf.commands.create_pretrain_data: the same as `tapas-tf create-pretrain-data`.
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
