"""Beam job: a task's release files -> interactions and classifier TFRecords.

    python beam_jobs/create_task_data.py --task=SQA --input_dir=DIR --output_dir=DIR \
        --vocab_file=vocab.txt [--runner=DirectRunner --direct_num_workers=2 ...]

Rows of tables that do not fit are dropped in dev and test (so that every evaluation question is
converted) and not in train, unless --drop_rows_to_fit or --nodrop_rows_to_fit sets it for every
split. TensorFlow's C++ start-up lines are hidden unless --verbosity=debug (`tapas_tf.cli`).

Writes, per split: `interactions/{split}.tfrecord`, `tf_examples/{split}.tfrecord`
and `failures/{split}.tsv` (file, lines, question id, reason, message: every input line or
question that did not become an example), then `conversion_report.json`, which accounts for
every line and question of every split (docs/DATA_CONTRACT.md).

While it runs, the questions and interactions done so far are shown on stderr: a live line on a
terminal, else a log line every 30 s (--noprogress_bar: neither). Only when the steps run in this
process: not with --runner=... or --direct_running_mode=multi_processing, whose workers are other
processes (the report's counts are the job's counts either way).
"""

import argparse
import contextlib
import functools
import json
import os
from typing import Optional, Sequence

from tapas_tf.cli import add_verbosity_flag, log_to_stderr, quiet_tensorflow

if __name__ == "__main__":
    quiet_tensorflow()  # First: TensorFlow reads TF_CPP_MIN_LOG_LEVEL once, when it loads.

import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from tapas_tf.data.paths import ensure_writable_dir  # noqa: E402
from tapas_tf.data.protos import interaction_pb2  # noqa: E402
from tapas_tf.data.readers import sqa, wikisql, wtq  # noqa: E402
from tapas_tf.features.conversion_config import ConversionConfig  # noqa: E402
from tapas_tf.pipelines import (  # noqa: E402
    beam_options, classifier_data, progress, reports, runners, task_files)
from tapas_tf.tasks import Split, Task  # noqa: E402

REPORT_FILE = reports.REPORT_FILE


# The reader of each task's release files; create_data is built for these tasks.
RELEASE_FILES = {
    Task.SQA: sqa.SqaFile,
    Task.WTQ: wtq.WtqFile,
    # The answer is the gold SQL's result: its cells (WIKISQL) or its cells and operator (SUPERVISED).
    Task.WIKISQL: functools.partial(wikisql.release_file, supervised=False),
    Task.WIKISQL_SUPERVISED: functools.partial(wikisql.release_file, supervised=True),
}
# Tasks whose answers are texts only: cells come from weak supervision (`data.answer_matching`),
# which drops unusable training questions by reason and keeps every evaluation question.
WEAKLY_SUPERVISED = frozenset({Task.WTQ})


def _release_file(task: Task, split: Optional[Split] = None):
    """The reader class of `task`, bound to the split's supervision mode where answers are texts."""
    if task not in RELEASE_FILES:
        raise ValueError(f"create_data is not built for {task.value} yet; it is for "
                         f"{', '.join(t.value for t in RELEASE_FILES)}")
    if task in WEAKLY_SUPERVISED and split is not None:
        return functools.partial(RELEASE_FILES[task], supervision="train" if split.is_training else "eval")
    return RELEASE_FILES[task]


def check_inputs(task: Task, input_dir: str, splits: Sequence[Split]) -> None:
    """Refuses, before anything runs, a split file that is missing or lacks a required column."""
    release_file = _release_file(task)
    for split in splits:
        release_file(os.path.join(input_dir, split.file_name), input_dir).check_header()


def build_pipeline(root, task: Task, input_dir: str, output_dir: str,
                   config: ConversionConfig, splits: Sequence[Split],
                   progress_key: Optional[str] = None) -> None:
    """Adds every split's read -> annotate -> convert -> write chain to `root`; with `progress_key`
    (a `progress.Progress.key`), each interaction read is reported to that progress."""
    for split in splits:
        paths = task_files.split_paths(output_dir, split.name)
        split_config = config.for_split(split.is_training)  # drop_rows_to_fit None: dev and test only.
        source = os.path.join(input_dir, split.file_name)
        read = root | f"{split.name}/Read" >> classifier_data.ReadReleaseFile(
            source, input_dir, _release_file(task, split))
        interactions = read.interactions
        if progress_key is not None:
            interactions = interactions | f"{split.name}/Progress" >> progress.CountItems(
                progress_key, classifier_data.progress_counts)
        annotated = interactions | f"{split.name}/AnnotateNumbers" >> classifier_data.AnnotateNumbers(source)
        (annotated.interactions
         | f"{split.name}/WriteInteractions" >> beam.io.WriteToTFRecord(
             paths["interactions"], coder=beam.coders.ProtoCoder(interaction_pb2.Interaction),
             shard_name_template=""))
        converted = annotated.interactions | f"{split.name}/ToExamples" >> classifier_data.ToClassifierExamples(
            split_config, source)
        (converted.examples
         | f"{split.name}/WriteExamples" >> beam.io.WriteToTFRecord(paths["examples"], shard_name_template=""))
        ((read.failed, annotated.failed, converted.failed)
         | f"{split.name}/AllFailures" >> beam.Flatten()
         | f"{split.name}/FormatFailures" >> beam.Map(classifier_data.format_failure)
         | f"{split.name}/WriteFailures" >> beam.io.WriteToText(
             paths["failures"], shard_name_template="", header="\t".join(classifier_data.FAILURE_COLUMNS)))


def run_create_data(task: Task, input_dir: str, output_dir: str, config: ConversionConfig,
                    pipeline_args: Optional[Sequence[str]] = None,
                    train_file_name: Optional[str] = None,
                    progress_settings: Optional[progress.ProgressSettings] = None) -> dict:
    """Runs the job and writes `conversion_report.json`; returns the report.

    `config.drop_rows_to_fit` None drops rows to fit in the evaluation splits (dev, test) only,
    so that every evaluation question is converted; True or False holds for every split.
    `train_file_name` replaces the task's train split file (WTQ's `training.tsv`).
    `progress_settings`: show the questions and interactions done while the job runs (when its
    steps run in this process; see `tapas_tf.pipelines.progress`); None shows nothing."""
    splits = task_files.available_splits(task, input_dir, train_file_name)
    check_inputs(task, input_dir, splits)
    options = PipelineOptions(list(pipeline_args or []))
    ensure_writable_dir(output_dir, "--output_dir")
    meter = progress.for_pipeline(progress_settings, options, "create_data", classifier_data.PROGRESS_UNITS)
    pipeline = beam.Pipeline(runner=runners.default_runner(options), options=options)
    build_pipeline(pipeline, task, input_dir, output_dir, config, splits,
                   progress_key=meter.key if meter else None)
    with meter or contextlib.nullcontext():
        result = pipeline.run()
        result.wait_until_finish()
    report = {"task": task.value, "input_dir": input_dir, "config": config.__dict__,
              **reports.collect_report(result, splits, output_dir, config)}
    with open(os.path.join(output_dir, REPORT_FILE), "w") as f:
        json.dump(report, f, indent=2)
    return report


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", required=True, choices=[t.value for t in Task])
    parser.add_argument("--input_dir", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--vocab_file", default=None, help="WordPiece vocabulary with [EMPTY]")
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--max_column_id", type=int, default=32)
    parser.add_argument("--max_row_id", type=int, default=64)
    parser.add_argument("--cell_trim_length", type=int, default=-1)
    parser.add_argument("--strip_column_names", action="store_true")
    parser.add_argument("--drop_rows_to_fit", action="store_true", default=None,
                        help="Drop trailing rows of tables that do not fit, in every split; default: in dev "
                             "and test only (every evaluation question is converted).")
    parser.add_argument("--nodrop_rows_to_fit", dest="drop_rows_to_fit", action="store_false",
                        help="Drop the questions whose tables do not fit, in every split.")
    parser.add_argument("--train_release_file", default=None,
                        help="The train split's file in --input_dir instead of the task's (WTQ: training.tsv).")
    progress.add_progress_flags(parser, "questions and interactions")
    add_verbosity_flag(parser)
    args, pipeline_args = parser.parse_known_args(argv)
    try:
        beam_options.check_pipeline_args(pipeline_args, parser._option_string_actions)
    except beam_options.PipelineArgsError as e:
        parser.error(str(e))  # One line and exit 2, as for our own flags.
    log_to_stderr(args.verbosity)
    from tapas_tf.features.vocab import resolve_vocab_file

    config = ConversionConfig(
        vocab_file=resolve_vocab_file(args.vocab_file), max_seq_length=args.max_seq_length,
        max_column_id=args.max_column_id, max_row_id=args.max_row_id,
        cell_trim_length=args.cell_trim_length, strip_column_names=args.strip_column_names,
        drop_rows_to_fit=args.drop_rows_to_fit)
    report = run_create_data(Task(args.task), args.input_dir, args.output_dir, config, pipeline_args,
                             train_file_name=args.train_release_file,
                             progress_settings=progress.ProgressSettings() if args.progress_bar else None)
    print(json.dumps(report["splits"], indent=2))


if __name__ == "__main__":
    main()
