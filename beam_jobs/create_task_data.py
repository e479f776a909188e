"""Beam job: a task's release files -> interactions and classifier TFRecords.

    python beam_jobs/create_task_data.py --task=SQA --input_dir=DIR --output_dir=DIR \
        --vocab_file=vocab.txt [--runner=DirectRunner --direct_num_workers=2 ...]
    python beam_jobs/create_task_data.py --task_module=my_task.py --task=MY_TASK ...

Every task is read by the reader its registration names (`tapas_tf.task_registry`); --task_module
loads a module of yours that registers more (docs/ADDING_A_TASK.md).

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
import sys
from typing import List, Optional, Sequence, Union

from tapas_tf.cli import add_verbosity_flag, log_to_stderr, quiet_tensorflow

if __name__ == "__main__":
    quiet_tensorflow()  # First: TensorFlow reads TF_CPP_MIN_LOG_LEVEL once, when it loads.

import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from tapas_tf.data.paths import ensure_writable_dir  # noqa: E402
from tapas_tf.data.protos import interaction_pb2  # noqa: E402
from tapas_tf.data.readers.release_reader import OpenReader, ReleaseReader  # noqa: E402
from tapas_tf.features.conversion_config import ConversionConfig  # noqa: E402
from tapas_tf.pipelines import (  # noqa: E402
    beam_options, classifier_data, one_file, progress, reports, runners, task_files)
from tapas_tf.task_registry import TaskSpec, conversion_config, get_task, task_names, tasks_for  # noqa: E402
from tapas_tf.task_registry.modules import (  # noqa: E402
    TaskModuleError, load_task_module, task_module_arguments)
from tapas_tf.tasks import Split, Task  # noqa: E402

REPORT_FILE = reports.REPORT_FILE
AnyTask = Union[str, Task, TaskSpec]


def _open_split(reader: OpenReader, is_training: bool, path: str, input_dir: str) -> ReleaseReader:
    return reader(path, input_dir, is_training)


def _release_file(spec: TaskSpec, split: Split) -> classifier_data.ReleaseFile:
    """The task's reader of one split: (path, input_dir) -> ReleaseReader (picklable, for Beam)."""
    return functools.partial(_open_split, spec.reader, split.is_training)


def _data_task(task: AnyTask) -> TaskSpec:
    """The registration of a task that create_data is built for."""
    spec = get_task(task)
    if "create_data" not in spec.modes:
        raise ValueError(f"create_data is not built for {spec.name}; it is for "
                         f"{', '.join(tasks_for('create_data'))}")
    return spec


def check_inputs(task: AnyTask, input_dir: str, splits: Sequence[Split]) -> None:
    """Refuses, before anything runs, a split file that is missing or lacks a required column."""
    spec = _data_task(task)
    for split in splits:
        _release_file(spec, split)(os.path.join(input_dir, split.file_name), input_dir).check_header()


def build_pipeline(root, task: AnyTask, input_dir: str, output_dir: str,
                   config: ConversionConfig, splits: Sequence[Split],
                   progress_key: Optional[str] = None) -> None:
    """Adds every split's read -> annotate -> convert -> write chain to `root`; with `progress_key`
    (a `progress.Progress.key`), each interaction read is reported to that progress."""
    spec = _data_task(task)
    for split in splits:
        paths = task_files.split_paths(output_dir, split.name)
        split_config = config.for_split(split.is_training)  # drop_rows_to_fit None: dev and test only.
        source = os.path.join(input_dir, split.file_name)
        read = root | f"{split.name}/Read" >> classifier_data.ReadReleaseFile(
            source, input_dir, _release_file(spec, split))
        interactions = read.interactions
        if progress_key is not None:
            interactions = interactions | f"{split.name}/Progress" >> progress.CountItems(
                progress_key, classifier_data.progress_counts)
        annotated = interactions | f"{split.name}/AnnotateNumbers" >> classifier_data.AnnotateNumbers(source)
        (annotated.interactions
         | f"{split.name}/WriteInteractions" >> one_file.WriteToOneFile(
             paths["interactions"], coder=beam.coders.ProtoCoder(interaction_pb2.Interaction)))
        converted = annotated.interactions | f"{split.name}/ToExamples" >> classifier_data.ToClassifierExamples(
            split_config, source)
        _ = converted.examples | f"{split.name}/WriteExamples" >> one_file.WriteToOneFile(paths["examples"])
        ((read.failed, annotated.failed, converted.failed)
         | f"{split.name}/AllFailures" >> beam.Flatten()
         | f"{split.name}/FormatFailures" >> beam.Map(classifier_data.format_failure)
         | f"{split.name}/WriteFailures" >> one_file.WriteToOneFile(
             paths["failures"], kind=one_file.TEXT, header="\t".join(classifier_data.FAILURE_COLUMNS)))


def run_create_data(task: AnyTask, input_dir: str, output_dir: str, config: ConversionConfig,
                    pipeline_args: Optional[Sequence[str]] = None,
                    train_file_name: Optional[str] = None,
                    progress_settings: Optional[progress.ProgressSettings] = None) -> dict:
    """Runs the job and writes `conversion_report.json`; returns the report.

    `task`: a registered task's name, its `Task` or its `TaskSpec` (`tapas_tf.task_registry`).

    `config.drop_rows_to_fit` None drops rows to fit in the evaluation splits (dev, test) only,
    so that every evaluation question is converted; True or False holds for every split.
    `train_file_name` replaces the task's train split file (WTQ's `training.tsv`).
    `progress_settings`: show the questions and interactions done while the job runs (when its
    steps run in this process; see `tapas_tf.pipelines.progress`); None shows nothing."""
    spec = _data_task(task)
    splits = task_files.available_splits(spec.name, spec.splits, input_dir, train_file_name)
    check_inputs(spec, input_dir, splits)
    options = PipelineOptions(list(pipeline_args or []))
    ensure_writable_dir(output_dir, "--output_dir")
    meter = progress.for_pipeline(progress_settings, options, "create_data", classifier_data.PROGRESS_UNITS)
    pipeline = beam.Pipeline(runner=runners.default_runner(options), options=options)
    build_pipeline(pipeline, spec, input_dir, output_dir, config, splits,
                   progress_key=meter.key if meter else None)
    with meter or contextlib.nullcontext():
        result = pipeline.run()
        result.wait_until_finish()
    report = {"task": spec.name, "input_dir": input_dir, "config": config.__dict__,
              **reports.collect_report(result, splits, output_dir, config)}
    with open(os.path.join(output_dir, REPORT_FILE), "w") as f:
        json.dump(report, f, indent=2)
    return report


def _rows_dropped_summary(split: dict) -> str:
    """How the split treated tables that do not fit, from its report entry."""
    drop = split["drop_rows_to_fit"]
    if drop["by_default"]:
        why = "the default for evaluation splits" if drop["enabled"] else "the default for training splits"
    else:
        why = "--drop_rows_to_fit" if drop["enabled"] else "--nodrop_rows_to_fit"
    if drop["enabled"]:
        questions = drop["questions"]
        return f"rows dropped to fit in {questions} question{'' if questions == 1 else 's'} ({why})"
    return f"rows not dropped to fit ({why}; questions that do not fit are dropped)"


def report_lines(report: dict) -> List[str]:
    """One line per split of a report: what was converted, skipped and dropped, and whether it adds up."""
    lines = []
    for name, split in report["splits"].items():
        lines.append(
            f"{name}: {split['examples_written']} of {split['questions_read']} questions converted, "
            f"{sum(split['lines']['skipped'].values())} of {split['lines_read']} lines unreadable; skipped "
            f"{json.dumps(split['lines']['skipped'] | split['skipped'])}; "
            f"dropped {json.dumps(split['dropped'])}; "
            f"{_rows_dropped_summary(split)}"
            + ("" if split["adds_up"] else " (THE COUNTS DO NOT ADD UP: see the failures file)"))
    return lines


def _load_task_modules(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Imports the --task_module modules before the flags are parsed, so that --task knows their tasks."""
    for name in task_module_arguments(["", *argv]):
        try:
            load_task_module(name)
        except TaskModuleError as e:
            parser.error(f"--task_module={name}: {e}")


def main(argv: Optional[Sequence[str]] = None) -> None:
    argv: List[str] = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _load_task_modules(parser, argv)
    parser.add_argument("--task", required=True, choices=task_names())
    parser.add_argument("--task_module", action="append", default=[],
                        help="A module (a .py file or a module name) that registers tasks of your own.")
    parser.add_argument("--input_dir", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--vocab_file", default=None, help="WordPiece vocabulary with [EMPTY]")
    # Conversion options: None takes the task's (`task_registry.conversion_config`).
    parser.add_argument("--max_seq_length", type=int, default=None, help="default: the task's (512)")
    parser.add_argument("--max_column_id", type=int, default=None, help="default: the task's, else 32")
    parser.add_argument("--max_row_id", type=int, default=None, help="default: the task's, else 64")
    parser.add_argument("--cell_trim_length", type=int, default=None, help="default: the task's, else -1")
    parser.add_argument("--strip_column_names", action="store_true", default=None)
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
    config = conversion_config(
        args.task, args.vocab_file, max_seq_length=args.max_seq_length, max_column_id=args.max_column_id,
        max_row_id=args.max_row_id, cell_trim_length=args.cell_trim_length,
        strip_column_names=args.strip_column_names, drop_rows_to_fit=args.drop_rows_to_fit)
    report = run_create_data(args.task, args.input_dir, args.output_dir, config, pipeline_args,
                             train_file_name=args.train_release_file,
                             progress_settings=progress.ProgressSettings() if args.progress_bar else None)
    print(json.dumps(report["splits"], indent=2))


if __name__ == "__main__":
    main()
