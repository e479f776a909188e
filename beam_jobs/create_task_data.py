"""Beam job: a task's release files -> interactions and classifier TFRecords.

    report = run_create_data("SQA", input_dir, output_dir, conversion_config("SQA", vocab_file))

The job's command line is `tapas-tf create-data` (`python run_task.py --mode=create_data`,
`tapas_tf.commands.run_task`), which builds the `ConversionConfig` from its flags and hands what
it does not define to Beam's `PipelineOptions`. Every task is read by the reader its registration
names (`tapas_tf.task_registry`); `--task_module` loads a module of yours that registers more
(docs/ADDING_A_TASK.md).

Rows of tables that do not fit are dropped in dev and test (so that every evaluation question is
converted) and not in train, unless `config.drop_rows_to_fit` is set for every split.

Writes, per split: `interactions/{split}.tfrecord`, `tf_examples/{split}.tfrecord`
and `failures/{split}.tsv` (file, lines, question id, reason, message: every input line or
question that did not become an example), then `conversion_report.json`, which accounts for
every line and question of every split (docs/DATA_CONTRACT.md).
"""

import contextlib
import functools
import json
import os
from typing import List, Optional, Sequence, Union

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from tapas_tf.data.paths import ensure_writable_dir
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.release_reader import OpenReader, ReleaseReader
from tapas_tf.features.conversion_config import ConversionConfig
from tapas_tf.pipelines import (
    classifier_data, one_file, progress, reports, runners, task_files)
from tapas_tf.task_registry import TaskSpec, get_task, tasks_for
from tapas_tf.task_registry.presets import Split, Task

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


if __name__ == "__main__":  # python beam_jobs/create_task_data.py --task=SQA ...: the job's command line, as
    # `tapas-tf create-data` runs it (the same flags; Beam's pipeline options pass through).
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run("create-data", sys.argv[1:], prog="create_task_data.py"))
